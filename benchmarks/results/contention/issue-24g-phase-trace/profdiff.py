"""Per-op CPU by function: W writers' cProfile vs the same-total serial writer's."""
import glob, pstats, sys
d = sys.argv[1]; W = int(sys.argv[2]); ops = 50 * W
def load(pattern):
    st = None
    for p in glob.glob(pattern):
        s = pstats.Stats(p)
        st = s if st is None else (st.add(s) or st)
    return st.stats
par = load(f"{d}/writer-[0-9]*-of-{W}.prof"); ser = load(f"{d}/writer-all-of-{W}.prof")
def agg(stats):
    out = {}
    for (f, l, n), (cc, nc, tt, ct, callers) in stats.items():
        key = f"{f.split('site-packages/')[-1].split('dvengine/')[-1]}:{l}:{n}"
        out[key] = (nc, tt, ct)
    return out
a, b = agg(par), agg(ser)
keys = set(a) | set(b)
rows = []
for k in keys:
    na, ta, ca = a.get(k, (0, 0, 0)); nb, tb, cb = b.get(k, (0, 0, 0))
    rows.append((ca - cb, ta - tb, k, na / ops, nb / ops, 1000 * ca / ops, 1000 * cb / ops, 1000 * ta / ops, 1000 * tb / ops))
tot_a = sum(v[1] for v in a.values()); tot_b = sum(v[1] for v in b.values())
print(f"total tottime ms/op: W={W} {1000*tot_a/ops:.2f}  serial {1000*tot_b/ops:.2f}")
print("== by cumulative diff (ms/op) ==")
for r in sorted(rows, reverse=True)[:60]:
    print(f"{1000*r[0]/ops:7.3f} cum  calls/op {r[3]:6.2f} vs {r[4]:6.2f}  cum {r[5]:6.3f} vs {r[6]:6.3f}  {r[2]}")
print("== by tottime diff (ms/op) ==")
for r in sorted(rows, key=lambda r: -r[1])[:60]:
    print(f"{1000*r[1]/ops:7.3f} tot  calls/op {r[3]:6.2f} vs {r[4]:6.2f}  tot {r[7]:6.3f} vs {r[8]:6.3f}  {r[2]}")
