"""GC pause timer for contention writers (DV_GCTRACE=<dir> and --worker in argv)."""
import os
import sys

if os.environ.get("DV_GCTRACE") and "--worker" in sys.argv:
    import atexit
    import gc
    import json
    import time
    stats = {"n": [0, 0, 0], "cpu": [0.0, 0.0, 0.0], "wall": [0.0, 0.0, 0.0]}
    t = {}
    def cb(phase, info):
        if phase == "start":
            t["c"], t["w"] = time.thread_time(), time.perf_counter()
        elif "c" in t:
            g = info["generation"]
            stats["n"][g] += 1
            stats["cpu"][g] += time.thread_time() - t["c"]
            stats["wall"][g] += time.perf_counter() - t["w"]
    gc.callbacks.append(cb)
    def dump():
        i = sys.argv.index("--worker")
        out = sys.argv[i + 6]
        with open(os.path.join(os.environ["DV_GCTRACE"], os.path.basename(out) + f"-{sys.argv[i + 3]}.gc.json"), "w") as f:
            json.dump(stats, f)
    atexit.register(dump)
