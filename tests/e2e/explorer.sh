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
echo "END tests/e2e/explorer.sh"
