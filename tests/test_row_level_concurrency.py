"""Row-level conflict resolution: each rule of spec_notes/isolation-and-concurrency.md on a real table.

A "stale" command is made by planning against the snapshot from before a winner committed (the
command module's ``load_snapshot`` is patched), exactly what a concurrent writer sees. Truth is
an in-memory model of the rows, checked through dvengine's Arrow reader, delta-rs and DuckDB;
the committed DV is checked to be the union of both commands' rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import assert_every_reader_sees, folder_state, plan_from_now_on
from pyroaring import BitMap64

import dvengine
from dvengine import DeltaTable
from dvengine.commit.conflicts import TransactionFootprint, WinningCommit, check_conflicts
from dvengine.dv import load_deletion_vector
from dvengine.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    InvalidArgumentError,
)
from dvengine.log import load_snapshot
from dvengine.protocol.actions import AddFile, CommitInfo, RemoveFile

Row = tuple[Any, ...]
COLS = ["id", "v"]
N = 200


def _table(path: Path, configuration: dict[str, str] | None = None) -> list[Row]:
    rows = [(i, i) for i in range(N)]
    data = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "v": pa.array([r[1] for r in rows], pa.int64())})
    conf = {"delta.enableDeletionVectors": "true", **(configuration or {})}
    dvengine.write(data, str(path), mode="error", configuration=conf)  # one file: every command hits it
    return rows




def _live_dv(path: Path) -> BitMap64:
    (add,) = [a for a in load_snapshot(str(path)).files if a.deletion_vector is not None]  # the original file
    assert add.deletion_vector is not None
    return load_deletion_vector(str(path), add.deletion_vector, add.num_records)


def _versions(path: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (path / "_delta_log").glob("*.json"))


def _merge(session: Any, path: Path, ids: list[int], value: int, engine: str = "local") -> Any:
    source = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([value] * len(ids), pa.int64())})
    return (DeltaTable.forPath(session, path).alias("t").merge(source, "t.id = s.id", source_alias="s")
            .withEngine(engine).withMode("dv").whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())


# --- rebase: disjoint rows of one file -------------------------------------------------------------


LOSERS: dict[str, Callable[[Path], Any]] = {
    "delete": lambda p: DeltaTable.forPath(None, p).delete("id = 7 OR id = 8", mode="dv"),
    "update": lambda p: DeltaTable.forPath(None, p).update("id = 7 OR id = 8", {"v": "v + 1000"}, mode="dv"),
    "merge": lambda p: _merge(None, p, [7, 8, 500], 2000),
}
MODEL_AFTER: dict[str, Callable[[list[Row]], list[Row]]] = {
    "delete": lambda rows: [r for r in rows if r[0] not in (7, 8)],
    "update": lambda rows: [(i, v + 1000) if i in (7, 8) else (i, v) for i, v in rows],
    "merge": lambda rows: [(i, 2000) if i in (7, 8) else (i, v) for i, v in rows] + [(500, 2000)],
}


@pytest.mark.parametrize("loser", sorted(LOSERS))
def test_disjoint_rows_of_one_file_are_rebased_not_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loser: str) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).update("id = 3", {"v": "-3"}, mode="dv")  # winner: re-DVs the file (v1)
    DeltaTable.forPath(None, path).delete("id = 4", mode="dv")  # a second winner on the same file (v2)
    metrics = LOSERS[loser](path)
    assert metrics["version"] == 3
    assert _versions(path) == [0, 1, 2, 3]
    expected = MODEL_AFTER[loser]([(i, -3) if i == 3 else (i, v) for i, v in rows if i != 4])
    assert_every_reader_sees(path, COLS, expected)
    # the committed DV is the union: the winners' rows 3 and 4 and the loser's 7 and 8
    assert set(_live_dv(path)) == {3, 4, 7, 8}
    # ... and the loser's commit removes the winners' (path, DV), not the one it read
    commit = [json.loads(line) for line in (path / "_delta_log" / f"{3:020d}.json").read_text().splitlines()]
    (remove,) = [a["remove"] for a in commit if "remove" in a]
    assert remove["deletionVector"]["cardinality"] == 2


def test_rebased_update_keeps_change_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path, {"delta.enableChangeDataFeed": "true"})
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")
    assert DeltaTable.forPath(None, path).update("id = 9", {"v": "0"}, mode="dv")["version"] == 2
    feed = DeltaTable.forPath(None, path).changes(startingVersion=2).to_pylist()
    assert sorted((r["id"], r["v"], r["_change_type"]) for r in feed) == [(9, 0, "update_postimage"), (9, 9, "update_preimage")]
    assert_every_reader_sees(path, COLS, [(i, 0 if i == 9 else v) for i, v in rows if i != 3])


def test_rebase_that_leaves_no_live_row_removes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id < 100", mode="dv")
    DeltaTable.forPath(None, path).delete("id >= 100", mode="dv")
    assert load_snapshot(str(path)).files == ()
    assert_every_reader_sees(path, COLS, [])


def test_rebase_on_the_spark_executor(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")
    DeltaTable.forPath(spark, path).update("id = 11", {"v": "-11"}, mode="dv", engine="spark")
    assert_every_reader_sees(path, COLS, [(i, -11 if i == 11 else v) for i, v in rows if i != 3])
    assert set(_live_dv(path)) == {3, 11}


# --- true conflicts still fail typed, leaving the table as the winner left it --------------------


@pytest.mark.parametrize("loser", sorted(LOSERS))
def test_same_row_changed_by_both_fails_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loser: str) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 8", mode="dv")  # the winner retires row 8 the loser also changes
    before = folder_state(path)
    with pytest.raises(ConcurrentDeleteDeleteError, match="row"):
        LOSERS[loser](path)
    assert folder_state(path) == before
    assert_every_reader_sees(path, COLS, [r for r in rows if r[0] != 8])


def test_winner_rows_matching_the_condition_fail_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).update("id = 5", {"v": "5000"}, mode="dv")  # writes the row (5, 5000) anew
    before = folder_state(path)
    with pytest.raises(ConcurrentAppendError, match="predicate"):
        DeltaTable.forPath(None, path).delete("v >= 5000 OR id = 7", mode="dv")
    assert folder_state(path) == before
    assert_every_reader_sees(path, COLS, [(5, 5000) if i == 5 else (i, v) for i, v in rows])


def test_winner_rows_inside_the_stats_range_but_not_matching_do_not_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The winner's new file holds ids 5 and 9: stats say id = 7 might be there, the rows say not."""
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).update("id = 5 OR id = 9", {"v": "v + 1000"}, mode="dv")
    assert DeltaTable.forPath(None, path).delete("id = 7", mode="dv")["version"] == 2
    assert_every_reader_sees(path, COLS, [(i, v + 1000) if i in (5, 9) else (i, v) for i, v in rows if i != 7])


def test_winner_that_rewrote_the_file_fails_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="rewrite")  # copy-on-write: the file is gone
    # its survivors (row 7 among them) are new rows matching the condition: the append rule fires first
    with pytest.raises(ConcurrentAppendError):
        DeltaTable.forPath(None, path).delete("id = 7", mode="dv")
    assert_every_reader_sees(path, COLS, [r for r in rows if r[0] != 3])


# --- opting out ------------------------------------------------------------------------------------


def test_table_property_turns_row_level_resolution_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    rows = _table(path, {"delta.enableRowLevelConcurrency": "false"})
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")
    with pytest.raises(ConcurrentDeleteReadError):
        DeltaTable.forPath(None, path).delete("id = 7", mode="dv")
    assert_every_reader_sees(path, COLS, [r for r in rows if r[0] != 3])


def test_conf_turns_row_level_resolution_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _table(path)
    plan_from_now_on(monkeypatch, path)
    DeltaTable.forPath(None, path).delete("id = 3", mode="dv")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_ROWLEVELCONCURRENCY_ENABLED", "false")
    with pytest.raises(ConcurrentDeleteReadError):
        DeltaTable.forPath(None, path).delete("id = 7", mode="dv")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_ROWLEVELCONCURRENCY_ENABLED", "maybe")
    with pytest.raises(InvalidArgumentError, match="rowLevelConcurrency"):
        DeltaTable.forPath(None, path).delete("id = 7", mode="dv")


def test_bad_table_property_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="delta.enableRowLevelConcurrency"):
        _table(tmp_path / "t", {"delta.enableRowLevelConcurrency": "sometimes"})
    assert not (tmp_path / "t" / "_delta_log").exists()


# --- the pure rule ---------------------------------------------------------------------------------


def _add(path: str, dv: bool) -> AddFile:
    from dvengine.dv import inline_descriptor

    return AddFile(path, {}, 10, 1, stats='{"numRecords": 10}', deletion_vector=inline_descriptor(BitMap64([1])) if dv else None)


def _winner(*actions: Any) -> WinningCommit:
    return WinningCommit.from_actions(5, [CommitInfo({"timestamp": 1, "operation": "DELETE"}), *actions])


def test_check_conflicts_defers_only_dv_updates_of_touched_files() -> None:
    base = _add("a", False)
    dv_update = _winner(RemoveFile("a", 1), _add("a", True))
    rewrite = _winner(RemoveFile("a", 1), _add("b", False))
    mine = TransactionFootprint(read_paths={"a"}, read_files={"a": base}, read_predicates=[lambda add: False],
                                removed_paths={"a"}, dv_changes={"a": _add("a", True)}, row_level=True)
    assert check_conflicts(dv_update, mine) == ["a"]
    with pytest.raises(ConcurrentDeleteReadError):
        check_conflicts(rewrite, mine)
    mine.row_level = False
    with pytest.raises(ConcurrentDeleteReadError):
        check_conflicts(dv_update, mine)
    # a file we rewrite (removed without our own DV re-add) is a file-level conflict
    rewriting = TransactionFootprint(read_paths={"a"}, read_predicates=[lambda add: False], removed_paths={"a"}, row_level=True)
    with pytest.raises(ConcurrentDeleteReadError):
        check_conflicts(dv_update, rewriting)
    # a file we only read is judged by rows (deferred), one we never touched not at all
    reading = TransactionFootprint(read_paths={"a"}, read_files={"a": base}, read_predicates=[lambda add: False], row_level=True)
    assert check_conflicts(dv_update, reading) == ["a"]
    assert check_conflicts(_winner(RemoveFile("z", 1), _add("z", True)), reading) == []
