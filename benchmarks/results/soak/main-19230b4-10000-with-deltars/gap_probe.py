"""Does an idle gap before a dvengine soak round make the round slower? Within one process, rounds
are preceded at random by no gap, a sleep, or a memory/disk churn like a delta-rs round."""
import os, random, resource, sys, tempfile, time, gc, statistics
import numpy as np
from dvengine.bench.soak import KeyModel, DvengineContender, DeltaRsContender, _rows, DELETE_EVERY

rounds = int(sys.argv[1]); gap = float(sys.argv[2]); warm = int(sys.argv[3]) if len(sys.argv) > 3 else 300
rng = np.random.default_rng(22)
model = KeyModel("uniform", 1_000_000, rng)
work = tempfile.mkdtemp(prefix="gap-probe-")
base = model.base(); gc.freeze()
c = DvengineContender(os.path.join(work, "dv"), True); c.create(base)
rs = DeltaRsContender(os.path.join(work, "rs")); rs.create(base)
pick = random.Random(5)
out = {"none": [], "sleep": [], "churn": [], "deltars": []}
scratch = os.path.join(work, "churn.bin")
for r in range(1, warm + rounds + 1):
    kind = "none" if r <= warm else pick.choice(["none", "sleep", "churn", "deltars"])
    if kind == "sleep":
        time.sleep(gap)
    elif kind == "churn":
        t_end = time.perf_counter() + gap
        while time.perf_counter() < t_end:
            a = np.random.default_rng(r).integers(0, 1 << 60, 3_000_000)  # 24 MB touched, freed
            np.sort(a)
        with open(scratch, "wb") as f:
            f.write(os.urandom(1 << 20) * 20)
    keys = model.upsert_keys(); source = _rows(np.array(keys, dtype=np.int64), r, rng)
    doomed = model.delete_keys() if r % DELETE_EVERY == 0 else []
    if kind == "deltars":
        rs.upsert(source)
        if doomed: rs.delete(doomed)
    os.sync()
    ru0 = resource.getrusage(resource.RUSAGE_SELF); c0 = time.process_time(); th0 = time.thread_time(); t0 = time.perf_counter()
    c.upsert(source)
    if doomed: c.delete(doomed)
    t1 = time.perf_counter(); c1 = time.process_time(); th1 = time.thread_time(); ru1 = resource.getrusage(resource.RUSAGE_SELF)
    c.settle()
    model.apply_upsert(keys, r); model.apply_delete(doomed)
    if r > warm:
        out[kind].append(((t1 - t0) * 1000, (c1 - c0) * 1000, ru1.ru_minflt - ru0.ru_minflt, ru1.ru_majflt - ru0.ru_majflt, ru1.ru_nivcsw - ru0.ru_nivcsw, (th1 - th0) * 1000))
for k, v in out.items():
    if not v: continue
    lat = [x[0] for x in v]; cpu = [x[1] for x in v]; flt = [x[2] for x in v]
    print(f"{k:6s} n={len(v)} wall p50 {statistics.median(lat):.1f} p25-p75 {np.percentile(lat,25):.1f}-{np.percentile(lat,75):.1f} cpu p50 {statistics.median(cpu):.1f} minflt p50 {statistics.median(flt):.0f} majflt {sum(x[3] for x in v)} invcsw p50 {statistics.median([x[4] for x in v]):.0f} thread-cpu p50 {statistics.median([x[5] for x in v]):.1f}")
