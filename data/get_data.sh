#!/usr/bin/env bash
# Put the default corpus at data/tinyshakespeare.txt: copy it from
# ../shared/data when that folder is beside the project, else download it.
set -euo pipefail
cd "$(dirname "$0")"
want=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
out=tinyshakespeare.txt
shared=../../shared/data/tinyshakespeare.txt
url=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; then exit 0; fi
trap 'rm -f "$out.part"' EXIT
if [ -f "$shared" ]; then
  src=../shared/data/$out; cp "$shared" "$out.part"
else
  src=$url; echo "downloading $url"
  if command -v curl >/dev/null; then fetch=(curl -fsSL "$url" -o "$out.part")
  elif command -v wget >/dev/null; then fetch=(wget -q "$url" -O "$out.part")
  else echo "error: need curl or wget to download the corpus" >&2; exit 1; fi
  if ! "${fetch[@]}"; then
    echo "error: could not download the corpus (no network?): copy tinyshakespeare.txt (sha256 $want)" >&2
    echo "       to data/$out, or place the project beside ../shared/data/, and run make data again" >&2
    exit 1
  fi
fi
got=$(sha256sum "$out.part" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "error: the corpus from $src has sha256 $got, expected $want (not tinyshakespeare.txt," >&2
  echo "       or cut short): copy the right file to data/$out, and run make data again" >&2
  exit 1
fi
mv "$out.part" "$out"
echo "data/$out ready ($(wc -c < "$out") bytes)"
