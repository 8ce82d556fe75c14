"""VACUUM: delete data and DV files that no version inside the retention window can read.

A file may be deleted only when all of these hold:

1. it is not referenced by the latest snapshot (neither as a data file nor as a DV file);
2. it is not referenced by any version a reader may still time-travel to. Time travel "as of"
   any instant inside the window ``[now - retention, now]`` resolves to the version current at
   that instant, whose files are either still live or were removed by a commit made inside the
   window. So we keep every file named by an ``add`` or ``remove`` in a commit newer than the
   cutoff, and (for logs whose old commits were cleaned up) every tombstone whose
   ``deletionTimestamp`` is newer than the cutoff - Delta's own rule - with their DV files;
3. its modification time is older than the cutoff. A writer that has written files but not yet
   committed them (or a commit racing with us) is protected by this alone: its files are new;
4. it lies under the table root, outside hidden (``.``/``_`` prefixed) folders and files - the
   log, staging folders, checksum files; ``_change_data`` is not hidden, its files are kept by
   rule 2 through the ``cdc`` actions of commits in the window - and outside any nested Delta
   table; symlinks are never followed nor deleted.

The retention may not be shorter than ``delta.deletedFileRetentionDuration`` (default one
week) unless the caller explicitly disables the check: a short retention breaks time travel
and can delete files an in-flight writer is about to commit. VACUUM commits nothing; a run that
is not a dry run records where it stopped in ``_delta_log/_last_vacuum_info`` (Delta's file,
``last_vacuum_info.py``), which VACUUM LITE reads.

Two ways of finding candidates, as Delta's ``VacuumType``: FULL (here) lists everything under the
table root, so it also finds files no commit ever named (a crashed writer's); LITE
(``vacuum_lite.py``) reads them from the ``remove``/``cdc`` actions of commits older than the
window, which costs no listing of the data folders. The rules above (``vacuum_rules.py``) decide
for both. FULL also deletes the folders Delta's diff holds (those with nothing older than the cutoff
and no valid file under them: ``vacuum_dirs.py``), counted with the files as Delta counts them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from typing import Any

from dvengine.commit.conf import ConfLookup, no_conf
from dvengine.log import load_snapshot
from dvengine.maintenance.last_vacuum_info import read_watermark, write_watermark
from dvengine.maintenance.vacuum_dirs import delete_local_folders, folders_to_delete, protects_folders
from dvengine.maintenance.vacuum_lite import plan_lite
from dvengine.maintenance.vacuum_logging import log_vacuum_end, log_vacuum_start, logging_enabled
from dvengine.maintenance.vacuum_rules import (
    DEFAULT_DELETED_FILE_RETENTION,
    DEFAULT_RETENTION_HOURS,
    HOUR_MS,
    RETENTION_PROPERTY,
    VACUUM_FULL,
    VACUUM_LITE,
    VacuumPlan,
    check_vacuum_type,
    is_dv_file,
    is_hidden,
    norm_path,
    retention_ms,
    retention_window,
    table_retention_ms,
)
from dvengine.protocol.features import check_writable
from dvengine.storage import FileInfo, is_object_uri, normalize_table_path, storage_for
from dvengine.storage.base import CONDITIONAL_PUT_PROBE_PREFIX
from dvengine.writing.files import SPARK_STAGING_PREFIX

__all__ = [
    "DEFAULT_DELETED_FILE_RETENTION",
    "DEFAULT_RETENTION_HOURS",
    "RETENTION_PROPERTY",
    "VACUUM_FULL",
    "VACUUM_LITE",
    "VacuumPlan",
    "abandoned_temp_files",
    "candidate_files",
    "plan_vacuum",
    "vacuum",
]

TEMP_FILE_MIN_AGE_MS = 3_600_000


def _newest_mtime_ms(folder: str) -> int:
    """The newest modification time of a folder and everything in it."""
    newest = os.stat(folder, follow_symlinks=False).st_mtime
    for directory, _, names in os.walk(folder):
        for name in [*names, "."]:
            try:
                newest = max(newest, os.stat(os.path.join(directory, name), follow_symlinks=False).st_mtime)
            except FileNotFoundError:
                continue
    return int(newest * 1000)


def abandoned_temp_files(table_root: str, cutoff_ms: int) -> list[str]:
    """Writers' hidden temp files (``.<name>[.<uuid>].tmp``) anywhere in the table, and Spark
    staging folders (``_dvengine_staging_<uuid>``), older than the cutoff.

    A writer killed between writing a temp file and renaming or linking it leaves one behind (a
    commit's temp in ``_delta_log``, a data or DV file's temp beside its target, a staging folder).
    Readers never look at hidden names, so only age can tell one is abandoned; VACUUM's candidate
    scan skips hidden names, so they are collected here. Nested tables and symlinks are left alone.
    """
    out: list[str] = []
    pending = [table_root]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                stale = int(entry.stat(follow_symlinks=False).st_mtime * 1000) < cutoff_ms
            except FileNotFoundError:
                continue  # its writer finished (renamed or removed it) since the listing
            if is_dir:
                if entry.name.startswith(SPARK_STAGING_PREFIX):
                    if _newest_mtime_ms(entry.path) < cutoff_ms:  # a running job keeps writing into it
                        out.append(entry.path)
                elif not os.path.isdir(os.path.join(entry.path, "_delta_log")) or entry.name == "_delta_log":
                    pending.append(entry.path)
            elif entry.name.startswith(".") and entry.name.endswith(".tmp") and stale:
                out.append(entry.path)
    return sorted(out)


def _object_candidates(
    table_root: str, listed: list[FileInfo], partition_columns: Iterable[str], folders: set[str] | None = None
) -> list[FileInfo]:
    """Object-store twin of :func:`candidate_files`: from one recursive listing, Delta's hiding rule
    per path segment, nested tables (a prefix holding ``_delta_log/``) skipped. ``folders``, when
    given, collects the "folders" (key prefixes, relative) the kept objects lie in."""
    parts = tuple(partition_columns)
    prefix = table_root.rstrip("/") + "/"
    relatives = [(info, info.path[len(prefix) :].split("/")) for info in listed]
    nested = {"/".join(segs[: segs.index("_delta_log")]) for _, segs in relatives if "_delta_log" in segs[1:]}
    out = []
    for info, segs in relatives:
        if any(is_hidden(seg, parts) for seg in segs):
            continue
        if any("/".join(segs[:i]) in nested for i in range(1, len(segs))):
            continue
        out.append(info)
        if folders is not None:
            folders.update("/".join(segs[:i]) for i in range(1, len(segs)))
    return out


def candidate_files(
    table_root: str, partition_columns: Iterable[str], folders: list[str] | None = None
) -> Iterator[os.DirEntry[str]]:
    """Regular files under the table root that VACUUM may consider; never follows symlinks.
    ``folders``, when given, collects every folder the walk enters below the root."""
    parts = tuple(partition_columns)
    pending = [table_root]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            if is_hidden(entry.name, parts) or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if os.path.isdir(os.path.join(entry.path, "_delta_log")):
                    continue  # another Delta table nested inside this one: not ours to clean
                pending.append(entry.path)
                if folders is not None:
                    folders.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry


def plan_vacuum(
    table_root: str,
    retention_hours: float | None = DEFAULT_RETENTION_HOURS,
    enforce_retention: bool = True,
    now_ms: int | None = None,
    vacuum_type: str = VACUUM_FULL,
) -> VacuumPlan:
    """Decide what VACUUM would delete, without deleting anything.

    ``retention_hours`` None: the table's ``delta.deletedFileRetentionDuration`` (Delta's default
    when no retention is given). ``vacuum_type`` ``"FULL"`` (Delta's default) lists the table;
    ``"LITE"`` reads the candidates from the log's removes (``vacuum_lite.py``) and raises
    :class:`CannotVacuumLiteError` when the log no longer holds a commit it needs. Both apply the
    same keep rules (``vacuum_rules.py``). A table dvengine cannot write is refused first
    (:class:`UnsupportedFeatureError`), as Delta's ``protocolWrite`` check, dry runs included.
    """
    kind = check_vacuum_type(vacuum_type)
    snapshot = load_snapshot(table_root)
    # Delta's gc starts with deltaLog.protocolWrite(snapshot.protocol), dry runs and unlogged runs
    # included: a writer that does not know every writer feature must not delete the table's files.
    check_writable(snapshot.protocol, snapshot.metadata)
    default_retention = table_retention_ms(snapshot)
    if retention_hours is None:  # the table's own retention: nothing to check
        retention, hours = default_retention, default_retention / HOUR_MS
    else:
        retention = retention_ms(snapshot, retention_hours, enforce_retention)
        hours = retention / HOUR_MS  # the whole hours applied (Delta rounds the given ones)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now - retention
    window = retention_window(snapshot, cutoff)
    plan = VacuumPlan(
        table_root=snapshot.table_root,
        cutoff_ms=cutoff,
        retention_hours=float(hours),
        vacuum_type=kind,
        specified_retention_ms=None if retention_hours is None else retention,
        default_retention_ms=default_retention,
    )
    if kind == VACUUM_LITE:
        plan_lite(plan, snapshot, window, read_watermark(snapshot.table_root))
    else:
        _plan_full(plan, snapshot.partition_columns, window.keep, now)
    return plan


def _plan_full(plan: VacuumPlan, partition_columns: Iterable[str], keep: frozenset[str], now: int) -> None:
    """FULL: every file under the table root (one listing) that the window does not keep."""
    root, cutoff = plan.table_root, plan.cutoff_ms
    if is_object_uri(root):  # stores: no temp files or staging folders (writes are single PUTs)
        listed = storage_for(root).list_files(root, include_hidden=True)
        # the one hidden leftover a store can hold: a killed client's conditional-put probe. Same
        # age rule as local temp files: a probe younger than an hour may still be running.
        probe_cutoff = min(cutoff, now - TEMP_FILE_MIN_AGE_MS)
        plan.log_temp_files = [
            info.path
            for info in listed
            if info.path.rsplit("/", 1)[-1].startswith(CONDITIONAL_PUT_PROBE_PREFIX)
            and info.modification_time_ms < probe_cutoff
        ]
        prefixes: set[str] = set()
        old: list[str] = []
        for info in _object_candidates(root, listed, partition_columns, prefixes):
            if info.modification_time_ms < cutoff:
                old.append(info.path)
            if info.path in keep:
                plan.num_referenced_files += 1
            elif info.modification_time_ms >= cutoff:
                plan.num_protected_recent_files += 1
            else:
                plan.files.append(info.path)
                plan.total_bytes += info.size
                plan.num_dv_files += int(is_dv_file(info.path))
        plan.files.sort()
        plan.num_directories = len(prefixes) + 1
        listed_prefixes = [f"{root.rstrip('/')}/{prefix}" for prefix in prefixes]
        plan.directories = folders_to_delete(root, listed_prefixes, old, keep)
        return
    folders: list[str] = []
    old_kept: list[str] = []  # kept files whose age Delta's folder count sees (DV and change data files)
    for entry in candidate_files(root, partition_columns, folders):
        path = norm_path(entry.path)
        if path in keep:
            plan.num_referenced_files += 1
            if not protects_folders(root, path):
                with contextlib.suppress(FileNotFoundError):  # gone since the listing: no age to count
                    if int(entry.stat(follow_symlinks=False).st_mtime * 1000) < cutoff:
                        old_kept.append(path)
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # deleted since the listing (a concurrent VACUUM or a failed writer's clean-up)
        if int(st.st_mtime * 1000) >= cutoff:
            plan.num_protected_recent_files += 1
            continue
        plan.files.append(path)
        plan.total_bytes += st.st_size
        plan.num_dv_files += int(is_dv_file(entry.name))
    plan.files.sort()
    plan.num_directories = len(folders) + 1  # Delta's dirCounts: the listed folders and the root
    plan.directories = folders_to_delete(root, [norm_path(f) for f in folders], [*plan.files, *old_kept], keep)
    # Never younger than an hour, whatever the retention: a running writer's temp file or staging
    # folder is young, and deleting it would fail that writer.
    plan.log_temp_files = abandoned_temp_files(root, min(cutoff, now - TEMP_FILE_MIN_AGE_MS))


def _delete_planned(plan: VacuumPlan) -> tuple[list[str], list[str]]:
    """Delete the plan's files, then its folders (those empty by then: vacuum_dirs.py), then the
    abandoned temp files; (files deleted, folders deleted)."""
    deleted: list[str] = []
    if is_object_uri(plan.table_root):
        storage = storage_for(plan.table_root)
        for path in plan.files:
            with contextlib.suppress(FileNotFoundError):
                storage.delete(path)  # S3 DELETE succeeds on a missing key: a concurrent VACUUM is harmless
            deleted.append(path)
        for path in plan.log_temp_files:
            storage.delete(path)
        return deleted, []  # a prefix in the plan holds a young object: Hadoop's delete of it fails
    for path in plan.files:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue  # a concurrent VACUUM got there first
        deleted.append(path)
    dirs_removed = delete_local_folders(plan.directories)
    for path in plan.log_temp_files:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return deleted, dirs_removed


def _delete_logged(plan: VacuumPlan, conf: ConfLookup, retention_check_enabled: bool) -> tuple[list[str], list[str]]:
    """:func:`_delete_planned` between a VACUUM START and a VACUUM END commit (vacuum_logging.py).

    As Delta's ``gc``: START once the files are known, before the first deletion (a failed START
    commit deletes nothing); END ``FAILED`` when the deletion raises, whatever it raised, then the
    error goes on; END ``COMPLETED`` with the counts otherwise."""
    log_vacuum_start(
        plan.table_root,
        conf,
        retention_check_enabled=retention_check_enabled,
        specified_retention_ms=plan.specified_retention_ms,
        default_retention_ms=plan.default_retention_ms,
        num_files_to_delete=len(plan.files) + len(plan.directories),  # Delta's diff.count(): folders too
        size_of_data_to_delete=plan.total_bytes,
    )
    try:
        deleted, dirs_removed = _delete_planned(plan)
    except BaseException:  # Delta catches Throwable: an interrupted VACUUM is logged FAILED too
        log_vacuum_end(plan.table_root, conf, files_deleted=None, directories=None)
        raise
    log_vacuum_end(plan.table_root, conf, files_deleted=len(deleted) + len(dirs_removed), directories=plan.num_directories)
    return deleted, dirs_removed


def vacuum(
    table_root: str,
    retention_hours: float | None = DEFAULT_RETENTION_HOURS,
    dry_run: bool = False,
    enforce_retention: bool = True,
    now_ms: int | None = None,
    vacuum_type: str = VACUUM_FULL,
    conf: ConfLookup | None = None,
) -> dict[str, Any]:
    """Delete unreferenced data/DV files older than the retention window; report what was done.

    With ``dry_run`` nothing is deleted nor committed and the report lists what would be.
    ``retention_hours`` None: the table's ``delta.deletedFileRetentionDuration``. ``vacuum_type``:
    ``"FULL"`` (default) or ``"LITE"`` (see :func:`plan_vacuum`). Raises
    :class:`InvalidArgumentError` for a negative retention, or one below the table's
    ``delta.deletedFileRetentionDuration`` while ``enforce_retention`` is set, or a bad type;
    :class:`CannotVacuumLiteError` when LITE cannot see every commit it needs.

    Unless a dry run, the deletion is logged between a ``VACUUM START`` and a ``VACUUM END`` commit
    when ``spark.databricks.delta.vacuum.logging.enabled`` says so (read from ``conf``; None: the
    environment variable ``SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED``), by default on local
    folders, GCS and Azure but not S3, as Delta (``vacuum_logging.py``), and the run ends by
    recording where it stopped in ``_delta_log/_last_vacuum_info``, as Delta does.
    """
    lookup = no_conf if conf is None else conf
    root = normalize_table_path(table_root)
    logged = not dry_run and logging_enabled(root, lookup)  # a bad conf value is refused before any work
    plan = plan_vacuum(root, retention_hours, enforce_retention, now_ms, vacuum_type)
    deleted: list[str] = []
    dirs_removed: list[str] = []
    if logged:
        deleted, dirs_removed = _delete_logged(plan, lookup, enforce_retention)
    elif not dry_run:
        deleted, dirs_removed = _delete_planned(plan)
    if not dry_run:
        write_watermark(plan.table_root, plan.watermark)
    # Delta counts and lists its diff's folders with the files (numFilesToDelete, DRY RUN's paths)
    files = sorted([*plan.files, *plan.directories]) if dry_run else [*deleted, *dirs_removed]
    return {
        "path": plan.table_root,
        "vacuumType": plan.vacuum_type,
        "dryRun": dry_run,
        "retentionHours": plan.retention_hours,
        "cutoffTimestampMs": plan.cutoff_ms,
        "numFilesDeleted": 0 if dry_run else len(deleted) + len(dirs_removed),
        "numFilesToDelete": len(plan.files) + len(plan.directories),
        "numDeletionVectorFiles": plan.num_dv_files,
        "sizeOfDeletedBytes": plan.total_bytes,
        "numDirectoriesDeleted": len(dirs_removed),
        "numReferencedFiles": plan.num_referenced_files,
        "numProtectedRecentFiles": plan.num_protected_recent_files,
        "numAbandonedTempFiles": len(plan.log_temp_files),
        "eligibleStartCommitVersion": plan.eligible_start_version,
        "eligibleEndCommitVersion": plan.eligible_end_version,
        "files": [p[len(plan.table_root) + 1 :] if is_object_uri(p) else os.path.relpath(p, plan.table_root) for p in files],
    }
