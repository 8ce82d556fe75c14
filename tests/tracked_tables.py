"""A small row-tracking table changed without Spark, and its stable ids from the Arrow reader:
the shared setup and truth of the multi-process `_metadata.row_id` checks (cluster_job.py,
connect_job.py), which run in processes of their own."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

import dvengine
from dvengine import DeltaTable
from dvengine.log.loader import load_snapshot
from dvengine.read.row_ids import read_row_tracking


def changed_tracked_table(path: str, files: int, rows_per_file: int, delete: str, update: str) -> None:
    """``files`` appends of ids 0.. (v = 10 * id) to a new row-tracking table with DVs, then a DV
    DELETE of ``delete`` and a DV UPDATE ``v = v + 1`` of ``update`` (ids kept, versions advance)."""
    for k in range(files):
        ids = np.arange(k * rows_per_file, (k + 1) * rows_per_file, dtype=np.int64)
        dvengine.write(pa.table({"id": ids, "v": ids * 10}), path, mode="append",
                       configuration={"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"})
    local = DeltaTable.forPath(None, path)
    local.delete(delete, mode="dv")
    local.update(update, {"v": "v + 1"}, mode="dv")


def stable_id_rows(path: str) -> list[tuple[int, int, int, int]]:
    """Sorted (id, v, row_id, row_commit_version) of the live rows, from the Arrow reader."""
    return sorted((d["id"], d["v"], d["row_id"], d["row_commit_version"])
                  for d in read_row_tracking(load_snapshot(path)).to_pylist())
