"""VACUUM LITE on local folders: what it deletes, what it leaves for FULL, when it refuses.

Truth: the raw JSON log read as a model (``vacuum_model.LogModel``: which files the removes name,
which files every version inside the window references), the files on disk, three readers
(dvengine, delta-rs, DuckDB) at every version inside the retention, and Delta's own source for
where the last VACUUM stopped (``_delta_log/_last_vacuum_info``) and when LITE is refused
(``VacuumCommand.getFilesFromDeltaLog``; the Delta tests quoted below).

Time: each commit's instant is taken right after it, with a pause before the next, so a cutoff
just after commit k puts commits 0..k outside the window and k+1.. inside it (retention 0,
``now_ms`` = that instant); files written later are younger than the cutoff, as in real life.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import folder_state
from vacuum_model import LogModel, Row, assert_versions_read, delta_gc_diff, rows_delta_rs, rows_dvengine

import dvengine
from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.errors import CannotVacuumLiteError, InvalidArgumentError
from dvengine.log import load_snapshot
from dvengine.log.checkpoint_writer import write_checkpoint
from dvengine.log.cleanup import cleanup_expired_logs
from dvengine.maintenance import vacuum

COLUMNS = ["id", "p", "v"]
INFO = "_delta_log/_last_vacuum_info"
DAY_MS = 86_400_000


@pytest.fixture(autouse=True)
def dv_files_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every deletion vector in a file (none inline), so removes name DV files LITE must handle.

    VACUUM START / END commits are off here: these tests number the table's versions and compare
    the folder file by file around a VACUUM; the commits LITE logs (on by default on local folders,
    as in Delta) are tested in test_vacuum_logging.py."""
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED", "false")


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "p": pa.array([r[1] for r in rows], pa.string()),
        "v": pa.array([r[2] for r in rows], pa.int64()),
    })


@dataclass
class Built:
    """A table built step by step, with the model's rows and the instant after each version."""

    root: Path
    model: dict[int, Row] = field(default_factory=dict)
    rows: dict[int, list[Row]] = field(default_factory=dict)
    after: dict[int, int] = field(default_factory=dict)

    def committed(self, version: int) -> None:
        assert version == len(self.rows), f"expected version {len(self.rows)}, got {version}"
        self.rows[version] = sorted(self.model.values())
        self.after[version] = int(time.time() * 1000)
        time.sleep(0.03)  # the next commit, and every file it writes, is strictly younger

    def log(self) -> LogModel:
        commits = sorted(int(f.name[:20]) for f in (self.root / "_delta_log").glob("*.json"))
        return LogModel.read(lambda v: (self.root / "_delta_log" / f"{v:020d}.json").read_bytes(), commits)


def _build(root: Path) -> Built:
    """v0 create (CDF, partitioned), v1 append, v2/v3 DV deletes on one file (v3 supersedes v2's DV
    file), v4 DV update (new file + change data), v5 compaction (removes with dataChange=false),
    v6 drop partition a, v7 a DV delete."""
    b = Built(root)
    first = [(i, "a" if i < 10 else "b", i * 10) for i in range(20)]
    b.model.update({r[0]: r for r in first})
    b.committed(dvengine.write(_arrow(first), str(root), partitionBy=["p"],
                               configuration={"delta.enableChangeDataFeed": "true"}))
    more = [(i, "b", i * 10) for i in range(20, 30)]
    b.model.update({r[0]: r for r in more})
    b.committed(dvengine.write(_arrow(more), str(root), mode="append"))
    t = DeltaTable.forPath(None, str(root))
    for cond, gone in (("id < 3", range(3)), ("id < 5", range(3, 5))):
        for i in gone:
            del b.model[i]
        b.committed(t.deleteMetrics(cond, mode="dv")["version"])
    for i in (20, 21):
        b.model[i] = (i, "b", i * 10 + 1)
    b.committed(t.updateMetrics("id in (20, 21)", {"v": "v + 1"}, mode="dv")["version"])
    metrics = t.optimize().executeCompaction()["metrics"]
    assert metrics["numFilesRemoved"] >= 2
    b.committed(load_snapshot(str(root)).version)
    for i in [k for k, r in b.model.items() if r[1] == "a"]:
        del b.model[i]
    b.committed(t.deleteMetrics("p = 'a'")["version"])
    del b.model[25]
    b.committed(t.deleteMetrics("id = 25", mode="dv")["version"])
    return b


def _plant_orphans(root: Path) -> set[str]:
    """Files no commit ever named (a crashed writer's), a month old: only FULL can find them."""
    orphans = {
        "orphan.parquet",
        "p=b/part-00000-orphan.c000.snappy.parquet",
        "_change_data/p=b/cdc-00000-orphan.c000.snappy.parquet",
        f"deletion_vector_{uuid.uuid4()}.bin",
    }
    month_ago = time.time() - 30 * 86_400
    for name in orphans:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"left behind")
        os.utime(root / name, (month_ago, month_ago))
    return orphans


def _lite(root: Path, now_ms: int, **kwargs: Any) -> dict[str, Any]:
    return vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=now_ms, vacuum_type="LITE", **kwargs)


def test_lite_deletes_exactly_the_removed_files_outside_the_window_and_leaves_orphans_to_full(tmp_path: Path) -> None:
    root = tmp_path / "t"
    b = _build(root)
    log = b.log()
    orphans = _plant_orphans(root)
    feed_before = DeltaTable.forPath(None, str(root)).changes(6, 7).to_pylist()

    # Cutoff just after v5: LITE reads commits 0..5 (no earlier vacuum, the log starts at 0).
    cutoff = b.after[5] + 1
    before = _tree(root)
    expected = log.lite_deletes(0, 5, cutoff, before)
    assert any(n.startswith("p=b/part-") for n in expected)  # files compaction and UPDATE replaced
    assert any(n.startswith("deletion_vector_") for n in expected)  # superseded DV files
    assert any(n.startswith("_change_data/") for n in expected)  # change data of old commits
    assert not expected & orphans

    _, folders = delta_gc_diff(root, ["p"], cutoff + 1, b.log().delta_valid_files(cutoff + 1))
    full = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff + 1, dry_run=True)
    # LITE = FULL minus what only a listing finds (orphans, and the folders of Delta's diff)
    assert set(full["files"]) == expected | orphans | folders

    dry = _lite(root, cutoff + 1, dry_run=True)
    assert set(dry["files"]) == expected and dry["numFilesDeleted"] == 0
    assert dry["numFilesToDelete"] == len(expected)
    assert dry["sizeOfDeletedBytes"] == sum((root / n).stat().st_size for n in expected)
    assert dry["numDeletionVectorFiles"] == sum(n.startswith("deletion_vector_") for n in expected)
    assert (dry["vacuumType"], dry["eligibleStartCommitVersion"], dry["eligibleEndCommitVersion"]) == ("LITE", 0, 5)
    assert _tree(root) == before  # a dry run deletes nothing and records nothing

    done = _lite(root, cutoff + 1)
    assert set(done["files"]) == expected and done["numFilesDeleted"] == len(expected)
    assert _tree(root) == (before - expected) | {INFO}
    assert (root / INFO).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":5}\n'
    assert_versions_read(str(root), b.rows, range(5, 8), COLUMNS)
    assert DeltaTable.forPath(None, str(root)).changes(6, 7).to_pylist() == feed_before

    # Later, cutoff just after v7: LITE starts after the recorded watermark and reads 6..7 only.
    cutoff = b.after[7] + 1
    before = _tree(root)
    expected = log.lite_deletes(6, 7, cutoff, before)
    assert any(n.startswith("p=a/") for n in expected)  # the dropped partition's file (and its DV)
    done = _lite(root, cutoff + 1)
    assert (done["eligibleStartCommitVersion"], done["eligibleEndCommitVersion"]) == (6, 7)
    assert set(done["files"]) == expected
    # Delta's LITE deletes no folder: the emptied partition folder stays, for FULL
    assert done["numDirectoriesDeleted"] == 0 and (root / "p=a").is_dir() and not any((root / "p=a").iterdir())
    assert _tree(root) == before - expected
    assert (root / INFO).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":7}\n'
    assert_versions_read(str(root), b.rows, [7], COLUMNS)

    # Only FULL, which lists the table, finds the orphans; Delta's FULL records no watermark.
    _, folders = delta_gc_diff(root, ["p"], cutoff + 1, b.log().delta_valid_files(cutoff + 1))
    assert "p=a" in folders
    full = vacuum(str(root), retention_hours=0, enforce_retention=False, now_ms=cutoff + 1)
    assert set(full["files"]) == orphans | folders and full["vacuumType"] == "FULL"
    assert not (root / "p=a").exists()
    assert full["eligibleStartCommitVersion"] is None
    assert (root / INFO).read_bytes() == b"{}\n"
    # With no watermark and commit 0 still in the log, LITE rereads everything: all gone already.
    again = _lite(root, cutoff + 1)
    assert (again["eligibleStartCommitVersion"], again["files"]) == (0, [])
    assert_versions_read(str(root), b.rows, [7], COLUMNS)


def test_lite_keeps_recent_and_symlinked_candidates(tmp_path: Path) -> None:
    """A candidate the log names is still left alone when FULL would leave it: modified after the
    cutoff, or a symlink (never followed nor deleted)."""
    root = tmp_path / "t"
    b = _build(root)
    cutoff = b.after[5] + 1
    expected = b.log().lite_deletes(0, 5, cutoff, _tree(root))
    young, linked = sorted(n for n in expected if not n.startswith("deletion_vector_"))[:2]
    os.utime(root / young, None)  # touched now: younger than the cutoff
    outside = tmp_path / "outside.parquet"
    outside.write_bytes((root / linked).read_bytes())
    (root / linked).unlink()
    os.symlink(outside, root / linked)
    report = _lite(root, cutoff + 1, dry_run=True)
    assert set(report["files"]) == expected - {young, linked}
    assert report["numProtectedRecentFiles"] == 1
    _lite(root, cutoff + 1)
    assert (root / young).exists() and (root / linked).is_symlink() and outside.exists()


def _small_table(root: Path) -> Built:
    """Delta's DeltaLiteVacuumSuite shape: v0 write, v1 delete (the file is rewritten: v1's remove
    names v0's file)."""
    b = Built(root)
    rows = [(i, "a", i) for i in range(10)]
    b.model.update({r[0]: r for r in rows})
    b.committed(dvengine.write(_arrow(rows), str(root)))
    b.model.pop(0)
    b.committed(DeltaTable.forPath(None, str(root)).deleteMetrics("id = 0", mode="rewrite")["version"])
    return b


def _grow(b: Built) -> None:
    """v2 append, v3 delete (rewrite: its remove names v2's file)."""
    rows = [(i, "a", i) for i in range(10, 20)]
    b.model.update({r[0]: r for r in rows})
    b.committed(dvengine.write(_arrow(rows), str(b.root), mode="append"))
    b.model.pop(10)
    b.committed(DeltaTable.forPath(None, str(b.root)).deleteMetrics("id = 10", mode="rewrite")["version"])


def test_lite_refuses_when_commit_zero_is_gone_and_no_vacuum_recorded_where_it_stopped(tmp_path: Path) -> None:
    """Delta's "lite vacuum not possible - commit 0 is missing": its log cleaned up (here by
    dvengine's own expired-log cleanup after a checkpoint), LITE cannot see the old removes."""
    root = tmp_path / "t"
    b = _small_table(root)
    _grow(b)
    write_checkpoint(load_snapshot(str(root)))
    assert cleanup_expired_logs(str(root), now_ms=int(time.time() * 1000) + 31 * DAY_MS)
    assert not (root / "_delta_log" / f"{0:020d}.json").exists()
    state = folder_state(root)
    for dry_run in (True, False):
        with pytest.raises(CannotVacuumLiteError, match="VACUUM FULL") as caught:
            _lite(root, int(time.time() * 1000), dry_run=dry_run)
        assert caught.value.delta_error_class == "DELTA_CANNOT_VACUUM_LITE"
        assert str(root) in str(caught.value) and "oldest commit file is version 3" in str(caught.value)
    assert folder_state(root) == state  # nothing deleted, nothing recorded
    # FULL still works (and, as Delta's, records no watermark: LITE stays refused here).
    assert vacuum(str(root), retention_hours=0, enforce_retention=False)["numFilesDeleted"] == 2
    with pytest.raises(CannotVacuumLiteError):
        _lite(root, int(time.time() * 1000))
    assert_versions_read(str(root), b.rows, [3], COLUMNS)


def test_lite_refuses_when_commits_since_the_last_vacuum_are_gone(tmp_path: Path) -> None:
    """Delta's "lite vacuum not possible - commits since last vacuum is missing", step by step:
    a LITE run records watermark 1; removing commit 0 is harmless then; removing 1 and 2 is not."""
    root = tmp_path / "t"
    b = _small_table(root)
    first = _lite(root, int(time.time() * 1000))
    assert first["eligibleEndCommitVersion"] == 1 and len(first["files"]) == 1  # v0's file, rewritten by v1
    assert (root / INFO).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":1}\n'
    _grow(b)
    write_checkpoint(load_snapshot(str(root)))
    (root / "_delta_log" / f"{0:020d}.json").unlink()
    report = _lite(root, int(time.time() * 1000), dry_run=True)
    assert (report["eligibleStartCommitVersion"], report["eligibleEndCommitVersion"]) == (2, 3)
    for v in (1, 2):
        (root / "_delta_log" / f"{v:020d}.json").unlink()
    state = folder_state(root)
    with pytest.raises(CannotVacuumLiteError, match="last VACUUM stopped at version 1"):
        _lite(root, int(time.time() * 1000))
    assert folder_state(root) == state
    assert_versions_read(str(root), b.rows, [3], COLUMNS)


def test_watermark_written_by_delta_is_continued_and_a_bad_one_is_ignored(tmp_path: Path) -> None:
    """The bytes Delta's LastVacuumInfo.persistLastVacuumInfo writes are read back (LITE starts after
    them); an unreadable file reads as no watermark, as Delta's getLastVacuumInfo does."""
    root = tmp_path / "t"
    b = _small_table(root)
    _grow(b)
    now = int(time.time() * 1000)
    (root / INFO).write_bytes(b'{"latestCommitVersionOutsideOfRetentionWindow":2}\n')
    assert _lite(root, now, dry_run=True)["eligibleStartCommitVersion"] == 3
    for bad in (b"not json", b'{"latestCommitVersionOutsideOfRetentionWindow":"x"}\n', b"[]", b""):
        (root / INFO).write_bytes(bad)
        assert _lite(root, now, dry_run=True)["eligibleStartCommitVersion"] == 0
    # A run whose cutoff is older than every commit has nothing to read, and records so ({}), as Delta.
    (root / INFO).write_bytes(b'{"latestCommitVersionOutsideOfRetentionWindow":2}\n')
    nothing = _lite(root, b.after[0] - 60_000)
    assert nothing["files"] == [] and nothing["eligibleEndCommitVersion"] is None
    assert (root / INFO).read_bytes() == b"{}\n"


def test_lite_through_the_api_the_conf_and_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    b = _small_table(root)
    time.sleep(0.01)
    table = DeltaTable.forPath(None, str(root))
    report = table.vacuum(0, dryRun=True, enforceRetention=False, vacuumType="lite")
    assert isinstance(report, dict) and report["vacuumType"] == "LITE" and len(report["files"]) == 1
    assert table.vacuumReport(0, dryRun=True, enforceRetention=False)["vacuumType"] == "FULL"  # Delta's default
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_VACUUM_LITE_ENABLED", "true")  # Delta's conf, no session
    assert table.vacuumReport(0, dryRun=True, enforceRetention=False)["vacuumType"] == "LITE"
    assert table.vacuumReport(0, dryRun=True, enforceRetention=False, vacuumType="FULL")["vacuumType"] == "FULL"
    state = folder_state(root)
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_VACUUM_LITE_ENABLED", "sometimes")
    with pytest.raises(InvalidArgumentError, match="spark.databricks.delta.vacuum.lite.enabled"):
        table.vacuumReport(0, enforceRetention=False)
    monkeypatch.delenv("SPARK_DATABRICKS_DELTA_VACUUM_LITE_ENABLED")
    for bad in ("fast", "", 1):
        with pytest.raises(InvalidArgumentError, match="vacuum type"):
            table.vacuumReport(0, enforceRetention=False, vacuumType=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="deletedFileRetentionDuration"):  # same retention check
        table.vacuumReport(0, vacuumType="LITE")
    assert folder_state(root) == state

    parser = argparse.ArgumentParser(prog="dvengine")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0", "--force", "--lite"])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["vacuumType"] == "LITE" and out["numFilesDeleted"] == 1
    assert (root / INFO).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":1}\n'
    assert_versions_read(str(root), b.rows, [1], COLUMNS)


def test_lite_on_a_shallow_clone_never_touches_the_source(tmp_path: Path) -> None:
    """A shallow clone's removes name its source's files by absolute path (and 'p' DVs): outside
    the clone, so LITE, like FULL, leaves them (DuckDB cannot read shallow clones: duckdb-delta#74)."""
    src, clone = tmp_path / "src", tmp_path / "clone"
    rows = [(i, "a" if i % 2 else "b", i) for i in range(40)]
    dvengine.write(_arrow(rows), str(src), partitionBy=["p"])
    DeltaTable.forPath(None, str(src)).deleteMetrics("id < 4", mode="dv")
    source_state = folder_state(src)
    c = DeltaTable.forPath(None, str(src)).clone(str(clone), isShallow=True)
    c.deleteMetrics("id < 10", mode="dv")
    c.updateMetrics("id = 21", {"v": "0"}, mode="rewrite")
    time.sleep(0.01)
    named_outside = [
        a for v in range(1, 3) for a in _actions(clone, v) if "remove" in a and a["remove"]["path"].startswith("file:")
    ]
    assert named_outside  # the clone's removes do name the source's files
    report = vacuum(str(clone), retention_hours=0, enforce_retention=False, vacuum_type="LITE")
    assert all(not f.startswith("..") for f in report["files"])
    assert folder_state(src) == source_state
    want = sorted((i, p, 0 if i == 21 else v) for i, p, v in rows if i >= 10)
    version = load_snapshot(str(clone)).version
    assert rows_dvengine(str(clone), version, COLUMNS) == rows_delta_rs(str(clone), version, COLUMNS) == want


def _actions(root: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def test_a_failed_watermark_write_keeps_the_deletions_and_the_old_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Delta's persistLastVacuumInfo swallows a failed write (NonFatal, recorded as an event): the
    files are gone by then and the older watermark only makes the next LITE read more commits."""
    from dvengine.storage.local import LocalStorage

    root = tmp_path / "t"
    b = _small_table(root)
    (root / INFO).write_bytes(b'{"latestCommitVersionOutsideOfRetentionWindow":0}\n')
    real_write = LocalStorage.write

    def failing_write(self: LocalStorage, path: str, data: bytes) -> None:
        if path.endswith("_last_vacuum_info"):
            raise OSError(28, "No space left on device")
        real_write(self, path, data)

    monkeypatch.setattr(LocalStorage, "write", failing_write)
    time.sleep(0.01)
    with caplog.at_level("WARNING", logger="dvengine.maintenance.last_vacuum_info"):
        report = _lite(root, int(time.time() * 1000))
    assert report["numFilesDeleted"] == 1 and report["eligibleStartCommitVersion"] == 1
    assert "_last_vacuum_info" in caplog.text and "No space left" in caplog.text
    assert (root / INFO).read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":0}\n'
    assert _lite(root, int(time.time() * 1000), dry_run=True)["eligibleStartCommitVersion"] == 1
    assert_versions_read(str(root), b.rows, [1], COLUMNS)
