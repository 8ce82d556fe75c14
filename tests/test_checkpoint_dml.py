"""Checkpoints written as a side effect of DML commits carry the whole state, DVs included.

After 12 commits of deletes, updates, merges and appends, the checkpoint at version 10 must
exist; a copy of the table with every JSON commit up to 10 deleted (so the state can only come
from our checkpoint) must read back as the model through dvengine, delta-rs and DuckDB.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dml_helpers import make_table
from interop import assert_all_readers

import dvengine
from dvengine import DeltaTable, write
from dvengine.log import load_snapshot

COLS = ["id", "name", "part"]


def test_state_from_our_checkpoint_reads_identically_everywhere(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = make_table(spark, root, n=300, files=3, partition_by=["part"])
    table = DeltaTable.forPath(spark, root)
    for k in range(4):  # versions 1..4: DV deletes that keep growing the same files' DVs
        table.deleteMetrics(f"id % 10 = {k}", mode="dv")
        model = [r for r in model if r[0] % 10 != k]
    for k in range(3):  # versions 5..7: DV updates (new files + DVs)
        table.updateMetrics(f"id % 10 = {k + 5}", {"name": f"'u{k}'"}, mode="dv")
        model = [(i, f"u{k}", p) if i % 10 == k + 5 else (i, n, p) for i, n, p in model]
    # ids ending in 4, 8 and 9 are still live and untouched here
    source = spark.createDataFrame([(14, "m", 2), (5000, "new", 1)], "id long, name string, part int").alias("s")
    table.alias("t").merge(source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode("dv").executeMetrics()
    model = [r for r in model if r[0] != 14] + [(14, "m", 2), (5000, "new", 1)]  # version 8
    table.deleteMetrics("id = 18", mode="rewrite")  # version 9: a copy-on-write rewrite
    model = [r for r in model if r[0] != 18]
    spark_rows = spark.createDataFrame([(6000, "a", 0)], "id long, name string, part int")
    write(spark_rows, str(root), mode="append", spark=spark)  # version 10 -> checkpoint
    model.append((6000, "a", 0))
    table.deleteMetrics("id = 19", mode="dv")  # version 11, after the checkpoint
    model = [r for r in model if r[0] != 19]

    assert table.version() == 11
    dvengine.wait_for_checkpoints()  # version 10's is written on a background thread
    log = root / "_delta_log"
    assert (log / "00000000000000000010.checkpoint.parquet").exists()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 10
    assert any(a.deletion_vector is not None for a in load_snapshot(str(root)).files)

    copy = tmp_path / "from_checkpoint"
    shutil.copytree(root, copy)
    for v in range(11):
        (copy / "_delta_log" / f"{v:020d}.json").unlink()
    assert_all_readers(spark, copy, COLS, model)
    assert_all_readers(spark, root, COLS, model)
