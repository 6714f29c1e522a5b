#!/usr/bin/env python3
"""tests/doc_names.py — every file and function the docs send a reader to exists in the code.

Reads README.md and doc/*.md. In each, the text in backticks is checked when it looks like
  - a path in the tree (`model.h`, `cpu/storage.h`, `tests/e2e/zero.sh`, `gpu/`): it must exist,
    relative to the repository root or, for a room, to lib/ (a header is named by its include path:
    `cpu/storage.h` is lib/cpu/storage.h); a `path:line` or `path#anchor` is checked for its path; a
    bare file name may be one in a folder, or a file a script writes (`summary.txt`); a path may be a
    file the Makefile builds (a rule's target: `tests/test_cpu`, `doc/explorer.html`) before it is built;
  - a C name (`block_forward`, `gpu_block_forward()`, `cu_gelu_forward`): a lowercase identifier with
    an underscore, or any identifier followed by `()`, must appear as a word in a source file.
Flags (`--ckpt`), commands with spaces, numbers, and names in ```text blocks (program output) are
not checked. And every source a page cites can be found: a markdown link to a page of the tree names
a file that exists and, with #anchor, a heading or an id="anchor" of that page; no page cites
"seed 002" (a file a reader of the docs does not have): sources are cited in doc/references.md. Prints PASS or FAIL lines in the style of tests/run.sh; exits 1 on a missing name.
tests/doc_names.py FILE... checks those files instead.
"""
import glob
import os
import re
import sys

given = [os.path.abspath(f) for f in sys.argv[1:]]  # other files to check instead (the test's negative control)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(root)

docs = given or ["README.md"] + sorted(glob.glob("doc/*.md"))
sources = [f for pat in ("*.c", "*.h", "*/*.h", "lib/*/*.h", "*/*.c", "*/*.cu", "*/*.cuh", "tests/*.c", "tests/*.h",
                         "scripts/*.c", "scripts/*.py", "scripts/*.sh", "tests/*.sh", "tests/*.py",
                         "tests/e2e/*.sh", "Makefile")
           for f in glob.glob(pat)]
words, written = set(), ""
for f in sources:
    with open(f, errors="replace") as fh:
        text = fh.read()
    words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    written += text

# The files the Makefile builds (a rule's target): the docs may send a reader to one before it is built,
# or to an optional part a machine leaves out (`make explorer`'s doc/explorer.html needs clang's wasm32 target).
with open("Makefile") as fh:
    built = set(re.findall(r"^([\w./-]+):", fh.read(), re.M))

PATH_TAIL = re.compile(r"\.(h|c|cu|cuh|sh|py|md|txt|csv|json)$|/$")
C_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
C_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\)$")


def spans(text):
    """The backticked spans outside fenced blocks, with their line numbers."""
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in re.finditer(r"`([^`\n]+)`", line):
            yield no, m.group(1).strip()


missing, paths, names = [], 0, 0
for doc in docs:
    with open(doc) as fh:
        text = fh.read()
    for no, span in spans(text):
        if " " in span or span.startswith(("-", "$", ".")):
            continue
        path = re.split(r"[:#]", span)[0]
        if "/" in path or PATH_TAIL.search(path):
            if path.startswith(("../", "/", "http", "~")) or "*" in path or "<" in path or "N" == path:
                continue
            if not (path.startswith("doc/") or "/" not in path or os.path.exists(path) or path in built or
                    os.path.exists("lib/" + path)):
                missing.append(f"{doc}:{no}: `{span}`: no such file")
            elif "/" not in path and PATH_TAIL.search(path) and not (
                    os.path.exists(path) or os.path.exists(os.path.join(os.path.dirname(doc), path))
                    or glob.glob(f"*/{path}") or glob.glob(f"*/*/{path}") or glob.glob(f"lib/*/{path}")
                    or f"/{path}" in written):
                missing.append(f"{doc}:{no}: `{span}`: no such file")
            elif path.startswith("doc/") and not (os.path.exists(path) or path in built):
                missing.append(f"{doc}:{no}: `{span}`: no such file")
            paths += 1
            continue
        call = C_CALL.match(span)
        name = call.group(1) if call else span if C_NAME.match(span) else None
        if name is None:
            continue
        names += 1
        if name not in words:
            missing.append(f"{doc}:{no}: `{span}`: no such name in the code")



def anchors(page):
    """The #anchors a page has: its headings, as GitHub spells them, and its id="..."."""
    with open(page) as fh:
        text = fh.read()
    found = set(re.findall(r'id="([^"]+)"', text))
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return found


links = 0
for doc in docs:
    with open(doc) as fh:
        text = fh.read()
    for no, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"\bseeds?[ /]?0\d\d\b|shared/seeds", line, re.I):
            missing.append(f"{doc}:{no}: '{m.group(0)}': a source no reader can find (cite it in doc/references.md)")
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            target = m.group(1)
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            page, _, anchor = target.partition("#")
            page = os.path.normpath(os.path.join(os.path.dirname(doc), page)) if page else doc
            links += 1
            if not (os.path.exists(page) or os.path.relpath(page) in built):
                missing.append(f"{doc}:{no}: link ({target}): no such file")
            elif anchor and page.endswith(".md") and anchor not in anchors(page):
                missing.append(f"{doc}:{no}: link ({target}): {page} has no #{anchor}")

if missing:
    print(f"FAIL the docs cite {len(missing)} files or names that do not exist:")
    for m in missing:
        print("  " + m)
    sys.exit(1)
print(f"PASS every file ({paths}) and C name ({names}) the docs cite exists in the code, every link ({links}) "
      "reaches its page and anchor, and no page cites a source a reader cannot find")
