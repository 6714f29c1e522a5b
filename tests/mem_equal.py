# tests/mem_equal.py FILE: exit 0 when every number of the ledger's "predicted"
# equals the "measured" one in a --mem-json file (run.sh and run_cuda.sh).
import json, sys
d = json.load(open(sys.argv[1]))
p, m = d["predicted"], d["measured"]
bad = [(ph, k, p[ph][k], m[ph][k]) for ph in p for k in p[ph] if p[ph][k] != m[ph][k]]
for b in bad: print("  mismatch", *b)
sys.exit(1 if bad or not p else 0)
