#!/usr/bin/env bash
# Put the default corpus at data/tinyshakespeare.txt: copy it from
# ../shared/data when that folder is beside the project, else download it
# (with a time limit). The bytes go to a part of this run's own
# (tinyshakespeare.txt.XXXXXX), checked, then renamed: runs at once (two
# `make`s) each make their own part, and the first whole one wins.
set -euo pipefail
cd "$(dirname "$0")"
want=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
out=tinyshakespeare.txt
shared=../../shared/data/tinyshakespeare.txt
url=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
ready() { [ -f "$out" ] && [ ! -L "$out" ] && [ "$(sha256sum "$out" | cut -d' ' -f1)" = "$want" ]; }
if [ -e "$out" ] && [ ! -f "$out" ]; then
  echo "error: data/$out exists and is not a file (a folder, a fifo or a device): move it away, and run make data again" >&2
  exit 1
fi
if ready; then exit 0; fi
part=$(mktemp "$out.XXXXXX")
trap 'rm -f "$part"' EXIT
if [ -f "$shared" ]; then
  src=../shared/data/$out; cp "$shared" "$part"
else
  src=$url; echo "downloading $url"
  if command -v curl >/dev/null; then fetch=(curl -fsSL --connect-timeout 20 --max-time 300 "$url" -o "$part")
  elif command -v wget >/dev/null; then fetch=(wget -q --timeout=20 --tries=2 "$url" -O "$part")
  else echo "error: need curl or wget to download the corpus" >&2; exit 1; fi
  if ! "${fetch[@]}"; then
    echo "error: could not download the corpus (no network, or it stalled past the time limit): copy tinyshakespeare.txt" >&2
    echo "       (sha256 $want) to data/$out, or place the project beside ../shared/data/, and run make data again" >&2
    exit 1
  fi
fi
got=$(sha256sum "$part" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "error: the corpus from $src has sha256 $got, expected $want (not tinyshakespeare.txt," >&2
  echo "       or cut short): copy the right file to data/$out, and run make data again" >&2
  exit 1
fi
chmod 644 "$part"
if ready; then exit 0; fi  # (another run finished first: its file is the same bytes)
mv -f "$part" "$out"
echo "data/$out ready ($(wc -c < "$out") bytes)"
