"""PURGE (REORG TABLE ... APPLY (PURGE)): deleted rows physically gone, table rows unchanged.

Truth: the model of live rows (unchanged by PURGE) through all four readers, the live state
(no DVs left on purged files) and the commit's actions (dataChange=false removes and adds).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import assert_all_readers
from test_concurrency_support import core_delete, create_table, retire_rows_core, rows_of

from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.commit.transaction import Transaction
from dvengine.dv import absolute_dv_path
from dvengine.engine.spark import purge as purge_module
from dvengine.engine.spark.purge import purge
from dvengine.errors import ConcurrentDeleteReadError, InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot, read_commit_actions
from dvengine.maintenance import history, vacuum
from dvengine.planning.candidates import might_match_function
from dvengine.protocol.actions import AddFile, CommitInfo, RemoveFile
from dvengine.storage.logstore import resolve_data_path

COLS = ["id", "p"]


def _table(spark: Any, root: Path) -> list[tuple[int, str]]:
    """Three files: f0 has 2/10 rows deleted, f1 8/10, f2 none. Returns the live rows."""
    batches = [pa.table({"id": list(range(k * 10, k * 10 + 10)), "p": ["a" if k < 2 else "b"] * 10}) for k in range(3)]
    create_table(root, batches)
    DeltaTable.forPath(spark, root).deleteMetrics("id in (0, 1) or (id >= 10 and id < 18)", mode="dv")
    return [(i, "a" if i < 20 else "b") for i in range(30) if not (i in (0, 1) or 10 <= i < 18)]


def test_purge_rewrites_dv_files_and_rows_stay(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = _table(spark, root)
    before = load_snapshot(str(root))
    with_dv = {a.path: a for a in before.files if a.deletion_vector is not None}
    assert len(with_dv) == 2
    f1 = next(p for p, a in with_dv.items() if a.deleted_row_count == 8)

    m = purge(spark, str(root), min_deleted_ratio=0.5)
    assert m["numRemovedFiles"] == 1 and m["numDeletionVectorsRemoved"] == 1 and m["numDeletionVectorRowsRemoved"] == 8
    assert m["numCopiedRows"] == 2 and m["numAddedFiles"] >= 1
    assert_all_readers(spark, root, COLS, model)
    live = {a.path: a for a in load_snapshot(str(root)).files}
    assert f1 not in live and sum(a.deletion_vector is not None for a in live.values()) == 1

    actions = read_commit_actions(str(root), m["version"])
    # DeltaOperations.Reorg: OperationWithPredicates' JSON-text list, then "applyPurge" -> applyPurge (a Boolean)
    info = next(a for a in actions if isinstance(a, CommitInfo))
    assert (info.operation, info.values["operationParameters"]) == ("REORG", {"predicate": "[]", "applyPurge": True})
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    adds = [a for a in actions if isinstance(a, AddFile)]
    assert [r.path for r in removes] == [f1] and removes[0].deletion_vector == with_dv[f1].deletion_vector
    assert all(not a.data_change for a in [*removes, *adds])
    for add in adds:  # new files hold exactly the live rows, no DV
        assert add.deletion_vector is None
        assert pq.read_metadata(resolve_data_path(str(root), add.path)).num_rows == json.loads(add.stats or "{}")["numRecords"]

    m = purge(spark, str(root))
    assert m["numRemovedFiles"] == 1 and m["numDeletionVectorRowsRemoved"] == 2
    assert all(a.deletion_vector is None for a in load_snapshot(str(root)).files)
    assert purge(spark, str(root))["version"] is None  # nothing left to purge: no commit
    record = history(str(root), limit=1)[0]
    assert record["operation"] == "REORG" and record["operationParameters"]["applyPurge"] == "true"  # DESCRIBE HISTORY's string
    assert record["isBlindAppend"] is False and record["operationMetrics"]["numDeletionVectorsRemoved"] == "1"
    assert rows_of(root, version=1) == rows_of(root, version=3)  # time travel across purges

    # The superseded files and DV files are VACUUM's: only them, and the rows survive.
    time.sleep(0.01)
    reclaimed = vacuum(str(root), retention_hours=0, enforce_retention=False)
    expected = set(with_dv) | {
        os.path.relpath(absolute_dv_path(str(root), a.deletion_vector), root)
        for a in with_dv.values()
        if a.deletion_vector is not None and not a.deletion_vector.is_inline
    }
    assert set(reclaimed["files"]) == expected
    assert_all_readers(spark, root, COLS, model)


def test_purge_partition_condition_and_bad_input(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = [(i, "a" if i % 2 else "b") for i in range(20)]
    create_table(root, [pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows]})], partition_by="p")
    DeltaTable.forPath(spark, root).deleteMetrics("id < 6", mode="dv")
    model = sorted(r for r in rows if r[0] >= 6)
    log = sorted(os.listdir(root / "_delta_log"))
    with pytest.raises(InvalidPredicateError, match="partition columns only"):
        purge(spark, str(root), condition="id > 3")
    with pytest.raises(InvalidPredicateError):
        purge(spark, str(root), condition="nope = 1")
    for bad in (-0.1, 1.5, True):
        with pytest.raises(InvalidArgumentError):
            purge(spark, str(root), min_deleted_ratio=bad)  # type: ignore[arg-type]
    assert sorted(os.listdir(root / "_delta_log")) == log

    m = purge(spark, str(root), condition="p = 'a'")
    assert m["numRemovedFiles"] == 1
    dv_parts = sorted(a.partition_values["p"] or "" for a in load_snapshot(str(root)).files if a.deletion_vector is not None)
    assert dv_parts == ["b"]
    assert_all_readers(spark, root, COLS, model)

    parser = argparse.ArgumentParser(prog="dvengine")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["purge", str(root), "--where", "p = 'b'", "--min-deleted-ratio", "0.1"])
    assert args.handler(args) == 0
    assert all(a.deletion_vector is None for a in load_snapshot(str(root)).files)
    assert rows_of(root) == model


def test_purge_conflicts_with_concurrent_delete_both_ways(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    model = _table(spark, root)

    # A DELETE that read a file before PURGE rewrote it must not commit its DV on the old file.
    snapshot = load_snapshot(str(root))
    actions, read, _ = retire_rows_core(snapshot, "id = 5", int(time.time() * 1000))
    txn = Transaction(str(root), snapshot, "DELETE", {"predicate": "[\"id = 5\"]"})
    txn.record_read(read, might_match_function(snapshot, parse_predicate("id = 5", snapshot.schema)))
    txn.add_actions(actions)
    purge(spark, str(root), min_deleted_ratio=0.1)
    with pytest.raises(ConcurrentDeleteReadError):
        txn.commit()
    assert_all_readers(spark, root, COLS, model)

    # A DELETE committing while PURGE rewrites: PURGE must fail and leave no files behind.
    root2 = tmp_path / "t2"
    model2 = _table(spark, root2)
    original = purge_module.write_parquet_files
    written: list[AddFile] = []

    def racing_write(*args: Any, **kwargs: Any) -> list[AddFile]:
        out = original(*args, **kwargs)
        written.extend(out)
        assert core_delete(root2, "id = 19")[1] == 1  # row of the 8/10-deleted file
        return out

    monkeypatch.setattr(purge_module, "write_parquet_files", racing_write)
    with pytest.raises(ConcurrentDeleteReadError):
        purge(spark, str(root2))
    assert written and not any(os.path.exists(resolve_data_path(str(root2), a.path)) for a in written)
    assert rows_of(root2) == sorted(r for r in model2 if r[0] != 19)
