"""VACUUM: what is reclaimed, when, and what is never touched.

Time is simulated with ``now_ms`` and file ages with ``os.utime``, so retention windows of days
are exercised without waiting. Truth: the set of files each version references, the model of
rows per version, and the four readers after every vacuum.
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
from interop import assert_all_readers
from test_concurrency_support import core_delete, create_table, rows_of

from dvengine.cli.maintenance import register
from dvengine.dv import absolute_dv_path
from dvengine.errors import InvalidArgumentError, TableNotFoundError
from dvengine.log import load_snapshot
from dvengine.maintenance import vacuum

DAY_MS = 86_400_000


def _age_everything(root: Path, days: float) -> None:
    """Make every file under the table look ``days`` old (log included: its age does not matter)."""
    old = time.time() - days * 86_400
    for dirpath, _, names in os.walk(root, followlinks=False):
        for name in names:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.utime(path, (old, old))


def _tree(root: Path) -> set[str]:
    out = set()
    for dirpath, _, names in os.walk(root, followlinks=False):
        out.update(os.path.relpath(os.path.join(dirpath, n), root) for n in names)
    return out


def _vacuum_commits(root: Path, versions: range) -> set[str]:
    """The commit files of ``versions``, each checked to be a VACUUM START / END pair: VACUUM logs
    them on local folders, as Delta does (their content: tests/test_vacuum_logging.py)."""
    names = [os.path.join("_delta_log", f"{v:020d}.json") for v in versions]
    operations = [json.loads((root / n).read_text().splitlines()[0])["commitInfo"]["operation"] for n in names]
    assert operations == ["VACUUM START", "VACUUM END"] * (len(names) // 2)
    return set(names)


def _dv_files(root: Path, version: int) -> set[str]:
    snap = load_snapshot(str(root), version=version)
    return {
        os.path.relpath(absolute_dv_path(str(root), a.deletion_vector), root)
        for a in snap.files
        if a.deletion_vector is not None and not a.deletion_vector.is_inline
    }


def _build(root: Path) -> dict[int, list[tuple[int, int]]]:
    create_table(root, [pa.table({"id": list(range(10)), "v": list(range(10))}),
                        pa.table({"id": list(range(10, 20)), "v": list(range(10, 20))})])
    model = {i: i for i in range(20)}
    states = {0: sorted(model.items())}
    for version, (cond, doomed) in enumerate(
        [("id < 2", range(2)), ("id < 4", range(2, 4)), ("id >= 10", range(10, 20))], start=1
    ):
        assert core_delete(root, cond)[0] == version
        for i in doomed:
            del model[i]
        states[version] = sorted(model.items())
    return states


def test_vacuum_reclaims_only_outside_retention_and_never_touches_foreign_files(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    states = _build(root)
    snap1, snap3 = load_snapshot(str(root), version=1), load_snapshot(str(root))
    file_a = next(a.path for a in snap1.files if a.deletion_vector is not None)  # ids 0..9
    file_b = next(a.path for a in snap1.files if a.deletion_vector is None)  # ids 10..19
    (dv1,), (dv2,) = _dv_files(root, 1), _dv_files(root, 2)
    assert _dv_files(root, 3) == {dv2} and [a.path for a in snap3.files] == [file_a]

    # Things VACUUM must leave alone, plus one real orphan (a crashed writer's data file).
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.parquet").write_bytes(b"x")
    (root / "orphan.parquet").write_bytes(b"orphan")
    (root / ".hidden.parquet").write_bytes(b"h")
    (root / "_dvengine_staging_abc").mkdir()
    (root / "_dvengine_staging_abc" / "part-0.parquet").write_bytes(b"s")
    (root / "nested" / "_delta_log").mkdir(parents=True)
    (root / "nested" / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (root / "nested" / "part-n.parquet").write_bytes(b"n")
    os.symlink(outside / "precious.parquet", root / "link.parquet")
    os.symlink(outside, root / "linkdir")
    _age_everything(root, days=30)
    before = _tree(root)

    # Refused: retention below delta.deletedFileRetentionDuration (1 week); table untouched.
    with pytest.raises(InvalidArgumentError, match="deletedFileRetentionDuration"):
        vacuum(str(root), retention_hours=1)
    for bad in (-1.0, float("inf")):  # NaN is 0 hours, as Delta's Math.round: test_vacuum_retention_rounding.py
        with pytest.raises(InvalidArgumentError):
            vacuum(str(root), retention_hours=bad, enforce_retention=False)
    assert _tree(root) == before

    # Now: every commit is inside the 7-day window, so only the never-committed orphan goes.
    dry = vacuum(str(root), dry_run=True)
    assert dry["files"] == ["orphan.parquet"] and dry["numFilesDeleted"] == 0 and dry["sizeOfDeletedBytes"] == 6
    assert _tree(root) == before
    done = vacuum(str(root))
    assert done["files"] == ["orphan.parquet"] and done["numFilesDeleted"] == 1
    # the staging folder itself was written just now (only its file is aged): it may be a running
    # Spark write, so it stays until everything in it is older than the retention
    assert done["numAbandonedTempFiles"] == 0
    staging = "_dvengine_staging_abc/part-0.parquet"
    # and the record of where it stopped (Delta's _delta_log/_last_vacuum_info; {} after a FULL run)
    info = os.path.join("_delta_log", "_last_vacuum_info")
    assert _tree(root) == (before - {"orphan.parquet"}) | {info} | _vacuum_commits(root, range(4, 6))
    assert (root / info).read_bytes() == b"{}\n"
    for version, expected in states.items():  # time travel inside retention still works
        assert rows_of(root, version=version) == expected

    # Eight days later every commit is outside the window: superseded DV and removed file go.
    later = int(time.time() * 1000) + 8 * DAY_MS
    dry = vacuum(str(root), dry_run=True, now_ms=later)
    assert sorted(dry["files"]) == sorted([dv1, file_b]) and dry["numDeletionVectorFiles"] == 1
    done = vacuum(str(root), now_ms=later)
    assert done["numFilesDeleted"] == 2 and done["numAbandonedTempFiles"] == 1  # the abandoned staging folder
    assert _tree(root) == (before - {"orphan.parquet", staging, dv1, file_b}) | {info} | _vacuum_commits(root, range(4, 8))
    assert (outside / "precious.parquet").exists()
    assert_all_readers(spark, root, ["id", "v"], states[3])
    assert vacuum(str(root), now_ms=later)["numFilesDeleted"] == 0  # idempotent


def test_recent_unreferenced_files_are_protected_by_age(tmp_path: Path) -> None:
    """A file a concurrent writer has written but not yet committed is young: never deleted."""
    root = tmp_path / "t"
    _build(root)
    (root / "old-orphan.parquet").write_bytes(b"old")
    _age_everything(root, days=30)
    (root / "in-flight.parquet").write_bytes(b"new")
    report = vacuum(str(root), dry_run=True)
    assert report["files"] == ["old-orphan.parquet"] and report["numProtectedRecentFiles"] == 1
    # with retention 0 (forced) the same file is fair game once its mtime is in the past
    time.sleep(0.01)
    assert "in-flight.parquet" in vacuum(str(root), retention_hours=0, enforce_retention=False)["files"]


def test_tombstone_retention_property_and_emptied_partition_folders_go_on_the_next_run(tmp_path: Path) -> None:
    root = tmp_path / "t"
    create_table(root, [pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"]})], partition_by="p",
                 configuration={"delta.deletedFileRetentionDuration": "interval 2 hours"})
    assert core_delete(root, "p = 'a'")[1] == 2
    _age_everything(root, days=1)
    with pytest.raises(InvalidArgumentError):
        vacuum(str(root), retention_hours=1)
    # 2 hours is allowed by the table property; the remove is 1 day old by its commit time only
    # after we pretend a day passed.
    report = vacuum(str(root), retention_hours=2, now_ms=int(time.time() * 1000) + DAY_MS)
    assert len(report["files"]) == 1 and report["files"][0].startswith("p=a/")
    # As Delta's gc: a folder whose old files this run deletes is not in its diff (it stays, empty)...
    assert report["numDirectoriesDeleted"] == 0 and (root / "p=a").is_dir() and not any((root / "p=a").iterdir())
    # ... and the next run finds it empty: counted with the files and deleted (DeltaVacuumSuite:
    # "we need two GCs to guarantee the deletion of the directories")
    report = vacuum(str(root), retention_hours=2, now_ms=int(time.time() * 1000) + DAY_MS)
    assert report["files"] == ["p=a"] and report["numDirectoriesDeleted"] == 1 and report["numFilesDeleted"] == 1
    assert not (root / "p=a").exists()
    assert rows_of(root) == [(3, "b"), (4, "b")]


def test_vacuum_errors_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TableNotFoundError):
        vacuum(str(tmp_path / "none"))
    root = tmp_path / "t"
    _build(root)
    (root / "orphan.parquet").write_bytes(b"o")
    time.sleep(0.01)
    parser = argparse.ArgumentParser(prog="dvengine")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0", "--dry-run", "--force"])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dryRun"] is True and "orphan.parquet" in out["files"] and (root / "orphan.parquet").exists()
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0"])
    with pytest.raises(InvalidArgumentError):
        args.handler(args)
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0", "--force"])
    assert args.handler(args) == 0
    assert not (root / "orphan.parquet").exists()


def test_vacuum_removes_abandoned_log_temp_files_past_retention(tmp_path: Path) -> None:
    """A writer killed between writing its temp commit and linking it leaves a hidden temp file in
    _delta_log; VACUUM removes it once it is older than the retention window, and never a recent one."""
    import os as _os

    import pyarrow as _pa

    import dvengine
    from dvengine.maintenance.vacuum import vacuum as _vacuum

    root = tmp_path / "t"
    dvengine.write(_pa.table({"id": [1, 2, 3]}), str(root))
    old = root / "_delta_log" / ".00000000000000000001.json.abc.tmp"
    recent = root / "_delta_log" / "._last_checkpoint.def.tmp"
    old.write_text("{}")
    recent.write_text("{}")
    day_ago = old.stat().st_mtime - 86_400
    _os.utime(old, (day_ago, day_ago))
    staging = root / "_dvengine_staging_0123"  # a killed Spark writer's private folder
    staging.mkdir()
    (staging / "part-0.parquet").write_bytes(b"x")
    data_temp = root / ".part-00000-abc.c000.snappy.parquet.tmp"  # a killed local writer's temp
    data_temp.write_bytes(b"x")
    for stale in (staging / "part-0.parquet", staging, data_temp):
        _os.utime(stale, (day_ago, day_ago))
    report = _vacuum(str(root), retention_hours=1, enforce_retention=False)
    assert report["numAbandonedTempFiles"] == 3
    assert not old.exists() and recent.exists() and not staging.exists() and not data_temp.exists()
    assert dvengine.DeltaTable.forPath(None, root).toArrow().num_rows == 3
