"""Z85 decode/encode of a hot file's inline DV text: base tree vs branch, interleaved, min of runs."""
import importlib.util, random, sys, time
from pyroaring import BitMap64
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
old = load("z85_old", "/tmp/24g/base/dvengine/dv/z85.py")
new = load("z85_new", "/work/wt-24g/dvengine/dv/z85.py")
sys.path.insert(0, "/work/wt-24g")
from dvengine.dv.bitmap import serialize_bitmap
random.seed(1)
def t(f, n=2000):
    best = 1e9
    for _ in range(7):
        t0 = time.thread_time()
        for _ in range(n): f()
        best = min(best, (time.thread_time() - t0) / n * 1e6)
    return best
for card in (100, 200, 400, 800):
    rows = BitMap64(random.sample(range(100000), card)); ser = serialize_bitmap(rows); txt = old.z85_encode(ser)
    assert new.z85_encode(ser) == txt and new.z85_decode(txt, len(ser)) == old.z85_decode(txt, len(ser))
    print(f"{len(txt):5d} chars: decode old {t(lambda: old.z85_decode(txt, len(ser))):5.1f} us new {t(lambda: new.z85_decode(txt, len(ser))):5.1f} | "
          f"encode old {t(lambda: old.z85_encode(ser)):5.1f} new {t(lambda: new.z85_encode(ser)):5.1f}", flush=True)
