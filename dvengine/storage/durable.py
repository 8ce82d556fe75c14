"""fsync of new local files before a commit (or ``_last_checkpoint``) names them.

Why (spec_notes/crash-safety.md, "Power loss"): ext4 with delayed allocation, the default, can
commit the directory entry of a new file before its data blocks are allocated, so after a power
loss the name may exist with length 0. A commit that names such a data file, or a
``_last_checkpoint`` that names such a checkpoint, would survive the crash and point at nothing
readable. The writer of each such file therefore fsyncs it itself, before the rename that puts it
in place (as ``LocalStorage.put_new`` does for DV files), so the cost is paid once per file, by
the thread that wrote it, and never inside the host-local commit turn.

A failure to write, fsync or rename such a file is raised as
:class:`dvengine.errors.StorageWriteError` naming the file, chained to the ``OSError``: an fsync
that failed means the data may not be on disk (the kernel may even have dropped the dirty pages),
so the file must never be named; the command's cleanup (commands/written.py) removes what it
wrote and nothing is committed.

The directory entries need no folder fsync of their own: the mkdir and rename that place a file
are metadata operations made before the commit's ``link``, and ordered metadata journaling (ext4
``data=ordered``, XFS) never keeps a later operation without the earlier ones; the commit's
``_delta_log`` fsync makes them all durable. The note lists the file systems where that
argument does not hold.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from dvengine.errors import StorageWriteError

# Files synced at once by fsync_files: fsync releases the GIL and the disk folds concurrent
# flushes into one journal commit, so a job's files cost little more than its largest one.
SYNC_WORKERS = 8


def write_failed(action: str, path: str, exc: OSError) -> StorageWriteError:
    """The typed error for a local ``action`` ("write", "fsync", "rename ... to") on ``path`` that
    raised ``exc``; the caller raises it ``from exc`` so the OS error stays the cause."""
    return StorageWriteError(f"cannot {action} {path}: {exc.strerror or exc}")


def _fsync_opened(path: str, flags: int) -> None:
    """fsync what ``os.open(path, flags)`` opens; a failure is a :class:`StorageWriteError` naming ``path``."""
    try:
        fd = os.open(path, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise write_failed("fsync", path, exc) from exc


def fsync_file(path: str) -> None:
    """Flush ``path``'s data and inode to disk (a read-only descriptor suffices on Linux); a
    failure is a :class:`StorageWriteError` naming ``path`` (never ignored: see the module doc)."""
    _fsync_opened(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))


def fsync_dir(directory: str) -> None:
    """fsync a folder, making the names linked or renamed into it durable (a file's own fsync
    covers its content, not its directory entry); a failure is a :class:`StorageWriteError`."""
    _fsync_opened(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def rename_into_place(source: str, target: str) -> None:
    """``os.rename`` of a written, fsynced file to the name a commit will use; a failure is a
    :class:`StorageWriteError` naming both (the file is not in place, so it must not be named)."""
    try:
        os.rename(source, target)
    except OSError as exc:
        raise write_failed(f"rename {source} to", target, exc) from exc


def fsync_files(paths: Sequence[str], workers: int = SYNC_WORKERS) -> None:
    """:func:`fsync_file` of every path, up to ``workers`` at once; the first failure is raised
    once all have been tried (a failed fsync means the data may not be on disk: never ignored)."""
    if len(paths) <= 1:
        for path in paths:
            fsync_file(path)
        return
    with ThreadPoolExecutor(min(workers, len(paths)), thread_name_prefix="dvengine-fsync") as pool:
        futures = [pool.submit(fsync_file, path) for path in paths]
    for future in futures:
        future.result()
