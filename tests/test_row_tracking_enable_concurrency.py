"""Enabling row tracking on an existing table while another writer commits (Delta's ConflictChecker
rules for the backfill and the enablement, commit/row_tracking_conflicts.py).

Each test interleaves a writer's commit with the enablement (``ALTER TABLE SET TBLPROPERTIES
(delta.enableRowTracking = true)``, one commit: protocol, property and backfill) in both orders:
the writer lands between the enablement's read and its commit (the enablement loses the race and
folds the writer's files into its backfill), or the enablement lands between the writer's read and
its commit (the writer takes the enablement over: fresh ids for its files, the backfill's ids for
the files it re-adds, ``delta.rowTracking.preserved=false``). The truth: a model of the rows
(id -> value); each row's stable id computed from the raw log and the Parquet file (materialized id,
else ``baseRowId`` + physical row index); every live file of every version from the enablement on
carries ``baseRowId`` / ``defaultRowCommitVersion`` (raw JSON); ids unique, and ids of rows the
writer left alone equal to those the backfill gave. delta-rs reads the model's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dvengine
import dvengine.commands.context as dml_context
import dvengine.commands.write as write_command
from dvengine import DeltaTable
from dvengine.commit.commit_info import delta_json
from dvengine.commit.transaction import Transaction
from dvengine.errors import MetadataChangedError
from dvengine.log import load_snapshot
from dvengine.maintenance import properties
from dvengine.maintenance.properties import set_table_properties
from dvengine.read.row_ids import read_row_tracking
from tests.interop import rows_delta_rs, sort_rows
from tests.test_row_tracking import _commit_actions, _replay, check_invariants

ENABLE = {"delta.enableRowTracking": "true"}
PRESERVED = "delta.rowTracking.preserved"


def _table(root: Path) -> dict[int, int]:
    """Three appended files of five rows (no row tracking, DVs on); returns the model id -> v."""
    for start in (0, 10, 20):
        rows = pa.table({"id": pa.array(range(start, start + 5), pa.int64()), "v": pa.array(range(start, start + 5), pa.int64())})
        dvengine.write(rows, str(root), mode="append", configuration={"delta.enableDeletionVectors": "true"})
    return {i: i for s in (0, 10, 20) for i in range(s, s + 5)}


def _once(hook: Callable[[], object], listed: bool = False) -> type[Transaction]:
    """A Transaction whose first commit() runs ``hook`` first: another writer's commit lands
    between this transaction's read and its commit. ``listed``: treat the read snapshot as listed
    (a command planned on this process's cached snapshot re-plans instead when its version is
    taken, commands/replan.py; one planned on a listed snapshot, e.g. in a fresh process or after
    a re-plan, goes through the conflict checker, which is what these tests are about)."""
    state = {"pending": True}

    class Interleaved(Transaction):
        def commit(self, operation_metrics: Any = None) -> int:
            if state["pending"]:
                state["pending"] = False
                hook()
                if listed:
                    self.blind = False
            return super().commit(operation_metrics)

    return Interleaved


def _info(root: Path, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in _commit_actions(root, version) if "commitInfo" in a)


def _raw_ids(root: Path) -> dict[int, list[int]]:
    """id -> stable row id of every live row, from the raw JSON and the Parquet files alone."""
    version = load_snapshot(str(root)).version
    live, _ = _replay(root, version)
    config: dict[str, str] = {}
    for v in range(version + 1):
        for action in _commit_actions(root, v):
            if "metaData" in action:
                config = action["metaData"]["configuration"]
    materialized = config["delta.rowTracking.materializedRowIdColumnName"]
    out: dict[int, list[int]] = {}
    for path, add in live.items():
        table = pq.read_table(root / path)
        stored = table.column(materialized).to_pylist() if materialized in table.column_names else [None] * table.num_rows
        for index, (row, mat) in enumerate(zip(table.column("id").to_pylist(), stored, strict=True)):
            out.setdefault(row, []).append(mat if mat is not None else add["baseRowId"] + index)
    return out  # DV'd rows appear too: only the model's rows are looked up


def _check(root: Path, model: dict[int, int], enabled_at: int) -> dict[int, int]:
    """Rows and ids equal the truth; every version from the enablement satisfies the protocol."""
    check_invariants(root, set(), first=enabled_at)
    got = {r["id"]: (r["v"], r["row_id"]) for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert {i: v for i, (v, _) in got.items()} == model
    raw = _raw_ids(root)
    for i, (_, row_id) in got.items():
        assert raw[i] == [row_id], f"id {i}: row id {row_id}, its file says {raw[i]}"
    assert len({r for _, r in got.values()}) == len(got)
    assert rows_delta_rs(root, ["id", "v"]) == sort_rows(list(model.items()))
    return {i: r for i, (_, r) in got.items()}


def _enabled_version(root: Path) -> int:
    for version in range(load_snapshot(str(root)).version + 1):
        if _info(root, version)["operation"] == "SET TBLPROPERTIES":
            return version
    raise AssertionError("no enablement commit")


def _append(root: Path, ids: range) -> None:
    dvengine.write(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64())}), str(root), mode="append")


# --- the enablement loses: the writer lands between its read and its commit --------------------


@pytest.fixture
def enable_loses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], object]], None]]:
    def arrange(writer: Callable[[], object]) -> None:
        monkeypatch.setattr(properties, "Transaction", _once(writer))

    yield arrange


def test_enable_loses_to_append_backfills_the_appended_file(tmp_path: Path, enable_loses: Any) -> None:
    root = tmp_path / "t"
    model = _table(root)
    enable_loses(lambda: _append(root, range(100, 104)))
    version = set_table_properties(str(root), ENABLE)
    assert version == 4 and _info(root, 4)["readVersion"] == 2  # it lost version 3 to the append
    model |= {i: i for i in range(100, 104)}
    _check(root, model, version)
    adds = [a["add"] for a in _commit_actions(root, version) if "add" in a]
    assert len(adds) == 4 and not any(a["dataChange"] for a in adds)  # the three old files + the append's
    assert _info(root, version)["tags"] == {"rowTrackingEnablementOnly": "true"}


def test_enable_loses_to_dv_delete_keeps_the_deletes(tmp_path: Path, enable_loses: Any) -> None:
    root = tmp_path / "t"
    model = _table(root)
    enable_loses(lambda: DeltaTable.forPath(None, str(root)).delete("id IN (1, 11, 12)", mode="dv"))
    version = set_table_properties(str(root), ENABLE)
    assert _info(root, version)["readVersion"] == version - 2
    for i in (1, 11, 12):
        del model[i]
    _check(root, model, version)
    adds = [a["add"] for a in _commit_actions(root, version) if "add" in a]
    assert sum(a.get("deletionVector") is not None for a in adds) == 2  # the winner's DVs, not our stale copies
    snap = load_snapshot(str(root))
    assert all(f.base_row_id is not None for f in snap.files)


def test_enable_loses_to_copy_on_write_update(tmp_path: Path, enable_loses: Any) -> None:
    root = tmp_path / "t"
    model = _table(root)
    enable_loses(lambda: DeltaTable.forPath(None, str(root)).update("id = 22", {"v": "-1"}, mode="rewrite"))
    version = set_table_properties(str(root), ENABLE)
    model[22] = -1
    _check(root, model, version)
    live, _ = _replay(root, version)
    assert len(live) == 3 and all(a["defaultRowCommitVersion"] == version for a in live.values())


def test_enable_loses_to_metadata_change_is_a_conflict(tmp_path: Path, enable_loses: Any) -> None:
    root = tmp_path / "t"
    _table(root)
    enable_loses(lambda: set_table_properties(str(root), {"delta.appendOnly": "false"}))
    with pytest.raises(MetadataChangedError):
        set_table_properties(str(root), ENABLE)
    snap = load_snapshot(str(root))
    assert snap.version == 3 and "delta.enableRowTracking" not in snap.configuration
    assert all(f.base_row_id is None for f in snap.files)


# --- the enablement wins: it lands between the writer's read and its commit --------------------


def _enable_first(monkeypatch: pytest.MonkeyPatch, module: Any, root: Path) -> None:
    monkeypatch.setattr(module, "Transaction", _once(lambda: set_table_properties(str(root), ENABLE), listed=True))


def test_append_loses_to_enable_gets_fresh_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = _table(root)
    _enable_first(monkeypatch, write_command, root)
    _append(root, range(100, 104))
    assert _enabled_version(root) == 3 and load_snapshot(str(root)).version == 4
    model |= {i: i for i in range(100, 104)}
    ids = _check(root, model, 3)
    assert sorted(ids[i] for i in range(100, 104)) == [15, 16, 17, 18]  # above the backfill's 0-14
    info = _info(root, 4)
    assert info["readVersion"] == 2 and info["tags"] == {PRESERVED: "false"}
    assert not any("metaData" in a or "protocol" in a for a in _commit_actions(root, 4))


def test_dv_delete_loses_to_enable_keeps_the_backfilled_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = _table(root)
    _enable_first(monkeypatch, dml_context, root)
    DeltaTable.forPath(None, str(root)).delete("id IN (3, 24)", mode="dv")
    assert _enabled_version(root) == 3
    info = _info(root, 4)
    assert info["operation"] == "DELETE" and info["readVersion"] == 2 and info["tags"] == {PRESERVED: "false"}
    del model[3], model[24]
    ids = _check(root, model, 3)
    before = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root), version=3)).to_pylist()}
    assert ids == {i: before[i] for i in model}  # the DV'd files kept the backfill's baseRowId
    for action in _commit_actions(root, 4):
        if "remove" in action:  # the removes name the backfilled ids too (Delta's rule 2)
            assert action["remove"]["baseRowId"] == _replay(root, 3)[0][action["remove"]["path"]]["baseRowId"]


def test_copy_on_write_update_loses_to_enable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = _table(root)
    _enable_first(monkeypatch, dml_context, root)
    DeltaTable.forPath(None, str(root)).update("id = 12", {"v": "-5"}, mode="rewrite")
    assert _info(root, 4)["tags"] == {PRESERVED: "false"}
    model[12] = -5
    ids = _check(root, model, 3)
    before = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root), version=3)).to_pylist()}
    untouched = [i for i in model if not 10 <= i < 15]
    assert {i: ids[i] for i in untouched} == {i: before[i] for i in untouched}
    assert all(ids[i] > 14 for i in range(10, 15))  # rewritten without stable ids: fresh (not preserved)


def test_blind_dml_replans_after_enable_and_preserves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DELETE planned on the cached snapshot re-plans on the enabled table instead (commands/
    replan.py): it reads the backfilled ids, so it preserves them and says so."""
    root = tmp_path / "t"
    model = _table(root)
    monkeypatch.setattr(dml_context, "Transaction", _once(lambda: set_table_properties(str(root), ENABLE)))
    DeltaTable.forPath(None, str(root)).update("id = 12", {"v": "-5"}, mode="rewrite")
    info = _info(root, 4)
    assert info["readVersion"] == 3 and info["tags"] == {PRESERVED: "true"}
    model[12] = -5
    ids = _check(root, model, 3)
    before = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root), version=3)).to_pylist()}
    assert ids == {i: before[i] for i in model}


def test_metadata_change_loses_to_enable_is_a_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    _table(root)
    # the hook's own set_table_properties runs through the same (already fired) class
    monkeypatch.setattr(properties, "Transaction", _once(lambda: set_table_properties(str(root), ENABLE)))
    with pytest.raises(MetadataChangedError):
        set_table_properties(str(root), {"delta.appendOnly": "false"})
    snap = load_snapshot(str(root))
    assert snap.version == 3 and "delta.appendOnly" not in snap.configuration
    check_invariants(root, set(), first=3)



def test_writer_fails_when_the_enablement_changes_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ALTER that enables row tracking and sets another property is not an enablement only:
    a concurrent writer fails as Delta's (MetadataChangedException), the table keeps no id-less file."""
    root = tmp_path / "t"
    _table(root)
    both = {**ENABLE, "delta.appendOnly": "false"}
    monkeypatch.setattr(write_command, "Transaction", _once(lambda: set_table_properties(str(root), both), listed=True))
    with pytest.raises(MetadataChangedError):
        _append(root, range(100, 104))
    assert load_snapshot(str(root)).version == 3
    assert "tags" not in _info(root, 3)  # not tagged rowTrackingEnablementOnly either
    check_invariants(root, set(), first=3)


def test_append_on_a_legacy_protocol_table_takes_the_enablement_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writer 2 table (no table features): the enablement moves it to writer 7 with the legacy
    features listed plus rowTracking / domainMetadata, still only an enablement for the writer."""
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array(range(5), pa.int64()), "v": pa.array(range(5), pa.int64())}), str(root),
                   mode="append", configuration={"delta.enableDeletionVectors": "false"})
    assert load_snapshot(str(root)).protocol.min_writer_version < 7
    _enable_first(monkeypatch, write_command, root)
    _append(root, range(10, 13))
    assert _info(root, 2)["tags"] == {PRESERVED: "false"} and _info(root, 2)["readVersion"] == 0
    _check(root, {i: i for i in [*range(5), *range(10, 13)]}, 1)


def test_takes_over_only_a_row_tracking_change() -> None:
    """The pure rule: a winner whose protocol adds another feature too, or whose configuration
    changes another key, is not taken over (ProtocolChangedError / MetadataChangedError)."""
    from dvengine.commit.conflicts import TransactionFootprint, WinningCommit, check_conflicts
    from dvengine.commit.row_tracking_conflicts import takes_over
    from dvengine.errors import ProtocolChangedError
    from dvengine.protocol.actions import Metadata, Protocol

    ours_p = Protocol(1, 2)
    ours_m = Metadata("t", '{"type":"struct","fields":[]}', configuration={"a": "1"})
    names = {"delta.rowTracking.materializedRowIdColumnName": "_row-id-col-x",
             "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-y"}
    enabled = Metadata("t", ours_m.schema_string, configuration={"a": "1", **ENABLE, **names})
    rt = Protocol(1, 7, None, ("appendOnly", "invariants", "domainMetadata", "rowTracking"))
    more = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "invariants", "deletionVectors", "domainMetadata", "rowTracking"))

    def winner(p: Protocol | None, m: Metadata | None) -> WinningCommit:
        return WinningCommit(1, p, m, (), (), frozenset(), False, "SET TBLPROPERTIES")

    assert takes_over(winner(rt, enabled), ours_p, ours_m, False, False)
    assert takes_over(winner(rt, None), ours_p, ours_m, False, False)  # addFeatureSupport("rowTracking")
    assert not takes_over(winner(more, enabled), ours_p, ours_m, False, False)
    with pytest.raises(ProtocolChangedError):
        check_conflicts(winner(more, enabled), TransactionFootprint(), False)
    other = Metadata("t", ours_m.schema_string, configuration={"a": "2", **ENABLE, **names})
    with pytest.raises(MetadataChangedError):
        takes_over(winner(rt, other), ours_p, ours_m, False, False)
    with pytest.raises(MetadataChangedError):
        takes_over(winner(rt, enabled), ours_p, ours_m, False, True)  # we change metadata too
    assert not takes_over(winner(rt, enabled), ours_p, ours_m, True, False)  # we change the protocol too


def _delta_style_enable(root: Path) -> None:
    """Delta's three commits: protocol upgrade, ``ROW TRACKING BACKFILL``, then the property
    (here a metadata-only enablement, the files all having ids by then)."""
    DeltaTable.forPath(None, str(root)).addFeatureSupport("rowTracking")
    snapshot = load_snapshot(str(root))
    # DeltaOperations.RowTrackingBackfill: "batchId" -> JsonUtils.toJson(batchId), the JSON string "0"
    txn = Transaction(str(root), snapshot, "ROW TRACKING BACKFILL", {"batchId": delta_json(0)})
    txn.backfill_row_ids([f for f in snapshot.files if f.base_row_id is None])
    txn.commit()
    set_table_properties(str(root), ENABLE)


def test_dv_delete_loses_to_delta_three_commit_enablement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = _table(root)
    monkeypatch.setattr(dml_context, "Transaction", _once(lambda: _delta_style_enable(root), listed=True))
    DeltaTable.forPath(None, str(root)).delete("id IN (2, 13)", mode="dv")
    assert [_info(root, v)["operation"] for v in (4, 5, 6)] == ["ROW TRACKING BACKFILL", "SET TBLPROPERTIES", "DELETE"]
    assert any("protocol" in a for a in _commit_actions(root, 3))
    assert _info(root, 5)["tags"] == {"rowTrackingEnablementOnly": "true"}
    assert _info(root, 6)["readVersion"] == 2 and _info(root, 6)["tags"] == {PRESERVED: "false"}
    del model[2], model[13]
    ids = _check(root, model, 5)
    backfilled = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root), version=5)).to_pylist()}
    assert ids == {i: backfilled[i] for i in model}  # the DV'd files kept the backfill commit's ids
