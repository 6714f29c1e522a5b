#!/usr/bin/env python3
"""scripts/explorer/build.py WASM CORPUS OUT — the explorer page (make explorer): page.html with
wasi.js, explorer.js and train.wasm (./train for WebAssembly, base64) inlined, one file that opens
from the file system or any static host. CORPUS: the default corpus, whose size the page's dry runs
stat as ./train's do (its data row); its bytes are not carried."""
import base64
import json
import os
import sys

wasm, corpus, out = sys.argv[1:4]
here = os.path.dirname(os.path.abspath(__file__))
page = open(os.path.join(here, "page.html")).read()
sizes = {"data/tinyshakespeare.txt": os.path.getsize(corpus)} if os.path.exists(corpus) else {}
for key, text in [("/*CORPUS*/", json.dumps(sizes)),
                  ("/*TRAIN_WASM*/", base64.b64encode(open(wasm, "rb").read()).decode()),
                  ("/*WASI_JS*/", open(os.path.join(here, "wasi.js")).read()),
                  ("/*EXPLORER_JS*/", open(os.path.join(here, "explorer.js")).read())]:
    assert page.count(key) == 1, key
    page = page.replace(key, text)
tmp = out + ".tmp"
with open(tmp, "w") as f:
    f.write(page)
os.replace(tmp, out)
print(f"wrote {out}: {len(page) / 1024:.0f} KiB ({os.path.getsize(wasm) / 1024:.0f} KiB of WebAssembly)")
