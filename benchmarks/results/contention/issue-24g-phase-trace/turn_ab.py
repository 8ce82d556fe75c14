"""CPU per wait for a taken commit turn: base tree (a thread per wait) vs branch (one waiter thread).
A holder process takes the lock for ~0.5 ms, lets go for ~0.2 ms, in a loop; this process takes
the turn N times per variant, alternating, and reports process CPU (all threads) per take."""
import importlib.util, os, subprocess, sys, tempfile, time
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
old = load("cl_old", "/tmp/24g/base/dvengine/commit/commit_lock.py")
new = load("cl_new", "/work/wt-24g/dvengine/commit/commit_lock.py")
log = tempfile.mkdtemp(prefix="turn-ab-")
path = old.lock_path(log)
holder = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, time
fd = os.open({path!r}, os.O_RDWR | os.O_CREAT, 0o666)
end = time.monotonic() + 60
while time.monotonic() < end:
    fcntl.flock(fd, fcntl.LOCK_EX); t = time.monotonic()
    while time.monotonic() - t < 0.0005: pass
    fcntl.flock(fd, fcntl.LOCK_UN); time.sleep(0.0002)
"""])
time.sleep(0.3)
N = 300
res = {"old": [], "new": []}
for rep in range(6):
    for name, mod in (("old", old), ("new", new)):
        c0, w0 = time.process_time(), time.monotonic(); waited = 0
        for _ in range(N):
            if name == "old":
                taken = mod.turn_taken(log)
                with mod.commit_turn(log) as held: assert held
            else:
                turn = mod.CommitTurn(log); taken = turn.taken()
                with turn.held() as held: assert held
            waited += taken
        res[name].append(((time.process_time() - c0) / N * 1e6, (time.monotonic() - w0) / N * 1e6, waited / N))
holder.kill()
for name, rows in res.items():
    cpu = sorted(r[0] for r in rows)
    print(f"{name}: probe + take CPU per commit us: median {cpu[len(cpu)//2]:.1f} min {cpu[0]:.1f} max {cpu[-1]:.1f}; "
          f"wall per take {sorted(r[1] for r in rows)[len(rows)//2]:.0f} us; probe found it taken {sum(r[2] for r in rows)/len(rows):.2f}")
