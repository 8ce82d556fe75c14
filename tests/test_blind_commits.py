"""Blind commits (commands/replan.py, log.blind_snapshot) on local folders.

A DML plans on this process's cached snapshot without listing when it was shown to be the latest
less than the staleness window ago. These tests check that the outcome is always what a command
that listed first would get, against an in-memory model and delta-rs / DuckDB: another writer
(delta-rs, outside this process's cache) commits behind the cached snapshot (an append of rows
the condition matches, a delete of the same row, a new column the condition names, a property
change), an idempotent DML whose (appId, version) another writer committed, a conflict that
happens during the re-planned command (typed, as without blind commits), and the window's bounds
(age, half the log retention, a newer checkpoint, a recent blind loss).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, write_deltalake
from deltalake import DeltaTable as RsTable
from deltalake import Transaction as RsTransaction
from dml_helpers import assert_every_reader_sees

import dvengine
from dvengine import DeltaTable
from dvengine.errors import CommitConflictError
from dvengine.log import blind_snapshot, load_snapshot, snapshot_cache
from dvengine.log.loader import blind_commit_window_s
from dvengine.maintenance.properties import set_table_properties
from dvengine.storage import local

COLUMNS = ["id", "v"]
Row = tuple[Any, ...]
STALENESS = "DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS"


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "v": pa.array([r[1] for r in rows], pa.int64())})


def _table(path: Path, n: int = 40) -> tuple[str, dict[int, Row]]:
    rows = [(i, i * 10) for i in range(n)]
    dvengine.write(_arrow(rows), str(path))
    assert blind_snapshot(str(path), 5.0) is not None  # the write's own commit makes the cache fresh
    return str(path), {r[0]: r for r in rows}


def _foreign_metadata_commit(uri: str, version: int, configuration: dict[str, str], new_column: str | None = None) -> None:
    """Another writer's commit changing the table's metadata, written as a plain file (not through
    dvengine, so this process's cache does not learn of it)."""
    log = Path(uri, "_delta_log")
    lines = [json.loads(x) for x in (log / f"{0:020d}.json").read_text().splitlines()]
    meta = next(x["metaData"] for x in lines if "metaData" in x)
    meta["configuration"] = {**meta.get("configuration", {}), **configuration}
    if new_column is not None:
        schema = json.loads(meta["schemaString"])
        schema["fields"].append({"name": new_column, "type": "long", "nullable": True, "metadata": {}})
        meta["schemaString"] = json.dumps(schema)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES"}}
    with open(log / f"{version:020d}.json", "x") as fh:
        fh.write(json.dumps(info) + "\n" + json.dumps({"metaData": meta}) + "\n")


def _log_versions(path: str) -> list[str]:
    return sorted(p.name for p in Path(path, "_delta_log").glob("*.json"))


def test_blind_delete_commits_without_listing_and_equals_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Back-to-back DELETEs and UPDATEs by path: each plans on the snapshot its predecessor's commit
    left (no listing of _delta_log at all), and every reader sees the model."""
    uri, model = _table(tmp_path / "t")
    listed: list[str] = []
    real = local.LocalStorage.list_dir_after
    monkeypatch.setattr(local.LocalStorage, "list_dir_after", lambda self, d, f: listed.append(d) or real(self, d, f))
    for key in (3, 17, 29):
        assert DeltaTable.forPath(None, uri).delete(f"id = {key}", mode="dv")["numDeletedRows"] == 1
        del model[key]
        DeltaTable.forPath(None, uri).update(f"id = {key + 1}", {"v": "v + 1"})
        model[key + 1] = (key + 1, model[key + 1][1] + 1)
    assert not [d for d in listed if d.endswith("_delta_log")]
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_an_append_behind_the_cache_is_seen(tmp_path: Path) -> None:
    """delta-rs appends rows the DELETE matches after our snapshot was cached. A rebase would let
    the blind append through (WriteSerializable) and leave id 105 alive; the blind commit finds
    its version taken and the command re-plans on the listed log, so it deletes both rows."""
    uri, model = _table(tmp_path / "t")
    write_deltalake(uri, _arrow([(100 + i, i) for i in range(10)]), mode="append")
    model.update({100 + i: (100 + i, i) for i in range(10)})
    metrics = DeltaTable.forPath(None, uri).delete("id = 5 OR id = 105", mode="dv")
    assert metrics["numDeletedRows"] == 2 and metrics["version"] == 2
    del model[5], model[105]
    assert _log_versions(uri) == [f"{v:020d}.json" for v in range(3)]
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_same_row_deleted_behind_the_cache_is_a_no_op_as_with_a_listing(tmp_path: Path) -> None:
    """Another writer deleted id 7 first: a command that listed deletes nothing and commits
    nothing; so does the blind one (its no-op is checked against the listed log, not trusted)."""
    uri, model = _table(tmp_path / "t")
    RsTable(uri).delete("id = 7")
    del model[7]
    metrics = DeltaTable.forPath(None, uri).delete("id = 7", mode="dv")
    assert metrics["numDeletedRows"] == 0 and metrics["version"] is None
    assert load_snapshot(uri).version == 1
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_metadata_change_behind_the_cache(tmp_path: Path) -> None:
    """Another writer adds a column and sets a property after our snapshot: the blind DELETE naming the
    new column is not refused by the stale schema (its error is checked against the listed log),
    the re-planned DELETE commits, and the new column and property stay."""
    uri, model = _table(tmp_path / "t")
    _foreign_metadata_commit(uri, 1, {"delta.logRetentionDuration": "interval 20 days"}, new_column="w")
    metrics = DeltaTable.forPath(None, uri).delete("id = 4 OR w = 1", mode="dv")
    assert metrics["numDeletedRows"] == 1 and metrics["version"] == 2
    del model[4]
    snap = load_snapshot(uri)
    assert "w" in snap.schema.field_names and snap.configuration["delta.logRetentionDuration"] == "interval 20 days"
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_property_forbidding_dml_behind_the_cache_is_honoured(tmp_path: Path) -> None:
    """Another writer makes the table append-only after our snapshot: the blind DELETE must not commit."""
    uri, model = _table(tmp_path / "t")
    _foreign_metadata_commit(uri, 1, {"delta.appendOnly": "true"})
    with pytest.raises(dvengine.errors.OperationNotAllowedError, match="append-only"):
        DeltaTable.forPath(None, uri).delete("id = 1", mode="dv")
    assert load_snapshot(uri).version == 1
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_txn_repeat_committed_by_another_writer_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer committed (app, 3) after our snapshot was cached: the idempotent DELETE with
    the same (app, 3) skips (txnSkipped) instead of deleting, as a command that listed does."""
    uri, model = _table(tmp_path / "t")
    write_deltalake(
        uri, _arrow([(500, 0)]), mode="append",
        commit_properties=CommitProperties(app_transactions=[RsTransaction(app_id="app", version=3)]),
    )
    model[500] = (500, 0)
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_WRITE_TXNAPPID", "app")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_WRITE_TXNVERSION", "3")
    metrics = DeltaTable.forPath(None, uri).delete("id = 2", mode="dv")
    assert metrics["txnSkipped"] is True and metrics["version"] is None
    assert load_snapshot(uri).version == 1
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


@pytest.mark.parametrize("blind", [True, False], ids=["blind", "listing"])
def test_conflict_during_the_command_fails_typed_as_without_blind_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blind: bool
) -> None:
    """A writer deletes id 9 (a rewrite of its file) while our DELETE of id 9 commits. Blind: a first
    winner (an append) makes the blind commit re-plan, the conflicting one lands during the
    re-planned commit. Both ways the same typed conflict, nothing of ours committed."""
    if not blind:
        monkeypatch.setenv(STALENESS, "0")
    uri, model = _table(tmp_path / "t")
    winners = [lambda: RsTable(uri).delete("id = 9")]
    if blind:
        winners.insert(0, lambda: write_deltalake(uri, _arrow([(900, 0)]), mode="append"))
        model[900] = (900, 0)
    real = local.fault_point

    def race(stage: str) -> None:
        if stage == local.COMMIT_BEFORE_LINK and winners:
            winners.pop(0)()
        real(stage)

    monkeypatch.setattr(local, "fault_point", race)
    with pytest.raises(CommitConflictError) as raised:
        DeltaTable.forPath(None, uri).delete("id = 9", mode="dv")
    assert not winners
    del model[9]
    log = _log_versions(uri)
    assert log == [f"{v:020d}.json" for v in range(len(log))] and len(log) == (3 if blind else 2)
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))
    assert type(raised.value).__name__ in ("ConcurrentDeleteReadError", "ConcurrentAppendError")


def test_staleness_window_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cached snapshot is used blind only while young: older than the window, older than half
    the log retention, older than a checkpoint this process knows, or after a blind loss on the
    table within the window, the log is listed first; 0 turns blind commits off."""
    uri, _ = _table(tmp_path / "t")
    assert None is not blind_snapshot(uri, 5.0)
    assert None is blind_snapshot(uri, 0.0)
    time.sleep(0.25)
    assert None is blind_snapshot(uri, 0.2)  # older than the window: the command lists
    load_snapshot(uri)  # ... which makes it fresh again
    assert None is not blind_snapshot(uri, 0.2)
    assert blind_commit_window_s({}, 5.0) == 5.0
    assert blind_commit_window_s({"delta.logRetentionDuration": "interval 4 seconds"}, 5.0) == 2.0
    assert blind_commit_window_s({"delta.logRetentionDuration": "interval 1 months"}, 5.0) == 0.0  # unparsable
    set_table_properties(uri, {"delta.logRetentionDuration": "interval 400 milliseconds"})
    assert None is not blind_snapshot(uri, 5.0)  # within 0.2 s of its own commit
    time.sleep(0.25)
    assert None is blind_snapshot(uri, 5.0)  # the window is 0.2 s: half the retention
    version = load_snapshot(uri).version
    snapshot_cache.note_checkpoint(uri, version + 1)  # as if this process had listed a newer checkpoint
    assert None is blind_snapshot(uri, 5.0)
    snapshot_cache.clear_snapshot_cache()
    load_snapshot(uri)
    assert None is not blind_snapshot(uri, 5.0)
    snapshot_cache.note_blind_loss(uri, time.monotonic())
    assert None is blind_snapshot(uri, 5.0)


def test_blind_merge_sees_rows_appended_behind_the_cache(tmp_path: Path) -> None:
    """An upsert of id 105, which delta-rs appended after our snapshot: planned on the stale
    snapshot it would insert a second id 105 (and a rebase would let that through past the blind
    append); the re-planned MERGE updates the appended row. Then back-to-back MERGEs commit blind."""
    uri, model = _table(tmp_path / "t")
    write_deltalake(uri, _arrow([(105, 5)]), mode="append")
    model[105] = (105, 5)

    def upsert(rows: list[Row]) -> dict[str, Any]:
        builder = DeltaTable.forPath(None, uri).alias("t").merge(_arrow(rows), "t.id = s.id", source_alias="s")
        return dict(builder.withMode("dv").whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().executeMetrics())

    metrics = upsert([(105, -1), (200, -2)])
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"], metrics["version"]) == (1, 1, 2)
    model[105], model[200] = (105, -1), (200, -2)
    assert None is blind_snapshot(uri, 5.0)  # a blind loss within the window: list first
    snapshot_cache.clear_snapshot_cache()  # as a new window would
    load_snapshot(uri)
    for i in range(3):
        assert None is not blind_snapshot(uri, 5.0)
        upsert([(i, -10 - i), (300 + i, 0)])
        model[i], model[300 + i] = (i, -10 - i), (300 + i, 0)
    assert load_snapshot(uri).version == 5
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))


def test_own_commit_past_the_cached_version_means_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that listed lost a race to delta-rs (version 1), rebased and committed version 2:
    the cache moves to version 2 by the winner it read and its own commit, but not as shown latest
    (another writer is active), so the next DML lists instead of committing blind; once listed,
    its own commits carry it again."""
    uri, model = _table(tmp_path / "t")
    from dvengine.api import dml

    stale = load_snapshot(uri)
    write_deltalake(uri, _arrow([(700, 0)]), mode="append")
    model[700] = (700, 0)
    with monkeypatch.context() as patched:
        patched.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)
        patched.setattr(dml, "load_snapshot", lambda root: stale)
        assert DeltaTable.forPath(None, uri).delete("id = 1", mode="dv")["numCommitAttempts"] == 2
    del model[1]
    entry = snapshot_cache.get(uri)
    assert entry is not None and (entry.version, entry.verified_at) == (2, None)
    with monkeypatch.context() as uncached:
        uncached.setenv(snapshot_cache.ENV_SWITCH, "false")
        listed = load_snapshot(uri)  # the state a listing builds, the cache untouched
    assert (entry.snapshot.files, entry.snapshot.metadata) == (listed.files, listed.metadata)
    assert blind_snapshot(uri, 5.0) is None
    assert DeltaTable.forPath(None, uri).delete("id = 2", mode="dv")["version"] == 3  # listed
    del model[2]
    assert blind_snapshot(uri, 5.0) is not None
    assert_every_reader_sees(Path(uri), COLUMNS, list(model.values()))
