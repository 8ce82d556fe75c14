"""VACUUM FULL deletes and counts folders as Delta's ``gc``: the folders of its diff (nothing older
than the cutoff under them, no valid file) are in ``numFilesToDelete`` and a dry run's listing, and
are deleted when empty (``numDeletedFiles``); a partition folder this run empties goes on the
next run. LITE deletes no folder.

Expected values come from ``vacuum_model.delta_gc_diff`` (Delta's row counting written out over
``os.walk`` and the raw JSON log), not from dvengine's planner."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from vacuum_model import LogModel, after_delta_deletes, assert_versions_read, delta_gc_diff

import dvengine
from dvengine import DeltaTable
from dvengine.maintenance.vacuum import vacuum
from dvengine.maintenance.vacuum_dirs import delete_local_folders

LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"
DAY_MS = 86_400_000
COLUMNS = ["id", "p"]


def _typed(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _versions(root: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in (root / "_delta_log").glob("*.json"))


def _metrics(root: Path, version: int) -> tuple[str, dict[str, Any]]:
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    info = json.loads(lines[0])["commitInfo"]
    return info["operation"], info["operationMetrics"]


def _set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def _data(paths: set[str]) -> set[str]:
    return {p for p in paths if p != "_delta_log" and not p.startswith("_delta_log/")}


def _data_tree(root: Path) -> set[str]:
    """Every file and folder under the table root (hidden ones too), the log left out."""
    return _data({p.relative_to(root).as_posix() for p in root.rglob("*")})


def _build(root: Path, now: int) -> dict[int, list[tuple[Any, ...]]]:
    """Partitions a, b, c; partition b dropped, a DV delete in a; then folders Delta's diff treats
    differently: empty ones (nested too), an empty partition folder, one holding only a young
    orphan, one holding only a hidden file, a hidden one. Everything a month old but the orphan,
    which is dated after the cutoff the tests use (now + 1 day)."""
    rows: dict[int, list[tuple[Any, ...]]] = {}
    data = [(i, "abc"[i % 3]) for i in range(12)]
    table = pa.table({"id": pa.array([r[0] for r in data], pa.int64()), "p": [r[1] for r in data]})
    rows[dvengine.write(table, str(root), partitionBy=["p"],
                        configuration={"delta.enableDeletionVectors": "true"})] = sorted(data)
    t = DeltaTable.forPath(None, str(root))
    data = [r for r in data if r[1] != "b"]
    rows[t.deleteMetrics("p = 'b'")["version"]] = sorted(data)
    data = [r for r in data if r[0] != 0]
    rows[t.deleteMetrics("id = 0", mode="dv")["version"]] = sorted(data)
    for folder in ("empty", "deep/er/est", "p=d", "young", "hidden_only", "_hidden"):
        (root / folder).mkdir(parents=True)
    (root / "young" / "part-in-flight.parquet").write_bytes(b"a write not committed yet")
    (root / "hidden_only" / ".part-0.parquet.crc").write_bytes(b"a checksum sidecar")
    for path in root.rglob("*"):
        _set_mtime(path, now - 30 * DAY_MS)
    _set_mtime(root / "young" / "part-in-flight.parquet", now + 2 * DAY_MS)
    return rows


def _expected(root: Path, cutoff: int) -> tuple[set[str], set[str]]:
    log = LogModel.read(lambda v: (root / "_delta_log" / f"{v:020d}.json").read_bytes(), _versions(root))
    return delta_gc_diff(root, ["p"], cutoff, log.delta_valid_files(cutoff))


@pytest.fixture(autouse=True)
def dv_files_on_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    monkeypatch.delenv(LOGGING_ENV, raising=False)


def test_full_counts_lists_and_deletes_folders_as_delta(tmp_path: Path) -> None:
    root = tmp_path / "t"
    now = int(time.time() * 1000)
    rows = _build(root, now)
    later, cutoff = now + 2 * DAY_MS, now + DAY_MS  # every commit and tombstone is before the cutoff
    files, folders = _expected(root, cutoff)
    # the model's own reading of the scenario: which folders Delta's diff holds on the first run
    assert folders == {"empty", "deep", "deep/er", "deep/er/est", "p=d", "young", "hidden_only"}
    assert any(f.startswith("p=b/") for f in files) and "p=b" not in folders  # its old files lift its count

    dry = vacuum(str(root), retention_hours=24, enforce_retention=False, now_ms=later, dry_run=True)
    assert set(dry["files"]) == files | folders and len(dry["files"]) == len(files | folders)
    assert dry["numFilesToDelete"] == len(files) + len(folders)

    expected_left = after_delta_deletes(root, files, folders)
    latest = _versions(root)[-1]
    report = vacuum(str(root), retention_hours=24, enforce_retention=False, now_ms=later)
    assert _data_tree(root) == _data(expected_left)
    deleted_folders = folders - expected_left
    assert deleted_folders == {"empty", "deep", "deep/er", "deep/er/est", "p=d"}  # young, hidden_only: not empty
    assert (root / "p=b").is_dir() and not any((root / "p=b").iterdir())  # emptied: left for the next run
    assert report["numFilesDeleted"] == len(files) + len(deleted_folders)
    assert report["numDirectoriesDeleted"] == len(deleted_folders)
    start, end = _metrics(root, latest + 1), _metrics(root, latest + 2)
    assert start[0] == "VACUUM START" and end[0] == "VACUUM END"
    assert _typed(start[1]["numFilesToDelete"]) == _typed(str(len(files) + len(folders)))
    assert _typed(end[1]["numDeletedFiles"]) == _typed(str(len(files) + len(deleted_folders)))

    # Second run: the emptied partition folder is in the diff now, and goes.
    files, folders = _expected(root, cutoff)
    assert files == set() and folders == {"p=b", "young", "hidden_only"}
    latest = _versions(root)[-1]
    expected_left = after_delta_deletes(root, files, folders)
    report = vacuum(str(root), retention_hours=24, enforce_retention=False, now_ms=later)
    assert not (root / "p=b").exists() and (root / "young").is_dir() and (root / "hidden_only").is_dir()
    assert _data_tree(root) == _data(expected_left)
    assert sorted(report["files"]) == ["p=b"] and report["numFilesDeleted"] == 1
    assert _typed(_metrics(root, latest + 1)[1]["numFilesToDelete"]) == _typed("3")
    assert _typed(_metrics(root, latest + 2)[1]["numDeletedFiles"]) == _typed("1")

    # Readers: the latest data version and both pairs of VACUUM commits read the same rows.
    data_version = max(rows)
    for v in range(data_version + 1, _versions(root)[-1] + 1):
        rows[v] = rows[data_version]
    assert_versions_read(str(root), rows, range(data_version, _versions(root)[-1] + 1), COLUMNS)


def test_lite_deletes_no_folder(tmp_path: Path) -> None:
    """Delta's LITE reads relative paths from the log, from which it derives no folder rows: nothing
    but files is counted or deleted, and emptied or empty folders stay."""
    root = tmp_path / "t"
    now = int(time.time() * 1000)
    _build(root, now)
    report = vacuum(str(root), retention_hours=24, enforce_retention=False, now_ms=now + 2 * DAY_MS,
                    vacuum_type="LITE")
    assert report["numDirectoriesDeleted"] == 0 and report["files"]
    assert all((root / f).is_file() is False for f in report["files"])
    assert (root / "p=b").is_dir() and (root / "empty").is_dir() and (root / "deep/er/est").is_dir()
    latest = _versions(root)[-1]
    start, end = _metrics(root, latest - 1), _metrics(root, latest)
    assert _typed(start[1]["numFilesToDelete"]) == _typed(str(len(report["files"])))
    assert _typed(end[1]["numDeletedFiles"]) == _typed(str(len(report["files"])))


def test_folder_deletion_follows_hadoops_non_recursive_delete(tmp_path: Path) -> None:
    """Delta's tryDeleteNonRecursive: an empty folder is deleted (true), a folder already gone counts
    as deleted (FileNotFoundException -> true), a non-empty one stays (IOException -> false)."""
    empty, gone, full = tmp_path / "empty", tmp_path / "gone", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / ".hidden").write_bytes(b"x")
    assert delete_local_folders([str(full), str(gone), str(empty)]) == [str(gone), str(empty)]
    assert not empty.exists() and (full / ".hidden").exists()
