"""One listing of ``_delta_log``, organised by version.

Replay needs three answers from the directory: which commit files exist (to detect gaps),
which checkpoints are *complete* (a multi-part checkpoint with a missing part must be ignored,
not half-read), and the latest version. Listing once and answering all three from the same
snapshot of the directory keeps the answers consistent with each other.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from dataclasses import dataclass

from dvengine.errors import TableNotFoundError
from dvengine.log.filenames import (
    LogFileKind,
    LogFileName,
    checkpoint_file_name,
    commit_file_name,
    parse_log_file_name,
)
from dvengine.storage.logstore import FileInfo, LogStore, log_dir
from dvengine.storage.uris import is_object_uri


@dataclass(frozen=True, slots=True)
class CheckpointFiles:
    """All files of one checkpoint of ``version`` (several for multi-part), in part order."""

    version: int
    kind: LogFileKind
    files: tuple[FileInfo, ...]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def modification_time_ms(self) -> int:
        return max(f.modification_time_ms for f in self.files)

    @property
    def size_in_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True, slots=True)
class LogListing:
    """The versioned files of a table's log at one point in time."""

    table_root: str
    log_path: str
    commits: dict[int, FileInfo]
    checkpoints: tuple[CheckpointFiles, ...]  # complete checkpoints only, oldest first
    other: tuple[tuple[LogFileName, FileInfo], ...]  # crc, compacted, incomplete checkpoint parts

    @property
    def latest_version(self) -> int:
        candidates = list(self.commits)
        candidates.extend(cp.version for cp in self.checkpoints)
        return max(candidates)

    def checkpoints_at_or_before(self, version: int) -> list[CheckpointFiles]:
        """Complete checkpoints usable for ``version``, newest first (preferred first)."""
        return [cp for cp in reversed(self.checkpoints) if cp.version <= version]

    @property
    def earliest_reconstructable_version(self) -> int:
        """0 when the log starts at commit 0, else the oldest complete checkpoint."""
        if 0 in self.commits:
            return 0
        if self.checkpoints:
            return self.checkpoints[0].version
        return min(self.commits)


def _group_checkpoints(
    entries: list[tuple[LogFileName, FileInfo]],
) -> tuple[list[CheckpointFiles], list[tuple[LogFileName, FileInfo]]]:
    singles: list[CheckpointFiles] = []
    multi: dict[tuple[int, int], dict[int, FileInfo]] = defaultdict(dict)
    leftovers: list[tuple[LogFileName, FileInfo]] = []
    for name, info in entries:
        if name.kind is LogFileKind.CHECKPOINT_MULTI:
            assert name.part is not None and name.num_parts is not None
            multi[(name.version, name.num_parts)][name.part] = info
        else:
            singles.append(CheckpointFiles(name.version, name.kind, (info,)))
    complete = list(singles)
    for (version, num_parts), parts in multi.items():
        if num_parts > 0 and sorted(parts) == list(range(1, num_parts + 1)):
            complete.append(CheckpointFiles(version, LogFileKind.CHECKPOINT_MULTI, tuple(parts[i] for i in sorted(parts))))
        else:
            for part, info in parts.items():
                leftovers.append((LogFileName(LogFileKind.CHECKPOINT_MULTI, version, part, num_parts), info))
    # Several complete checkpoints of one version can coexist (classic + V2, or two writers'
    # V2 files): any of them is valid; prefer classic single files, then multi-part, then V2.
    order = {LogFileKind.CHECKPOINT_V2: 0, LogFileKind.CHECKPOINT_MULTI: 1, LogFileKind.CHECKPOINT_SINGLE: 2}
    complete.sort(key=lambda cp: (cp.version, order[cp.kind], cp.paths))
    return complete, leftovers


def _listing(table_root: str, path: str, entries: list[FileInfo]) -> LogListing | None:
    """The listing of ``entries``, or None when they hold no commit or checkpoint."""
    commits: dict[int, FileInfo] = {}
    checkpoint_entries: list[tuple[LogFileName, FileInfo]] = []
    other: list[tuple[LogFileName, FileInfo]] = []
    for info in entries:
        name = parse_log_file_name(info.path)
        if name is None:
            continue
        if name.kind is LogFileKind.COMMIT:
            commits[name.version] = info
        elif name.is_checkpoint:
            checkpoint_entries.append((name, info))
        else:
            other.append((name, info))
    checkpoints, leftovers = _group_checkpoints(checkpoint_entries)
    if not commits and not checkpoints:
        return None
    return LogListing(table_root, path, commits, tuple(checkpoints), tuple(other + leftovers))


def list_log(store: LogStore, table_root: str) -> LogListing:
    """List ``_delta_log`` of ``table_root``; TableNotFoundError if it holds no table."""
    path = log_dir(table_root)
    entries = store.list_dir(path)  # object stores have no folders: an empty listing is "no table"
    if not entries and not is_object_uri(path) and not os.path.isdir(path):
        raise TableNotFoundError(f"{table_root} is not a Delta table: it has no _delta_log directory")
    listing = _listing(table_root, path, entries)
    if listing is None:
        raise TableNotFoundError(
            f"{table_root} is not a Delta table: its _delta_log directory has no commit or checkpoint files"
        )
    return listing


def list_log_from(store: LogStore, table_root: str, version: int) -> LogListing | None:
    """The log files of versions >= ``version`` (local stores only; None elsewhere or when none).

    A partial listing: it answers the latest version, the complete checkpoints at or after
    ``version`` and the commits after them exactly as a full listing would, and nothing before.
    Only names are compared for the older files, none is stat'ed (the cost of a cold load of a
    long log was the stat and name parse of every file; see spec_notes/log-replay-and-checkpoints.md).
    """
    if is_object_uri(table_root):
        return None
    return _listing(table_root, log_dir(table_root), log_files_from(store, table_root, version))


def log_files_from(store: LogStore, table_root: str, version: int) -> list[FileInfo]:
    """The log files of versions >= ``version``, sorted: the one tail listing both backends
    answer (a local cold load from ``_last_checkpoint``; a cached snapshot's tail on a store)."""
    return store.list_dir_after(log_dir(table_root), f"{version:020d}")  # "<v>.json" sorts after "<v>"



_HOLE_PROBES = (1, *(2**k for k in range(1, 11)))


def probe_log_from(store: LogStore, table_root: str, version: int, parts: int | None) -> LogListing | None:
    """The classic checkpoint of ``version`` and the commits after it, found by stat, not listing.

    Local stores only (None elsewhere, or when the checkpoint named by ``_last_checkpoint``'s
    ``version`` / ``parts`` is not all there, or when no commit follows it). Reading a directory of
    ~11,000 log files costs ~5 ms here whatever is filtered; a stat costs microseconds. It stops at
    the first missing commit, as the snapshot cache's tail does; two cases a listing would see
    differently are handled by the caller or accepted:

    - nothing after the checkpoint: a stale hint whose next commits were cleaned up would look
      the same, so None is returned and the caller lists from the checkpoint version instead;
    - a hole in the log (commit n missing, a later one present): the versions n+1, n+2, n+4 ...
      n+1024 are probed too, and if one exists the caller lists, which reports the gap as a full
      load does. A hole none of those probes hits (e.g. n..n+2 missing, n+3 the latest) is
      loaded as version n-1, as the snapshot cache's tail would; such a log is corrupt
      whichever way it is read, and cleanup, deleting oldest first, never leaves one.
    """
    head = getattr(store, "head", None)
    if head is None or not getattr(store, "is_local", False) or is_object_uri(table_root):
        return None
    path = log_dir(table_root)
    base = checkpoint_file_name(version)
    if parts is None or parts == 1:
        names, kind = [base], LogFileKind.CHECKPOINT_SINGLE
    else:
        stem = base[: -len(".parquet")]
        names, kind = [f"{stem}.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)], LogFileKind.CHECKPOINT_MULTI
    commits: dict[int, FileInfo] = {}
    try:
        files = tuple(head(f"{path}/{name}") for name in names)
    except FileNotFoundError:
        return None
    for v in (version, version + 1):
        with contextlib.suppress(FileNotFoundError):
            commits[v] = head(f"{path}/{commit_file_name(v)}")
    if version + 1 not in commits:
        return None
    v = version + 2
    while True:
        try:
            commits[v] = head(f"{path}/{commit_file_name(v)}")
        except FileNotFoundError:
            break
        v += 1
    if any(store.exists(f"{path}/{commit_file_name(v + step)}") for step in _HOLE_PROBES):
        return None  # a commit after a missing one: a hole, which the listing reports
    return LogListing(table_root, path, commits, (CheckpointFiles(version, kind, files),), ())
