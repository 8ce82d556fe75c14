"""The check quoted in benchmarks/README.md: 250-round medians of both contenders, each detrended by a
log-linear fit, and the correlation of what is left (run from the repository root)."""
import json
import numpy as np
r = json.load(open("benchmarks/results/soak/main-19230b4-10000-with-deltars/uniform-10000/soak.json"))
res = r.get("contenders") or r.get("results")
dv = np.array(res["dvengine"]["latencies_ms"]); rs = np.array(res["delta-rs"]["latencies_ms"])
w = 250
def roll(x): return np.array([np.median(x[i:i + w]) for i in range(0, len(x) - w + 1, w)])
a, b = roll(dv), roll(rs)
t = np.arange(len(b))
fa, fb = (np.polyval(np.polyfit(t, np.log(x), 1), t) for x in (a, b))
print("corr of detrended log rolling medians (window 250):", np.corrcoef(np.log(a) - fa, np.log(b) - fb)[0, 1])
print("dv trend over run: x%.2f ; delta-rs trend x%.2f" % (np.exp(fa[-1] - fa[0]), np.exp(fb[-1] - fb[0])))
