"""A failed fsync (or the write / rename around it) of a file a commit would name is a typed
``StorageWriteError`` naming the file, and the command leaves the table folder as it found it.

spec_notes/crash-safety.md ("A failed fsync"): the failure is injected by wrapping ``os.fsync``
(or ``os.rename``) to raise ``OSError(EIO)`` for the paths a predicate picks (the fsynced path is
read back from ``/proc/self/fd``). The truth each test checks is independent of dvengine's own
reader: the folder's bytes (``folder_state``: same ``_delta_log`` and data files, byte for byte),
and, for the checkpoint that fails after its commit, the ``deltalake`` package reading the table.
A checkpoint failure after a successful commit only warns, as Delta's
``Checkpoints.withCheckpointExceptionHandling`` (logWarning "Error when writing checkpoint-related
files", rethrown only in Delta's own tests) does.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import folder_state

import dvengine
from dvengine import DeltaTable
from dvengine.errors import StorageError, StorageWriteError

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads fsynced paths from /proc/self/fd")


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64()), "p": pa.array([i % 3 for i in ids], pa.int64())})


def fail_fsync(monkeypatch: pytest.MonkeyPatch, picks: Callable[[str], bool]) -> list[str]:
    """Make ``os.fsync`` raise EIO for the files ``picks`` chooses; return the paths it failed."""
    real_fsync = os.fsync
    failed: list[str] = []

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if picks(path):
            failed.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return failed


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DVENGINE_CHECKPOINT_BACKGROUND", "false")
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")  # every DV in a file
    root = tmp_path / "t"
    dvengine.write(_rows(0, 30), str(root), partitionBy=["p"])
    return root


def _names(message: str, failed: str) -> bool:
    """Does ``message`` name the file whose fsync failed: that path, or the final name its hidden
    temp file (``.<name>.<uuid>.tmp`` / ``.<name>.tmp``) was written for?"""
    named = [word.rstrip(":") for word in message.split() if word.startswith("/")]
    base = os.path.basename(failed)
    return any(w == failed or base.startswith("." + os.path.basename(w) + ".") for w in named)


def _assert_refused(root: Path, operation: Callable[[], Any], monkeypatch: pytest.MonkeyPatch,
                    picks: Callable[[str], bool]) -> StorageWriteError:
    """Run ``operation`` with fsync failing for ``picks``: typed error naming the file, EIO as its
    cause, and the folder byte for byte as before (nothing committed, nothing left to VACUUM)."""
    before = folder_state(root)
    failed = fail_fsync(monkeypatch, picks)
    with pytest.raises(StorageWriteError) as info:
        operation()
    monkeypatch.undo()
    assert failed, "the injected failure never fired"
    error = info.value
    assert isinstance(error, StorageError)
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == errno.EIO
    assert any(_names(str(error), path) for path in failed), (str(error), failed)
    assert folder_state(root) == before
    return error


def _is_data_temp(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith(".part-") and name.endswith(".tmp")


UPDATES: dict[str, Callable[[Path], Any]] = {
    "update rewrite": lambda root: DeltaTable.forPath(None, root).update("id < 10", {"v": "-1"}, mode="rewrite", engine="local"),
    "update dv": lambda root: DeltaTable.forPath(None, root).update("id < 10", {"v": "-1"}, mode="dv", engine="local"),
}


@pytest.mark.parametrize("name", list(UPDATES))
def test_update_with_a_failed_data_file_fsync_is_typed_and_leaves_the_table(
    table: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    _assert_refused(table, lambda: UPDATES[name](table), monkeypatch, _is_data_temp)
    assert DeltaTable.forPath(None, table).toArrow().sort_by("id")["v"].to_pylist() == list(range(30))


def test_update_with_a_failed_dv_file_fsync_is_typed_and_leaves_the_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_refused(table, lambda: UPDATES["update dv"](table), monkeypatch, lambda p: "deletion_vector_" in p)


def test_update_with_a_failed_commit_fsync_is_typed_and_leaves_the_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The staged commit's own fsync: the data and DV files the command wrote are removed again."""
    def staged_commit(path: str) -> bool:
        return "/_delta_log/." in path and path.endswith(".tmp")

    _assert_refused(table, lambda: UPDATES["update dv"](table), monkeypatch, staged_commit)


def test_append_with_a_failed_fsync_is_typed_and_leaves_the_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _assert_refused(table, lambda: dvengine.write(_rows(100, 20), str(table), mode="append"), monkeypatch, _is_data_temp)


def test_overwrite_with_a_failed_fsync_is_typed_and_leaves_the_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partitioned overwrite writes one file per partition; one fsync fails, none of them stays."""
    _assert_refused(table, lambda: dvengine.write(_rows(100, 20), str(table), mode="overwrite"), monkeypatch, _is_data_temp)


def test_a_failed_rename_into_place_is_typed_and_leaves_the_table(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_rename = os.rename

    def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(str(src)).startswith(".part-"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_rename(src, dst, *args, **kwargs)

    before = folder_state(table)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(StorageWriteError, match="cannot rename .*part-.* to .*part-") as info:
        dvengine.write(_rows(100, 20), str(table), mode="append")
    monkeypatch.undo()
    assert isinstance(info.value.__cause__, OSError)
    assert folder_state(table) == before


def test_a_failed_checkpoint_fsync_after_its_commit_only_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The commit stands (deltalake reads it) and the failure is a warning carrying the typed
    error; no checkpoint file, temp file or ``_last_checkpoint`` is left (readers replay JSON)."""
    from deltalake import DeltaTable as RsTable
    from interop import rows_delta_rs

    monkeypatch.setenv("DVENGINE_CHECKPOINT_BACKGROUND", "false")
    root = tmp_path / "t"
    dvengine.write(_rows(0, 5), str(root), configuration={"delta.checkpointInterval": "2"})
    dvengine.write(_rows(5, 5), str(root), mode="append")
    failed = fail_fsync(monkeypatch, lambda p: ".checkpoint." in os.path.basename(p))
    with caplog.at_level(logging.WARNING):
        dvengine.write(_rows(10, 5), str(root), mode="append")  # version 2: a checkpoint is due
    monkeypatch.undo()
    assert failed
    warnings = [r for r in caplog.records if "writing its checkpoint failed" in r.getMessage()]
    assert len(warnings) == 1
    exc_info = warnings[0].exc_info
    assert exc_info is not None and isinstance(exc_info[1], StorageWriteError)
    assert "checkpoint" in str(exc_info[1])
    log_names = sorted(os.listdir(root / "_delta_log"))
    assert log_names == [f"{v:020d}.json" for v in range(3)]
    rs = RsTable(str(root))
    assert rs.version() == 2
    assert rows_delta_rs(root, ["id"]) == [(i,) for i in range(15)]
    dvengine.write(_rows(15, 5), str(root), mode="append")  # the next commit is unaffected
    assert RsTable(str(root)).version() == 3


def test_a_failed_log_folder_fsync_after_the_link_only_warns(
    table: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``_delta_log``'s fsync runs after the link: the commit is visible, so failing the command
    would have its cleanup delete files the table names. LocalStorage raises the typed error,
    the transaction logs it and the commit stands (deltalake reads it)."""
    from interop import rows_delta_rs

    failed = fail_fsync(monkeypatch, lambda p: p.endswith("/_delta_log"))
    with caplog.at_level(logging.WARNING):
        dvengine.write(_rows(100, 3), str(table), mode="append")
    monkeypatch.undo()
    assert failed
    warnings = [r for r in caplog.records if "is linked but fsync" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is not None
    assert isinstance(warnings[0].exc_info[1], StorageWriteError)
    assert rows_delta_rs(table, ["id"]) == [(i,) for i in [*range(30), 100, 101, 102]]


def test_fsync_files_tries_every_file_and_raises_the_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's fsync of the files Spark's writer staged (``fsync_files``, engine/spark/writer.py)
    is exercised here without Spark: every file is tried, the failure is the typed error naming it."""
    from dvengine.storage.durable import fsync_files

    paths = [str(tmp_path / f"part-{i}.parquet") for i in range(4)]
    for path in paths:
        Path(path).write_bytes(b"x")
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(path)
        if path.endswith("part-2.parquet"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(StorageWriteError, match=r"cannot fsync .*part-2\.parquet: Input/output error") as info:
        fsync_files(paths)
    assert isinstance(info.value.__cause__, OSError)
    assert sorted(synced) == sorted(paths)
