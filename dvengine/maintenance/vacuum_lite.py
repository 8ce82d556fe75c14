"""VACUUM LITE: find the files to delete in the log instead of listing the table.

A full VACUUM lists every file under the table root, which on an object store is one LIST per
1,000 objects, live ones included. LITE instead reads the commits made since the last VACUUM up
to the one current at the cutoff, and takes as candidates the files their ``remove`` actions
name (data file and DV file) and their ``cdc`` files. It cannot find files no commit ever named
(a crashed writer's orphans): FULL is still needed for those.

Which commits, as Delta's ``VacuumCommand.getFilesFromDeltaLog`` (Delta 3.3+):

- end: the newest commit at or before the cutoff (Delta's ``latestCommitVersionOutsideOfRetention-
  Window``, found with ``DeltaHistoryManager.getActiveCommitAtTime``); none -> nothing to do;
- start: one after the watermark the last VACUUM recorded (``last_vacuum_info.py``), else the
  oldest commit file, capped at the snapshot's version (``math.min(snapshot.version, ...)``);
  start > end -> nothing to do;
- refused with DELTA_CANNOT_VACUUM_LITE when the oldest commit file is not version 0 and no
  watermark is recorded or it is older than that commit (``earliestCommitVersion != 0 &&
  watermark.forall(_ < earliestCommitVersion)``): removes in the cleaned-up commits are invisible.

Candidates, as Delta: a remove's files only when its ``deletionTimestamp`` (0 when absent) is
before the cutoff; every ``cdc`` file of those commits. Then dvengine's shared rules
(``vacuum_rules.py``) decide: a candidate outside the table root (a shallow clone's source), under
a hidden name or (local folders) behind a symlinked folder or inside a nested table is never
touched, one the retention window keeps stays, and the file itself is stat'ed (one HEAD on a
store): absent -> skipped (an earlier VACUUM took it), modified at or after the cutoff -> kept.
So LITE deletes a subset of what FULL would at the same instant.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from dvengine.errors import CannotVacuumLiteError
from dvengine.log import Snapshot
from dvengine.log.commit_file import parse_actions
from dvengine.log.listing import LogListing
from dvengine.maintenance.vacuum_rules import (
    RetentionWindow,
    VacuumPlan,
    action_file_paths,
    is_dv_file,
    is_hidden,
    norm_path,
    relative_to_table,
)
from dvengine.protocol.actions import AddCDCFile, RemoveFile
from dvengine.storage import FileInfo, is_object_uri, resolve_data_path, storage_for
from dvengine.storage.batch import head_many, read_many


@dataclass(frozen=True)
class CommitRange:
    """The commits LITE reads, both ends included."""

    start: int
    end: int


def eligible_commits(
    table_root: str, listing: LogListing, snapshot_version: int, boundary: int | None, watermark: int | None
) -> CommitRange | None:
    """The commits whose removes LITE must read (None: nothing to read); refuses when the log no
    longer holds all of them."""
    if boundary is None or not listing.commits:
        return None  # every commit left is newer than the cutoff: nothing is old enough
    earliest = min(listing.commits)
    if earliest != 0 and (watermark is None or watermark < earliest):
        since = "no earlier VACUUM recorded where it stopped" if watermark is None else (
            f"the last VACUUM stopped at version {watermark}"
        )
        raise CannotVacuumLiteError(
            f"[DELTA_CANNOT_VACUUM_LITE] VACUUM LITE cannot delete all eligible files of {table_root} as some "
            f"files are not referenced by the Delta log: its oldest commit file is version {earliest} and {since}, "
            "so the removes of the commits cleaned up since are unknown. Please run VACUUM FULL."
        )
    start = min(snapshot_version, earliest if watermark is None else watermark + 1)
    if start > boundary:
        return None
    missing = [v for v in range(start, boundary + 1) if v not in listing.commits]
    if missing:  # a hole in the log: a commit LITE must read is not there
        raise CannotVacuumLiteError(
            f"[DELTA_CANNOT_VACUUM_LITE] VACUUM LITE cannot delete all eligible files of {table_root}: commit "
            f"file(s) of version(s) {', '.join(map(str, missing[:10]))} are missing from its log. Please run VACUUM FULL."
        )
    return CommitRange(start, boundary)


def log_named_files(table_root: str, listing: LogListing, commits: CommitRange, cutoff_ms: int) -> set[str]:
    """Absolute paths of the files the commits' removes (older than the cutoff) and cdc actions name."""
    versions = range(commits.start, commits.end + 1)
    paths = [listing.commits[v].path for v in versions]
    named: set[str] = set()
    for path, raw in zip(paths, read_many(storage_for(table_root), paths), strict=True):
        for action in parse_actions(raw, path):
            if isinstance(action, RemoveFile):
                if (action.deletion_timestamp or 0) < cutoff_ms:
                    named.update(action_file_paths(table_root, action))
            elif isinstance(action, AddCDCFile):
                named.add(norm_path(resolve_data_path(table_root, action.path)))
    return named


def _deletable_by_name(table_root: str, path: str, partition_columns: tuple[str, ...]) -> bool:
    """Inside the table and under no hidden name: the files FULL's walk would consider."""
    relative = relative_to_table(table_root, path)
    return relative is not None and not any(is_hidden(segment, partition_columns) for segment in relative.split("/"))


class _LocalWalk:
    """Whether FULL's walk of a local table would reach a folder: it follows no symlinked folder
    and skips a sub-folder holding its own ``_delta_log`` (another table). Answers are cached per
    folder (a table's files share a few partition folders). Object stores have neither symlinks
    nor a cheap test for a nested table (a LIST per folder), so LITE trusts the log there."""

    def __init__(self, table_root: str) -> None:
        self.root = os.path.normpath(table_root)
        self.answers: dict[str, bool] = {self.root: True}

    def reaches(self, folder: str) -> bool:
        known = self.answers.get(folder)
        if known is None:
            parent = os.path.dirname(folder)
            own = not os.path.islink(folder) and not os.path.isdir(os.path.join(folder, "_delta_log"))
            known = own and parent != folder and self.reaches(parent)
            self.answers[folder] = known
        return known


def _stat_files(table_root: str, paths: list[str]) -> list[FileInfo | None]:
    """Size and mtime of each path; None when absent or (locally) not a regular file FULL's walk
    would reach: a symlink is never followed nor deleted, a nested table never touched."""
    if is_object_uri(table_root):
        return head_many(storage_for(table_root), paths)
    walk = _LocalWalk(table_root)
    out: list[FileInfo | None] = []
    for path in paths:
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            out.append(None)
            continue
        reachable = stat.S_ISREG(st.st_mode) and walk.reaches(os.path.dirname(path))
        out.append(FileInfo(path, st.st_size, int(st.st_mtime * 1000)) if reachable else None)
    return out


def plan_lite(plan: VacuumPlan, snapshot: Snapshot, window: RetentionWindow, watermark: int | None) -> None:
    """Fill ``plan`` with what LITE deletes, and the watermark a completed run records."""
    root = plan.table_root
    plan.watermark = window.boundary_version  # Delta records it even when there is nothing to read
    commits = eligible_commits(root, window.listing, snapshot.version, window.boundary_version, watermark)
    if commits is None:
        return
    plan.eligible_start_version, plan.eligible_end_version = commits.start, commits.end
    parts = tuple(snapshot.partition_columns)
    candidates: list[str] = []
    for path in sorted(log_named_files(root, window.listing, commits, plan.cutoff_ms)):
        if not _deletable_by_name(root, path, parts):
            continue
        if path in window.keep:
            plan.num_referenced_files += 1
        else:
            candidates.append(path)
    for path, info in zip(candidates, _stat_files(root, candidates), strict=True):
        if info is None:
            continue  # gone already (an earlier VACUUM) or not a regular file
        if info.modification_time_ms >= plan.cutoff_ms:
            plan.num_protected_recent_files += 1
            continue
        plan.files.append(path)
        plan.total_bytes += info.size
        plan.num_dv_files += int(is_dv_file(path))
