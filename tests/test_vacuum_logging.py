"""VACUUM START / VACUUM END: the commits Delta logs around a VACUUM's deletions.

Truth: delta-io/delta ``VacuumCommand.scala`` (``VacuumCommandImpl.shouldLogVacuum``,
``logVacuumStart``, ``logVacuumEnd``; ``gc``: START after the files to delete are known, END
``FAILED`` when the deletion throws, none in a dry run) and ``DeltaOperations.scala``
(``VacuumStart``: ``retentionCheckEnabled`` Boolean, ``defaultRetentionMillis`` Long,
``specifiedRetentionMillis`` Option[Long]; ``VacuumEnd``: ``status`` String; metrics
``VACUUM_START = numFilesToDelete, sizeOfDataToDelete``, ``VACUUM_END = numDeletedFiles,
numVacuumedDirectories``), each quoted beside its expectation. Each commit file is read raw and
compared type-strictly (``true`` is not ``"true"``); what was deleted comes from the files on disk
and from the raw JSON log read as a model (``vacuum_model.LogModel``), the folders from a walk of
the table with Delta's hidden-name rule written out here; the table is then read at every version
by dvengine, delta-rs and DuckDB, and its history by dvengine and delta-rs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from dml_helpers import folder_state
from vacuum_model import LogModel, Row, assert_versions_read, delta_gc_diff

import dvengine
from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, MetadataChangedError
from dvengine.log import load_snapshot
from dvengine.log.background_checkpoints import wait_for_checkpoints
from dvengine.maintenance.history import history
from dvengine.maintenance.properties import set_table_properties
from dvengine.maintenance.vacuum import vacuum
from dvengine.maintenance.vacuum_logging import commit_vacuum_event, start_parameters

COLUMNS = ["id", "p", "v"]
LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"
WEEK_MS = 7 * 24 * 3_600_000
# Delta's CommitInfo field order for a commit that reads a table (no inCommitTimestamp, no tags).
COMMIT_INFO_KEYS = [
    "timestamp", "operation", "operationParameters", "readVersion", "isolationLevel", "isBlindAppend",
    "operationMetrics", "engineInfo", "txnId",
]  # fmt: skip


def _typed(value: Any) -> str:
    """Canonical JSON text: tells true from "true" from 1, which == on Python values does not."""
    return json.dumps(value, sort_keys=True)


def _versions(root: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in (root / "_delta_log").glob("*.json"))


def _lines(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _raw_parameters_text(root: Path, version: int) -> str:
    """The operationParameters object exactly as written (key order included)."""
    text = (root / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8")
    start = text.index('"operationParameters":') + len('"operationParameters":')
    return text[start : text.index("}", start) + 1]


def _only_commit_info(root: Path, version: int) -> dict[str, Any]:
    """The commit's one action, which must be a commitInfo (Delta commits ``actions = Seq()``)."""
    actions = _lines(root, version)
    assert [list(a) for a in actions] == [["commitInfo"]], f"version {version} holds {actions}"
    info: dict[str, Any] = actions[0]["commitInfo"]
    return info


def _is_hidden(name: str, partition_columns: list[str]) -> bool:
    """Delta's ``DeltaTableUtils.isHiddenDirectory``, written out: ``.``/``_`` names are hidden except
    ``_delta_index``, ``_change_data`` and partition folders."""
    return name.startswith((".", "_")) and not name.startswith(("_delta_index", "_change_data")) and not any(
        name.startswith(f"{c}=") for c in partition_columns
    )


def _listed_folders(root: Path, partition_columns: list[str]) -> int:
    """Delta's ``dirCounts``: the folders VACUUM FULL's listing finds, plus one for the table root."""
    count = 0
    for _, dirnames, _ in os.walk(root):
        dirnames[:] = [d for d in dirnames if not _is_hidden(d, partition_columns)]
        count += len(dirnames)
    return count + 1


def _visible_files(root: Path, partition_columns: list[str]) -> dict[str, int]:
    """{relative path: size} of the files VACUUM FULL considers."""
    out = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if not _is_hidden(d, partition_columns)]
        for name in names:
            if not _is_hidden(name, partition_columns):
                path = Path(dirpath, name)
                out[path.relative_to(root).as_posix()] = path.stat().st_size
    return out


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "p": pa.array([r[1] for r in rows], pa.string()),
        "v": pa.array([r[2] for r in rows], pa.int64()),
    })


def _build(root: Path) -> tuple[dict[int, list[Row]], int]:
    """v0 create (partitioned, change data feed on, retention 2 days), v1 DV delete in partition a,
    v2 DV update in partition b (change data), v3 drop partition b, plus an orphan file; (rows per
    version, an instant after v3 and every file)."""
    model = {i: (i, "a" if i < 10 else "b", i * 10) for i in range(20)}
    rows: dict[int, list[Row]] = {}
    conf = {"delta.enableChangeDataFeed": "true", "delta.deletedFileRetentionDuration": "interval 2 days"}
    rows[dvengine.write(_arrow(sorted(model.values())), str(root), partitionBy=["p"], configuration=conf)] = sorted(
        model.values()
    )
    t = DeltaTable.forPath(None, str(root))
    for i in range(3):
        del model[i]
    rows[t.deleteMetrics("id < 3", mode="dv")["version"]] = sorted(model.values())
    for i in (10, 11):
        model[i] = (i, "b", i * 10 + 1)
    rows[t.updateMetrics("id in (10, 11)", {"v": "v + 1"}, mode="dv")["version"]] = sorted(model.values())
    for i in [k for k, r in model.items() if r[1] == "b"]:
        del model[i]
    rows[t.deleteMetrics("p = 'b'")["version"]] = sorted(model.values())
    (root / "p=a" / "part-00000-orphan.c000.snappy.parquet").write_bytes(b"an orphan no commit names")
    time.sleep(0.05)
    return rows, int(time.time() * 1000)


@pytest.fixture(autouse=True)
def dv_files_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every deletion vector in a file, so VACUUM has DV files to consider; the logging conf unset."""
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    monkeypatch.delenv(LOGGING_ENV, raising=False)


def test_start_and_end_commits_carry_deltas_parameters_and_metrics(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows, cutoff = _build(root)
    before_versions = _versions(root)
    latest = before_versions[-1]
    on_disk = _visible_files(root, ["p"])
    folders = _listed_folders(root, ["p"])
    log = LogModel.read(lambda v: (root / "_delta_log" / f"{v:020d}.json").read_bytes(), before_versions)
    # Everything is older than the cutoff and every commit is at or before it: FULL deletes every
    # visible file the latest version does not reference (the orphan, partition b, old change data).
    expected = set(on_disk) - log.needed_inside_window(latest)
    assert "p=a/part-00000-orphan.c000.snappy.parquet" in expected
    assert any(n.startswith("_change_data/") for n in expected) and any(n.startswith("p=b/") for n in expected)

    report = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff)

    assert set(report["files"]) == expected and not any((root / n).exists() for n in expected)
    assert _versions(root) == [*before_versions, latest + 1, latest + 2]
    start, end = _only_commit_info(root, latest + 1), _only_commit_info(root, latest + 2)
    # VacuumStart(retentionCheckEnabled, specifiedRetentionMillis, defaultRetentionMillis).parameters =
    #   Map("retentionCheckEnabled" -> ..., "defaultRetentionMillis" -> ...) ++ specifiedRetentionMillis.map(...)
    assert start["operation"] == "VACUUM START"
    assert _typed(start["operationParameters"]) == _typed(
        {"retentionCheckEnabled": False, "defaultRetentionMillis": 2 * 24 * 3_600_000, "specifiedRetentionMillis": 0}
    )
    assert _raw_parameters_text(root, latest + 1) == (
        '{"retentionCheckEnabled":false,"defaultRetentionMillis":172800000,"specifiedRetentionMillis":0}'
    )
    # logVacuumStart: numFilesToDelete = diff.count(), sizeOfDataToDelete = sum of the lengths; every metric a string
    assert _typed(start["operationMetrics"]) == _typed(
        {"numFilesToDelete": str(len(expected)), "sizeOfDataToDelete": str(sum(on_disk[n] for n in expected))}
    )
    # VacuumEnd(status).parameters = Map("status" -> status); COMPLETED with numDeletedFiles and
    # numVacuumedDirectories (dirCounts: the folders listed, plus the root)
    assert end["operation"] == "VACUUM END"
    assert _typed(end["operationParameters"]) == _typed({"status": "COMPLETED"})
    assert _typed(end["operationMetrics"]) == _typed(
        {"numDeletedFiles": str(len(expected)), "numVacuumedDirectories": str(folders)}
    )
    assert folders == 5  # the root, p=a, p=b, _change_data, _change_data/p=b
    for info, read_version in ((start, latest), (end, latest + 1)):
        assert list(info) == COMMIT_INFO_KEYS
        # an empty commit changes no data: Delta downgrades it to SnapshotIsolation; nothing read -> blind append
        assert (info["isolationLevel"], info["isBlindAppend"], info["readVersion"]) == (
            "SnapshotIsolation", True, read_version
        )
    assert start["timestamp"] <= end["timestamp"]
    # Delta persists _last_vacuum_info after VACUUM END; a FULL run records no watermark
    assert (root / "_delta_log" / "_last_vacuum_info").read_bytes() == b"{}\n"

    # Readers: every version inside the window (v3, the one current at the cutoff, and both VACUUM
    # commits) reads the same rows in dvengine, delta-rs and DuckDB.
    rows[latest + 1] = rows[latest + 2] = rows[latest]
    assert_versions_read(str(root), rows, [latest, latest + 1, latest + 2], COLUMNS)
    assert RsTable(str(root)).version() == latest + 2


def test_history_shows_both_commits_as_describe_history_does(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _, cutoff = _build(root)
    latest = _versions(root)[-1]
    folders = _listed_folders(root, ["p"])
    vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff)
    # DESCRIBE HISTORY reads operationParameters back as map<string,string> (getLegacyPostDeserialization-
    # OperationParameters: false -> "false", 172800000 -> "172800000")
    newest = history(str(root), limit=2)
    assert [(r["version"], r["operation"]) for r in newest] == [(latest + 2, "VACUUM END"), (latest + 1, "VACUUM START")]
    assert _typed(newest[0]["operationParameters"]) == _typed({"status": "COMPLETED"})
    assert _typed(newest[1]["operationParameters"]) == _typed(
        {"retentionCheckEnabled": "false", "defaultRetentionMillis": "172800000", "specifiedRetentionMillis": "0"}
    )
    assert newest[0]["isolationLevel"] == "SnapshotIsolation" and newest[0]["isBlindAppend"] is True
    # delta-rs keeps the raw values
    rs = {h["version"]: h for h in RsTable(str(root)).history(3)}
    assert (rs[latest + 1]["operation"], rs[latest + 2]["operation"]) == ("VACUUM START", "VACUUM END")
    assert rs[latest + 1]["operationParameters"]["retentionCheckEnabled"] is False
    assert rs[latest + 2]["operationMetrics"]["numVacuumedDirectories"] == str(folders)


def test_change_feed_time_travel_and_restore_pass_over_the_vacuum_commits(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows, _ = _build(root)
    latest = _versions(root)[-1]
    # a retention of 1 day keeps every version readable (nothing is that old): only the logging matters
    vacuum(str(root), retention_hours=24, enforce_retention=False)
    t = DeltaTable.forPath(None, str(root))
    t.deleteMetrics("id = 5", mode="dv")
    after = [r for r in rows[latest] if r[0] != 5]
    changes = t.changes(startingVersion=latest + 1)
    # the VACUUM commits add no change rows; the DELETE after them is there, at its own version
    assert sorted(zip(changes.column("_commit_version").to_pylist(), changes.column("_change_type").to_pylist(),
                      changes.column("id").to_pylist(), strict=True)) == [(latest + 3, "delete", 5)]
    rs_changes = pa.table(RsTable(str(root)).load_cdf(starting_version=latest + 1).read_all())
    assert sorted(zip(rs_changes.column("_commit_version").to_pylist(), rs_changes.column("id").to_pylist(),
                      strict=True)) == [(latest + 3, 5)]
    expected = {**rows, latest + 1: rows[latest], latest + 2: rows[latest], latest + 3: after}
    assert_versions_read(str(root), expected, list(range(latest + 4)), COLUMNS)
    # time travel by timestamp to the VACUUM START commit resolves to it
    start_ts = history(str(root))[2]["timestamp"]
    assert DeltaTable.forPath(None, str(root)).toArrow(timestamp=start_ts).num_rows == len(rows[latest])
    # RESTORE to a VACUUM version restores the rows it reads
    t.restoreToVersion(latest + 1)
    assert_versions_read(str(root), {latest + 4: rows[latest]}, [latest + 4], COLUMNS)


def test_dry_run_and_logging_off_commit_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    _, cutoff = _build(root)
    before = folder_state(root)
    # logVacuumStart is reached only after `if (dryRun) return ...`
    dry = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff, dry_run=True)
    assert dry["files"] and folder_state(root) == before
    DeltaTable.forPath(None, str(root)).vacuum(0.0, dryRun=True, enforceRetention=False)
    assert folder_state(root) == before

    # spark.databricks.delta.vacuum.logging.enabled=false (no session: its environment variable)
    monkeypatch.setenv(LOGGING_ENV, "false")
    versions = _versions(root)
    done = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff)
    assert set(done["files"]) == set(dry["files"]) and _versions(root) == versions
    assert not any((root / n).exists() for n in done["files"])


def test_a_bad_conf_value_is_refused_before_anything_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    _, cutoff = _build(root)
    before = folder_state(root)
    monkeypatch.setenv(LOGGING_ENV, "sometimes")
    with pytest.raises(InvalidArgumentError, match="spark.databricks.delta.vacuum.logging.enabled"):
        vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff)
    assert folder_state(root) == before
    # a dry run does not read the conf (it never logs), as Delta's gc returns before logVacuumStart
    assert vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff, dry_run=True)["files"]


def test_no_retention_given_logs_no_specified_retention(tmp_path: Path) -> None:
    """``specifiedRetentionMillis`` is Delta's Option: absent when VACUUM ran with the table's retention
    (API ``vacuum()``, SQL without RETAIN, the CLI without --retain-hours); the check flag is the conf's."""
    root = tmp_path / "t"
    _build(root)
    latest = _versions(root)[-1]
    folders = _listed_folders(root, ["p"])
    log = LogModel.read(lambda v: (root / "_delta_log" / f"{v:020d}.json").read_bytes(), _versions(root))
    report = DeltaTable.forPath(None, str(root)).vacuum()
    assert isinstance(report, dict)  # no session: dvengine's report
    assert report["retentionHours"] == 48.0 and report["files"] == []  # nothing is two days old
    # Delta's diff still holds the folders with nothing old and no valid file under them: the change
    # data folders (their files are young; change data is not in the snapshot's state), counted to
    # delete, not deleted (not empty)
    _, diff_folders = delta_gc_diff(root, ["p"], report["cutoffTimestampMs"], log.delta_valid_files(report["cutoffTimestampMs"]))
    assert diff_folders == {"_change_data", "_change_data/p=b"}
    start, end = _only_commit_info(root, latest + 1), _only_commit_info(root, latest + 2)
    assert _raw_parameters_text(root, latest + 1) == '{"retentionCheckEnabled":true,"defaultRetentionMillis":172800000}'
    assert _typed(start["operationMetrics"]) == _typed({"numFilesToDelete": "2", "sizeOfDataToDelete": "0"})
    assert _typed(end["operationMetrics"]) == _typed({"numDeletedFiles": "0", "numVacuumedDirectories": str(folders)})

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["vacuum", str(root)])
    assert args.handler(args) == 0
    assert _raw_parameters_text(root, latest + 3) == '{"retentionCheckEnabled":true,"defaultRetentionMillis":172800000}'
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0", "--force"])
    assert args.handler(args) == 0
    assert _raw_parameters_text(root, latest + 5) == (
        '{"retentionCheckEnabled":false,"defaultRetentionMillis":172800000,"specifiedRetentionMillis":0}'
    )
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0", "--force", "--dry-run"])
    assert args.handler(args) == 0
    assert _versions(root)[-1] == latest + 6


def test_a_failed_deletion_is_logged_failed_and_the_error_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """logVacuumEnd(..., filesDeleted = None) in the catch of ``delete``: status FAILED, no metrics, rethrown;
    _last_vacuum_info is not written (persistLastVacuumInfo comes after the END of a completed run)."""
    root = tmp_path / "t"
    _, cutoff = _build(root)
    latest = _versions(root)[-1]
    real_unlink = os.unlink
    calls: list[str] = []

    def unlink_fails_second(path: Any, *args: Any, **kwargs: Any) -> None:
        if "_delta_log" not in str(path):  # the commits' own temp files go on as usual
            calls.append(str(path))
            if len(calls) == 2:
                raise PermissionError(13, "Permission denied", str(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink_fails_second)
    with pytest.raises(PermissionError):
        vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff)
    assert _versions(root)[-1] == latest + 2
    start, end = _only_commit_info(root, latest + 1), _only_commit_info(root, latest + 2)
    assert start["operation"] == "VACUUM START" and int(start["operationMetrics"]["numFilesToDelete"]) > 2
    assert end["operation"] == "VACUUM END"
    assert _typed(end["operationParameters"]) == _typed({"status": "FAILED"})
    assert end["operationMetrics"] == {}
    assert not (root / "_delta_log" / "_last_vacuum_info").exists()
    monkeypatch.undo()
    # the table is intact; a new VACUUM finishes the job
    dvengine_rows = DeltaTable.forPath(None, str(root)).toArrow()
    done = vacuum(str(root), retention_hours=0, enforce_retention=False)
    assert done["numFilesDeleted"] >= 1 and _versions(root)[-1] == latest + 4
    assert DeltaTable.forPath(None, str(root)).toArrow().sort_by("id").equals(dvengine_rows.sort_by("id"))


def test_a_dml_commits_across_the_vacuum_commits_without_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DELETE planned on version n while VACUUM commits START (n+1) and END (n+2) lands at n+3,
    retried past them (an empty commit removes nothing, adds nothing, changes no metadata)."""
    monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")  # plan on a listed snapshot, not a cached one
    root = tmp_path / "t"
    rows, _ = _build(root)
    latest = _versions(root)[-1]
    real_commit = Transaction.commit
    reports: list[dict[str, Any]] = []

    def vacuum_first(self: Transaction, *args: Any, **kwargs: Any) -> int:
        if self.operation == "DELETE" and not reports:
            reports.append(vacuum(str(root), retention_hours=24, enforce_retention=False))
            assert _versions(root)[-1] == latest + 2
        return real_commit(self, *args, **kwargs)

    monkeypatch.setattr(Transaction, "commit", vacuum_first)
    metrics = DeltaTable.forPath(None, str(root)).deleteMetrics("id = 7", mode="dv")
    assert reports and metrics["version"] == latest + 3
    info = next(a["commitInfo"] for a in _lines(root, latest + 3) if "commitInfo" in a)
    assert (info["operation"], info["readVersion"]) == ("DELETE", latest)  # planned before VACUUM, not re-planned
    assert [_only_commit_info(root, v)["operation"] for v in (latest + 1, latest + 2)] == ["VACUUM START", "VACUUM END"]
    want = [r for r in rows[latest] if r[0] != 7]
    assert_versions_read(str(root), {latest + 3: want}, [latest + 3], COLUMNS)


def test_a_vacuum_commit_that_lost_its_version_retries_past_a_dml_but_not_a_metadata_change(tmp_path: Path) -> None:
    """The other order: VACUUM START's transaction read version n, a DELETE took n+1; the empty commit
    lands at n+2. A concurrent metadata change fails it, as in Delta (checkNoMetadataUpdates applies
    to every transaction), before anything is deleted."""
    root = tmp_path / "t"
    _build(root)
    latest = _versions(root)[-1]
    stale = load_snapshot(str(root))
    DeltaTable.forPath(None, str(root)).deleteMetrics("id = 8", mode="dv")
    params = start_parameters(True, None, WEEK_MS)
    version = commit_vacuum_event(stale, "VACUUM START", params, {"numFilesToDelete": 0, "sizeOfDataToDelete": 0},
                                  lambda key: None)
    assert version == latest + 2 and _only_commit_info(root, version)["readVersion"] == latest
    stale = load_snapshot(str(root))
    set_table_properties(str(root), {"delta.logRetentionDuration": "interval 60 days"})
    with pytest.raises(MetadataChangedError):
        commit_vacuum_event(stale, "VACUUM END", {"status": "COMPLETED"}, {}, lambda key: None)
    assert _versions(root)[-1] == latest + 3


def test_lite_logs_one_folder_and_reads_past_earlier_vacuum_commits(tmp_path: Path) -> None:
    """LITE lists no folder (getFilesFromDeltaLog's statuses have isDir = false): dirCounts is 1. A
    second LITE run reads the earlier VACUUM commits among its eligible commits: they name no file."""
    root = tmp_path / "t"
    rows, cutoff = _build(root)
    latest = _versions(root)[-1]
    log = LogModel.read(lambda v: (root / "_delta_log" / f"{v:020d}.json").read_bytes(), _versions(root))
    on_disk = set(_visible_files(root, ["p"]))
    expected = log.lite_deletes(0, latest, cutoff, on_disk)
    first = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff, vacuum_type="LITE")
    assert set(first["files"]) == expected and first["eligibleEndCommitVersion"] == latest
    end = _only_commit_info(root, latest + 2)
    assert _typed(end["operationMetrics"]) == _typed(
        {"numDeletedFiles": str(len(expected)), "numVacuumedDirectories": "1"}
    )
    time.sleep(0.05)
    second = vacuum(str(root), retention_hours=0, enforce_retention=False, vacuum_type="LITE")
    assert (second["eligibleStartCommitVersion"], second["eligibleEndCommitVersion"]) == (latest + 1, latest + 2)
    assert second["files"] == [] and _versions(root)[-1] == latest + 4
    rows[latest + 4] = rows[latest]
    assert_versions_read(str(root), rows, [latest + 4], COLUMNS)


def test_a_vacuum_commit_at_a_checkpoint_version_gets_its_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = [(i, "a", i) for i in range(9)]
    dvengine.write(_arrow(rows[:1]), str(root))
    for r in rows[1:]:
        dvengine.write(_arrow([r]), str(root), mode="append")
    assert _versions(root)[-1] == 8
    vacuum(str(root), retention_hours=24, enforce_retention=False)  # START 9, END 10
    assert wait_for_checkpoints(timeout=60)
    assert (root / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((root / "_delta_log" / "_last_checkpoint").read_text())["version"] == 10
    assert_versions_read(str(root), {10: rows, 9: rows}, [9, 10], COLUMNS)
