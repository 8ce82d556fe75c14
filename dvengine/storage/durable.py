"""fsync of new local files before a commit (or ``_last_checkpoint``) names them.

Why (spec_notes/crash-safety.md, "Power loss"): ext4 with delayed allocation, the default, can
commit the directory entry of a new file before its data blocks are allocated, so after a power
loss the name may exist with length 0. A commit that names such a data file, or a
``_last_checkpoint`` that names such a checkpoint, would survive the crash and point at nothing
readable. The writer of each such file therefore fsyncs it itself, before the rename that puts it
in place (as ``LocalStorage.put_new`` does for DV files), so the cost is paid once per file, by
the thread that wrote it, and never inside the host-local commit turn.

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

# Files synced at once by fsync_files: fsync releases the GIL and the disk folds concurrent
# flushes into one journal commit, so a job's files cost little more than its largest one.
SYNC_WORKERS = 8


def fsync_file(path: str) -> None:
    """Flush ``path``'s data and inode to disk (a read-only descriptor suffices on Linux)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
