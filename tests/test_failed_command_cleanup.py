"""A command that fails leaves the table folder exactly as it found it: no commit, no stray files.

Covers both executors and every kind of file a command writes: DV files (packed, non-inline),
data files of UPDATE/MERGE/rewrites. Failures are forced where they hurt most: after the files
exist (a conflict discovered at commit time) and inside the DV job (a file whose stats lie).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dml_helpers import engine_per_strategy, folder_state  # noqa: F401  (engine_per_strategy: the "engine" fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.errors import CommitConflictError, DeletionVectorError
from dvengine.log import clear_snapshot_cache, load_snapshot


def _table(path: Path, files: int = 3, rows_per_file: int = 2000) -> None:
    for i in range(files):
        ids = np.arange(i * rows_per_file, (i + 1) * rows_per_file, dtype=np.int64)
        data = pa.table({"id": ids, "name": [f"n{x % 7}" for x in ids.tolist()], "part": (ids % 3).astype(np.int32)})
        dvengine.write(data, str(path), mode="append" if i else "error")


def _force_conflict(monkeypatch: pytest.MonkeyPatch, path: Path, modules: list[Any]) -> None:
    """Make the next command plan against a stale snapshot, while a winner re-DVs every file,
    retiring rows the command also changes (3, 5, 2500), so row-level resolution cannot rebase it."""
    stale = load_snapshot(str(path))
    DeltaTable.forPath(None, path).deleteMetrics("id % 997 = 1 OR id IN (3, 5, 2500)", engine="local", mode="dv")
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    for module in modules:
        monkeypatch.setattr(module, "load_snapshot", lambda root: stale)


def _operations(spark: Any, path: Path, engine: str) -> dict[str, Any]:
    session = spark if engine == "spark" else None
    source = pa.table({"id": pa.array([5, 2500, 99999], pa.int64()), "name": ["m", "m", "m"], "part": pa.array([0, 1, 2], pa.int32())})

    def merge() -> Any:
        t = DeltaTable.forPath(session, path).alias("t")
        return (t.merge(source, "t.id = s.id", source_alias="s").withEngine(engine).withMode("dv")
                .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())

    return {
        # id % 10: 10% of rows in every file -> DVs large enough for a DV file (not inline)
        "delete-dv": lambda: DeltaTable.forPath(session, path).deleteMetrics("id % 10 = 3", mode="dv", engine=engine),
        "delete-rewrite": lambda: DeltaTable.forPath(session, path).deleteMetrics("id % 10 = 3", mode="rewrite", engine=engine),
        "update-dv": lambda: DeltaTable.forPath(session, path).updateMetrics("id % 10 = 3", {"name": "'x'"}, mode="dv", engine=engine),
        "merge-dv": merge,
    }


@pytest.mark.parametrize("operation", ["delete-dv", "delete-rewrite", "update-dv", "merge-dv"])
def test_conflict_loser_leaves_no_files(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, operation: str
) -> None:
    import dvengine.engine.local.merge as local_merge
    from dvengine.api import dml
    from dvengine.engine.spark import merge_exec

    path = tmp_path / "t"
    _table(path)
    _force_conflict(monkeypatch, path, [dml, local_merge, merge_exec])
    before = folder_state(path)
    with pytest.raises(CommitConflictError):
        _operations(spark, path, engine)[operation]()
    assert folder_state(path) == before  # every DV and data file the loser wrote is gone again


def test_stats_that_undercount_rows_fail_typed_and_leave_no_dv_file(spark: Any, tmp_path: Path, engine: str) -> None:
    """A file whose stats.numRecords is smaller than its real row count: DV row indexes cannot be
    trusted, so the DELETE fails with DeletionVectorError naming the file, and no DV file written
    for the other (healthy) files stays behind."""
    path = tmp_path / "t"
    _table(path, files=3)
    log = sorted((path / "_delta_log").glob("*.json"))
    victim_log = log[-1]  # the last append's add: make its stats lie
    lines = []
    victim = None
    for line in victim_log.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            stats["numRecords"] = stats["numRecords"] - 100
            action["add"]["stats"] = json.dumps(stats)
            victim = action["add"]["path"]
        lines.append(json.dumps(action))
    victim_log.write_text("\n".join(lines) + "\n")
    clear_snapshot_cache()  # the log was rewritten behind this process's back: read it as a new process would
    assert victim is not None
    before = folder_state(path)
    session = spark if engine == "spark" else None
    with pytest.raises(DeletionVectorError, match="numRecords"):
        DeltaTable.forPath(session, path).deleteMetrics("id % 10 = 3", mode="dv", engine=engine)
    assert folder_state(path) == before
