# tests/mem_equal.py FILE: exit 0 when every number of the ledger's "predicted"
# equals the "measured" one in a --mem-json file (tests/e2e/*.sh and run_cuda.sh),
# the rows by location ("at") and each location's peak ("peak_at") included.
import json, sys
d = json.load(open(sys.argv[1]))
p, m = d["predicted"], d["measured"]


def flat(x, path=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from flat(v, path + (k,))
    else:
        yield path, x


fp, fm = dict(flat(p)), dict(flat(m or {}))
bad = [(" / ".join(k), fp.get(k), fm.get(k)) for k in sorted(set(fp) | set(fm)) if fp.get(k, 0) != fm.get(k, 0)]
for b in bad: print("  mismatch", *b)
sys.exit(1 if bad or not p or not m else 0)
