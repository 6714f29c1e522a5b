#!/usr/bin/env bash
# tests/e2e/explorer.sh — the explorer page (doc/explorer.html, make explorer) in a real browser:
# tests/explorer.py drives headless Chromium through Selenium (Debian's, for Debian's python3). Every
# number the page shows equals ./train --dry-run --mem-json's for 200 random settings; every control
# changes the view; bad settings show the binary's message; no console error. SKIP without the page's
# toolchain or without a browser. Run by tests/run.sh (make test); prints PASS / FAIL / SKIP lines.
set -u
cd "$(dirname "$0")/../.."
source tests/lib.sh
py=/usr/bin/python3
[ -x "$py" ] || py=python3
out=$("$py" tests/explorer.py --settings 200 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || echo "$out" | grep -q '^FAIL ' || bad "explorer: tests/explorer.py ended with exit $rc: $(echo "$out" | tail -1)"
# doc/explorer.md's size of the page is the built page's, within 10%
if [ -f doc/explorer.html ]; then
  said=$(sed -n 's/.*(one file, about \([0-9]*\) KiB).*/\1/p' doc/explorer.md); got=$(( $(stat -c %s doc/explorer.html) / 1024 ))
  if [ -n "$said" ] && [ $((got * 10)) -ge $((said * 9)) ] && [ $((got * 10)) -le $((said * 11)) ]; then
    ok "doc/explorer.md's 'about $said KiB' is the page's $got KiB"
  else bad "doc/explorer.md says about ${said:-?} KiB; the page is $got KiB"; fi
fi
echo "END tests/e2e/explorer.sh"
