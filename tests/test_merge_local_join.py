"""The embedded MERGE's join over files that carry deletion vectors.

The target side joins the key columns of every physical row of the candidate files (no copy of the
live rows) and drops pairs on rows a DV already deletes after the join; then it gathers the other
columns for the pairs alone. These tests make deleted rows share keys with the source, so a pair
on a dead row that survived would update / delete / double-count it, and compare with a plain
Python model through dvengine's Arrow reader and delta-rs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable

COLS = ["id", "cat", "v"]
Row = tuple[Any, ...]


def _table(path: Path, files: int = 4, per_file: int = 250) -> list[Row]:
    rows: list[Row] = []
    for f in range(files):
        ids = np.arange(f * per_file, (f + 1) * per_file, dtype=np.int64)
        data = pa.table({"id": ids, "cat": (ids % 3).astype(np.int32), "v": pa.array([f"v{i}" for i in ids])})
        dvengine.write(data, str(path), mode="append" if f else "error")
        rows += [(int(i), int(i % 3), f"v{i}") for i in ids]
    return rows


def _check(path: Path, model: list[Row]) -> None:
    expected = sort_rows(model)
    assert rows_arrow(path, COLS) == expected
    assert rows_delta_rs(path, COLS) == expected


@pytest.mark.parametrize("source_id_type", [pa.int64(), pa.int32()])
def test_keys_of_deleted_rows_never_match(tmp_path: Path, source_id_type: pa.DataType) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    doomed = set(range(0, 1000, 9))
    deleted = DeltaTable.forPath(None, str(path)).deleteMetrics("id % 9 = 0", mode="dv", engine="local")
    assert deleted["numDeletionVectorsAdded"] == 4  # DVs in every file
    rows = [r for r in rows if r[0] not in doomed]
    # Half of the source keys are deleted rows: they must be inserted, not matched.
    ids = list(range(0, 1100, 6))
    source = pa.table({"id": pa.array(ids, source_id_type), "cat": pa.array([i % 3 for i in ids], pa.int32()),
                       "v": pa.array([f"s{i}" for i in ids])})
    metrics = (
        DeltaTable.forPath(None, str(path)).alias("t").merge(source, "t.id = s.id", source_alias="s")
        .whenMatchedDelete(condition="t.cat = 2")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedInsertAll()
        .withMode("dv")
        .withEngine("local")
        .executeMetrics()
    )
    live = {r[0]: r for r in rows}
    model: list[Row] = []
    for r in rows:
        if r[0] in ids:
            if r[1] != 2:
                model.append((r[0], r[1], f"s{r[0]}"))
        else:
            model.append(r)
    inserted = [(i, i % 3, f"s{i}") for i in ids if i not in live]
    model += inserted
    matched = [i for i in ids if i in live]
    assert metrics["executionEngine"] == "local"
    assert metrics["numTargetRowsInserted"] == len(inserted)
    assert metrics["numTargetRowsDeleted"] == sum(1 for i in matched if live[i][1] == 2)
    assert metrics["numTargetRowsUpdated"] == sum(1 for i in matched if live[i][1] != 2)
    _check(path, model)


def test_two_keys_a_residual_and_not_matched_by_source_skip_deleted_rows(tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, files=3, per_file=200)
    deleted = DeltaTable.forPath(None, str(path)).deleteMetrics("id % 5 = 1", mode="dv", engine="local")
    assert deleted["numDeletionVectorsAdded"] == 3
    rows = [r for r in rows if r[0] % 5 != 1]  # e.g. id 36 (cat 0) is dead and has a source partner
    ids = list(range(0, 700, 4))
    # cat deliberately wrong for ids divisible by 8: the second key then finds no partner.
    source = pa.table({"id": pa.array(ids, pa.int64()), "cat": pa.array([(i + (i % 8 == 0)) % 3 for i in ids], pa.int32()),
                       "v": pa.array([f"s{i}" for i in ids])})
    src = {(i, (i + (i % 8 == 0)) % 3): f"s{i}" for i in ids}
    (
        DeltaTable.forPath(None, str(path)).alias("t")
        .merge(source, "t.id = s.id AND t.cat = s.cat AND s.v <> 's100'", source_alias="s")
        .whenMatchedUpdate(set={"v": "s.v"})
        .whenNotMatchedBySourceUpdate(condition="t.id < 100", set={"v": "'gone'"})
        .whenNotMatchedBySourceDelete(condition="t.id >= 590")
        .withEngine("local")
        .execute()
    )
    model: list[Row] = []
    for r in rows:
        hit = src.get((r[0], r[1]))
        if hit is not None and hit != "s100":
            model.append((r[0], r[1], hit))
        elif r[0] < 100:
            model.append((r[0], r[1], "gone"))
        elif r[0] < 590:
            model.append(r)
    _check(path, model)


def test_a_duplicate_source_key_on_a_deleted_row_is_no_cardinality_error(tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, files=2, per_file=100)
    assert DeltaTable.forPath(None, str(path)).deleteMetrics("id = 42", mode="dv", engine="local")["numDeletionVectorsAdded"] == 1
    source = pa.table({"id": pa.array([42, 42, 7], pa.int64()), "cat": pa.array([0, 0, 1], pa.int32()),
                       "v": pa.array(["a", "b", "c"])})
    metrics = (
        DeltaTable.forPath(None, str(path)).alias("t").merge(source, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().withEngine("local").executeMetrics()
    )
    assert metrics["numTargetRowsUpdated"] == 1
    _check(path, [(7, 1, "c") if r[0] == 7 else r for r in rows if r[0] != 42])


def test_files_without_a_source_key_are_left_out_of_the_join_and_untouched(tmp_path: Path) -> None:
    """Only files holding one of the source's keys enter the join (executor.key_rows gives None for
    the others): the files without one keep their DVs and stay out of the commit, and the result
    equals the model whether the matched keys sit in a file with a DV or not."""
    from dvengine.log import load_snapshot, read_commit_actions
    from dvengine.protocol.actions import RemoveFile

    model = {r[0]: r for r in _table(tmp_path, files=6, per_file=100)}
    DeltaTable.forPath(None, str(tmp_path)).delete("id IN (5, 105, 205, 305)")  # DVs on four files
    for i in (5, 105, 205, 305):
        model.pop(i)
    before = {f.path: f.deletion_vector for f in load_snapshot(str(tmp_path)).files}
    src = pa.table({"id": pa.array([105, 106, 450, 9999], pa.int64()), "cat": pa.array([7, 7, 7, 7], pa.int32()),
                    "v": pa.array(["s105", "s106", "s450", "s9999"])})
    metrics = (DeltaTable.forPath(None, str(tmp_path)).alias("t").merge(src, "t.id = s.id", source_alias="s")
               .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())
    for i in (106, 450, 9999):
        model[i] = (i, 7, f"s{i}")
    model[105] = (105, 7, "s105")  # a deleted row: inserted, never updated
    _check(tmp_path, list(model.values()))
    assert metrics["numTargetRowsUpdated"] == 2 and metrics["numTargetRowsInserted"] == 2
    snapshot = load_snapshot(str(tmp_path))
    removed = {a.path for a in read_commit_actions(str(tmp_path), snapshot.version) if isinstance(a, RemoveFile)}
    touched = {p for p, dv in before.items() if p in removed}
    assert len(touched) == 2  # the files of 106 and 450; the other four kept their DV, out of the commit
    after = {f.path: f.deletion_vector for f in snapshot.files}
    for path, dv in before.items():
        if path not in touched:
            assert after[path] == dv
