"""Row-level resolution for every MERGE shape, rewrite winners, and the metrics of a rebased commit.

Each test makes a "stale" command (planned against the snapshot from before a winner committed,
as a concurrent writer sees it) and checks the outcome against the serial order it claims: a
commit must equal running the winner first, then the command; otherwise the command must fail
with a typed conflict and leave the table exactly as the winner left it. Rows are checked
against an in-memory model through dvengine's Arrow reader, delta-rs and DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dml_helpers import assert_every_reader_sees, folder_state, plan_from_now_on
from pyroaring import BitMap64

import dvengine
from dvengine import DeltaTable
from dvengine.dv import load_deletion_vector
from dvengine.errors import ConcurrentAppendError, ConcurrentDeleteDeleteError, ConcurrentDeleteReadError
from dvengine.log import load_snapshot

Row = tuple[Any, ...]
COLS = ["id", "v"]
N = 100


def _table(path: Path, files: int = 1) -> list[Row]:
    """Rows (i, i) for i < N in ``files`` files (appends), DVs on."""
    rows = [(i, i) for i in range(N)]
    step = N // files
    for k in range(files):
        part = rows[k * step:(k + 1) * step]
        data = pa.table({"id": pa.array([r[0] for r in part], pa.int64()), "v": pa.array([r[1] for r in part], pa.int64())})
        conf = {"delta.enableDeletionVectors": "true"} if k == 0 else None
        dvengine.write(data, str(path), mode="error" if k == 0 else "append", configuration=conf)
    return rows




def _source(pairs: list[tuple[int, int]]) -> pa.Table:
    return pa.table({"id": pa.array([p[0] for p in pairs], pa.int64()), "v": pa.array([p[1] for p in pairs], pa.int64())})


def _builder(path: Path, pairs: list[tuple[int, int]]) -> Any:
    return DeltaTable.forPath(None, path).alias("t").merge(_source(pairs), "t.id = s.id", source_alias="s").withMode("dv")


def _commit_info(path: Path, version: int) -> dict[str, Any]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    (info,) = [json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line]
    return dict(info)


def _dv_rows(path: Path) -> set[int]:
    out: set[int] = set()
    for add in load_snapshot(str(path)).files:
        if add.deletion_vector is not None:
            out |= set(load_deletion_vector(str(path), add.deletion_vector, add.num_records))
    return out


def _apply(rows: list[Row], delete: set[int] = frozenset(), update: dict[int, int] | None = None,  # type: ignore[assignment]
           insert: list[Row] | None = None) -> list[Row]:
    out = [(i, (update or {}).get(i, v)) for i, v in rows if i not in delete]
    return out + list(insert or [])


# --- conditional WHEN MATCHED -------------------------------------------------------------------


def _conditional_merge(path: Path) -> Any:
    """Source ids 7 (v 1: updated) and 9 (v -1: matched, left alone); 500 is inserted."""
    return (_builder(path, [(7, 1), (9, -1), (500, 5)]).whenMatchedUpdate("s.v > 0", {"v": "s.v"})
            .whenNotMatchedInsertAll().executeMetrics())


def test_conditional_matched_merge_is_rebased_over_a_row_it_did_not_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")  # winner: hides a row the MERGE never joined
    metrics = _conditional_merge(path)
    assert (metrics["version"], metrics["numRebasedFiles"]) == (2, 1)
    # serial order: winner, then the MERGE
    assert_every_reader_sees(path, COLS, _apply(rows, delete={3}, update={7: 1}, insert=[(500, 5)]))
    assert _dv_rows(path) == {3, 7}


def test_conditional_matched_merge_fails_when_the_winner_deletes_a_row_it_matched_but_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 9 joined source row 9 and stayed (s.v > 0 is false): it kept source row 9 from being
    inserted. Had the winner's delete of row 9 come first, the MERGE would have inserted (9, -1),
    which no rebase can produce: a typed conflict, table as the winner left it."""
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 9", mode="dv")
    before = folder_state(path)
    with pytest.raises(ConcurrentDeleteReadError, match="matched this MERGE's source"):
        _conditional_merge(path)
    assert folder_state(path) == before
    assert_every_reader_sees(path, COLS, _apply(rows, delete={9}))


def test_conditional_matched_merge_and_winner_changing_the_same_row_fail_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 7", mode="dv")  # the row the MERGE updates
    with pytest.raises(ConcurrentDeleteDeleteError, match="row"):
        _conditional_merge(path)
    assert_every_reader_sees(path, COLS, _apply(rows, delete={7}))


def test_insert_only_merge_fails_when_the_winner_deletes_the_row_that_kept_a_source_row_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 4", mode="dv")
    with pytest.raises(ConcurrentDeleteReadError):
        _builder(path, [(4, 40), (600, 6)]).whenNotMatchedInsertAll().executeMetrics()
    assert_every_reader_sees(path, COLS, _apply(rows, delete={4}))


def test_insert_only_merge_commits_over_a_winner_deleting_other_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 5", mode="dv")
    metrics = _builder(path, [(4, 40), (600, 6)]).whenNotMatchedInsertAll().executeMetrics()
    assert metrics["version"] == 2
    assert_every_reader_sees(path, COLS, _apply(rows, delete={5}, insert=[(600, 6)]))


# --- the same MERGE shapes as the Spark executor's file tasks ----------------------------------
# The tasks report, per file, the target rows that joined a source row and stayed, so a MERGE
# whose matched rows are not all retired is judged row by row on Spark too.


def _spark_merge(spark: Any, path: Path, pairs: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch) -> Any:
    """A builder for a MERGE of ``pairs`` run as file tasks on Spark (checked by the caller)."""
    from dvengine.engine.spark import executor

    ran: list[int] = []
    original = executor.run_merge_tasks
    monkeypatch.setattr(executor, "run_merge_tasks", lambda ctx: ran.append(len(ctx.groups)) or original(ctx))
    source = spark.createDataFrame(pairs, "id BIGINT, v BIGINT").alias("s")
    builder = DeltaTable.forPath(spark, str(path)).alias("t").merge(source, "t.id = s.id").withMode("dv").withEngine("spark")
    return builder, ran


@pytest.mark.parametrize("winner_deletes", [3, 9])
def test_conditional_matched_merge_on_spark_file_tasks_is_judged_by_the_rows_it_kept(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, winner_deletes: int
) -> None:
    """Row 3 never joined: the MERGE is rebased over its delete. Row 9 joined source row 9 and
    stayed (s.v > 0 is false), keeping (9, -1) from being inserted: its delete fails the MERGE."""
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete(f"id = {winner_deletes}", mode="dv")
    builder, ran = _spark_merge(spark, path, [(7, 1), (9, -1), (500, 5)], monkeypatch)
    builder = builder.whenMatchedUpdate("s.v > 0", {"v": "s.v"}).whenNotMatchedInsertAll()
    if winner_deletes == 9:
        before = folder_state(path)
        with pytest.raises(ConcurrentDeleteReadError, match="matched this MERGE's source"):
            builder.executeMetrics()
        assert ran and folder_state(path) == before
        assert_every_reader_sees(path, COLS, _apply(rows, delete={9}))
        return
    metrics = builder.executeMetrics()
    assert ran and (metrics["version"], metrics["numRebasedFiles"], metrics["executionEngine"]) == (2, 1, "spark")
    assert_every_reader_sees(path, COLS, _apply(rows, delete={3}, update={7: 1}, insert=[(500, 5)]))
    assert _dv_rows(path) == {3, 7}


@pytest.mark.parametrize("winner_deletes", [4, 5])
def test_insert_only_merge_on_spark_file_tasks_is_judged_by_the_rows_it_kept(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, winner_deletes: int
) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete(f"id = {winner_deletes}", mode="dv")
    builder, ran = _spark_merge(spark, path, [(4, 40), (600, 6)], monkeypatch)
    builder = builder.whenNotMatchedInsertAll()
    if winner_deletes == 4:  # row 4 kept source row 4 out
        with pytest.raises(ConcurrentDeleteReadError):
            builder.executeMetrics()
        assert ran
        assert_every_reader_sees(path, COLS, _apply(rows, delete={4}))
        return
    assert builder.executeMetrics()["version"] == 2 and ran
    assert_every_reader_sees(path, COLS, _apply(rows, delete={5}, insert=[(600, 6)]))


def test_spark_file_tasks_report_kept_rows_per_file_as_the_local_runner_does() -> None:
    """The rows a file task reports kept: joined and not retired, per file, by the log's path."""
    from dvengine.engine.local.executor import FileMatch
    from dvengine.engine.local.merge import TargetSide
    from dvengine.engine.spark.file_tasks import kept_rows_of
    from dvengine.protocol.actions import AddFile

    def match(path: str) -> FileMatch:
        return FileMatch(AddFile(path=path, partition_values={}, size=1, modification_time=1), 10, BitMap64(), np.empty(0, np.int64))

    side = TargetSide([], {}, {0: np.array([2, 5])}, np.empty(0, np.int64),
                      matched_rows={0: np.array([1, 2, 5, 8]), 1: np.array([3]), 2: np.array([4])})
    side.retire[2] = np.array([4])
    got = {p: sorted(BitMap64.deserialize(b)) for p, b in kept_rows_of([match("a"), match("b"), match("c")], side).items()}
    assert got == {"a": [1, 8], "b": [3]}


# --- WHEN NOT MATCHED BY SOURCE ----------------------------------------------------------------


def _by_source_merge(path: Path) -> Any:
    """Updates id 7 from the source and deletes every unmatched row with id >= 90."""
    return (_builder(path, [(7, 70)]).whenMatchedUpdateAll()
            .whenNotMatchedBySourceDelete("t.id >= 90").executeMetrics())


def test_not_matched_by_source_merge_is_rebased_over_rows_outside_its_clauses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")  # unmatched, and outside the clause's condition
    metrics = _by_source_merge(path)
    assert (metrics["version"], metrics["numRebasedFiles"]) == (2, 1)
    assert_every_reader_sees(path, COLS, _apply(rows, delete={3, *range(90, N)}, update={7: 70}))


def test_not_matched_by_source_merge_and_winner_deleting_one_of_its_rows_fail_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 95", mode="dv")  # a row the by-source clause also deletes
    with pytest.raises(ConcurrentDeleteDeleteError):
        _by_source_merge(path)
    assert_every_reader_sees(path, COLS, _apply(rows, delete={95}))


def test_not_matched_by_source_merge_fails_when_the_winner_adds_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The winner's new rows (an UPDATE's rewritten copy of row 50) are unmatched by the source, so
    the by-source clause would have judged them: the MERGE read the whole table -> typed conflict."""
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).update("id = 50", {"v": "-50"}, mode="dv")
    before = folder_state(path)
    with pytest.raises(ConcurrentAppendError):
        _by_source_merge(path)
    assert folder_state(path) == before
    assert_every_reader_sees(path, COLS, _apply(rows, update={50: -50}))


def test_not_matched_by_source_merge_after_a_blind_append_is_write_serializable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blind append commutes under WriteSerializable: the MERGE is ordered before it, so the
    appended row 95 survives the by-source delete of ids >= 90 (Delta's rule, unchanged)."""
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    dvengine.write(_source([(1000, 1)]), str(path), mode="append")
    assert _by_source_merge(path)["version"] == 2
    assert_every_reader_sees(path, COLS, _apply(rows, delete=set(range(90, N)), update={7: 70}, insert=[(1000, 1)]))


# --- winners that rewrite the file ----------------------------------------------------------------


def test_optimize_winner_that_rewrote_the_file_fails_the_dml_typed_and_a_replan_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPTIMIZE removes the files (dataChange=false) and adds a compacted one: the rows the DELETE
    planned by row index are now in another file, so it cannot be rebased; the rule is a typed
    ConcurrentDeleteReadError, and re-planning against the new snapshot commits."""
    path = tmp_path / "t"
    rows = _table(path, files=2)
    with monkeypatch.context() as m:
        plan_from_now_on(m, path)
        result = DeltaTable.forPath(None, path).optimize().executeCompaction()
        assert result["metrics"]["numFilesRemoved"] == 2
        before = folder_state(path)
        with pytest.raises(ConcurrentDeleteReadError, match="removed"):
            DeltaTable.forPath(None, path).delete("id = 7", mode="dv")
        assert folder_state(path) == before
    assert DeltaTable.forPath(None, path).delete("id = 7", mode="dv")["version"] == 3
    assert_every_reader_sees(path, COLS, _apply(rows, delete={7}))


def test_merge_loses_to_an_optimize_winner_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path, files=2)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).optimize().executeCompaction()
    with pytest.raises(ConcurrentDeleteReadError):
        _conditional_merge(path)
    assert_every_reader_sees(path, COLS, rows)


# --- metrics describe the committed actions -------------------------------------------------------


def test_rebased_commit_metrics_describe_the_rebase_not_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loser read the file without a DV (plan: a DV added); after the rebase it updates the
    winner's DV, and its commitInfo and returned metrics say so."""
    path = tmp_path / "t"
    _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")
    metrics = DeltaTable.forPath(None, path).delete("id = 8", mode="dv")
    info = _commit_info(path, 2)["operationMetrics"]
    for got in (info, metrics):
        assert (int(got["numDeletionVectorsAdded"]), int(got["numDeletionVectorsUpdated"])) == (0, 1)
        assert int(got["numRemovedFiles"]) == 0
    merged = _conditional_merge(path)  # stale too: two winners since its snapshot
    info = _commit_info(path, 3)["operationMetrics"]
    for got in (info, merged):
        assert (int(got["numTargetDeletionVectorsAdded"]), int(got["numTargetDeletionVectorsUpdated"])) == (0, 1)


def test_rebase_that_removes_the_file_reports_a_removed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _table(path)
    size = load_snapshot(str(path)).files[0].size
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id < 50", mode="dv")
    metrics = DeltaTable.forPath(None, path).delete("id >= 50", mode="dv")  # the union covers every row
    info = _commit_info(path, 2)["operationMetrics"]
    for got in (info, metrics):
        assert int(got["numDeletionVectorsAdded"]) == 0
        assert int(got["numDeletionVectorsRemoved"]) == 1
        assert int(got["numRemovedFiles"]) == 1
        assert int(got["numRemovedBytes"]) == size
    assert load_snapshot(str(path)).files == ()
    assert BitMap64() == BitMap64(_dv_rows(path))
