"""Same pure-Python work (~0.5 s CPU) in 1, 2 and 4 processes at once: CPU time per process.
Shows how much slower the same code runs when the two cores are shared (cache, host SMT)."""
import json, subprocess, sys, time
WORK = r'''
import json, time
c0 = time.process_time()
d = {"path": "part-00000.parquet", "stats": "{\"numRecords\":1}", "size": 123, "pv": {}}
s = 0
for i in range(60000):
    t = json.dumps(d); o = json.loads(t); s += len(o["path"]) + i % 7
    l = sorted([(str(i % 97), j) for j in range(8)])
print(time.process_time() - c0)
'''
def run(n):
    ps = [subprocess.Popen([sys.executable, "-c", WORK], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    return [float(p.communicate()[0]) for p in ps]
for n in (1, 2, 4, 1, 2, 4):
    t0 = time.monotonic(); cpu = run(n); wall = time.monotonic() - t0
    print(f"{n} procs: cpu per proc {sum(cpu)/n:.3f} s (min {min(cpu):.3f} max {max(cpu):.3f}), wall {wall:.2f} s", flush=True)
