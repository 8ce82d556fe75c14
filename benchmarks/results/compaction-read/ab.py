"""A/B: a compaction bin read file by file (before) vs through read.many_files' pool (after).

Table as the soak leaves it before a compaction: a 1M-row base file with a DV (40,000 rows deleted),
49 small files of 100 rows (every third with a DV). Times, in one process, alternating, the read
half of ``rewrite_files`` for the 49 small files (an auto compaction's bin) and for the base file
alone (a DV purge), 31 times each; prints p50 and min-max in ms, and checks both give equal tables.

Run: PYTHONPATH=<repo> python benchmarks/results/compaction-read/ab.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local.optimize import live_rows
from dvengine.log import load_snapshot
from dvengine.protocol.schema import to_arrow_schema
from dvengine.read.arrow_reader import read_file_arrow


def _before(snapshot, files):  # the code this change replaced
    names = to_arrow_schema(snapshot.schema).names
    return pa.concat_tables([read_file_arrow(snapshot, add).select(names) for add in files])


def _rows(ids: np.ndarray) -> pa.Table:
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "val": pa.array(np.arange(n) % 1000, pa.int64()),
                     "amount": pa.array(np.linspace(0, 1, n)), "tag": pa.array([f"t{i % 13}" for i in range(n)])})


def main() -> None:
    root = Path(tempfile.mkdtemp()) / "t"
    base = np.arange(0, 2_000_000, 2, dtype=np.int64)
    dvengine.write(_rows(base), str(root))
    t = DeltaTable.forPath(None, str(root))
    t.delete(f"id IN ({', '.join(str(int(x)) for x in base[::25])})")  # 40,000 rows by DV
    for k in range(49):
        ids = np.arange(2_000_001 + 200 * k, 2_000_001 + 200 * k + 200, 2, dtype=np.int64)
        dvengine.write(_rows(ids), str(root), mode="append")
        if k % 3 == 0:
            DeltaTable.forPath(None, str(root)).delete(f"id = {int(ids[0])}")
    snap = load_snapshot(str(root))
    small = [f for f in snap.files if (f.num_records or 0) < 1000]
    big = [f for f in snap.files if (f.num_records or 0) >= 1000]
    assert len(small) == 49 and len(big) == 1, (len(small), len(big))
    for label, files in (("49 small files", small), ("1M-row base with DV", big)):
        a, b = _before(snap, files), live_rows(snap, files)
        assert a.cast(b.schema).equals(b), label
        times = {"before": [], "after": []}
        for i in range(31):
            for name, fn in ((("before", _before), ("after", live_rows)) if i % 2 else (("after", live_rows), ("before", _before))):
                t0 = time.perf_counter()
                fn(snap, files)
                times[name].append((time.perf_counter() - t0) * 1000)
        for name, ts in times.items():
            ts = ts[1:]
            print(f"{label}: {name} p50 {statistics.median(ts):.2f} ms (min {min(ts):.2f}, max {max(ts):.2f})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
