"""What both VACUUM modes (FULL and LITE) agree on: the retention check, which files the retention
window protects, Delta's hidden-name rule, and the plan they fill in.

FULL (``vacuum.py``) finds candidates by listing the table; LITE (``vacuum_lite.py``) by reading the
``remove``/``cdc`` actions of old commits. Whatever the source, a candidate is deleted only under
the same rules, decided here once, so LITE never deletes a file FULL would keep.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from dvengine.dv import absolute_dv_path
from dvengine.errors import InvalidArgumentError
from dvengine.log import Snapshot
from dvengine.log.commit_file import find_commit_info, parse_actions
from dvengine.log.intervals import parse_interval_ms
from dvengine.log.listing import LogListing, list_log
from dvengine.log.timestamps import commit_info_timestamp
from dvengine.protocol.actions import AddCDCFile, AddFile, RemoveFile
from dvengine.protocol.features import CHANGE_DATA_DIR
from dvengine.storage import is_object_uri, resolve_data_path, storage_for

DEFAULT_RETENTION_HOURS = 168.0
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
HOUR_MS = 3_600_000

# Delta's VacuumCommand.VacuumType: FULL lists the table (the default), LITE reads the log.
VACUUM_FULL = "FULL"
VACUUM_LITE = "LITE"
VACUUM_TYPES = (VACUUM_FULL, VACUUM_LITE)


def check_vacuum_type(value: object) -> str:
    """``"FULL"`` or ``"LITE"`` (any case, as SQL keywords are); anything else is refused, named."""
    if isinstance(value, str) and value.strip().upper() in VACUUM_TYPES:
        return value.strip().upper()
    raise InvalidArgumentError(f"vacuum type must be 'FULL' or 'LITE', got {value!r}")


@dataclass
class VacuumPlan:
    """The files VACUUM deletes (or would delete), with the numbers it reports."""

    table_root: str
    cutoff_ms: int
    retention_hours: float
    vacuum_type: str = VACUUM_FULL
    files: list[str] = field(default_factory=list)  # absolute paths
    # FULL: the folders Delta's diff holds (vacuum_dirs.py), absolute, deepest first; counted with the
    # files in numFilesToDelete and listed by a dry run, deleted when empty
    directories: list[str] = field(default_factory=list)
    total_bytes: int = 0
    num_dv_files: int = 0
    num_referenced_files: int = 0
    num_protected_recent_files: int = 0
    log_temp_files: list[str] = field(default_factory=list)  # writers' abandoned temp files and staging folders
    # LITE only: the commits whose removes and cdc files were read (Delta's eligibleStart/End-
    # CommitVersion), and the watermark a completed run records in _delta_log/_last_vacuum_info.
    eligible_start_version: int | None = None
    eligible_end_version: int | None = None
    watermark: int | None = None
    # What a VACUUM START commit logs (vacuum_logging.py): the retention the caller asked for (None:
    # the table's, Delta's specifiedRetentionMillis left out) and the table's own retention.
    specified_retention_ms: int | None = None
    default_retention_ms: int = 0
    # Delta's dirCounts (VACUUM END's numVacuumedDirectories): the folders FULL's listing found plus
    # the table root; LITE lists none, so 1.
    num_directories: int = 1


def table_retention_ms(snapshot: Snapshot) -> int:
    """The table's ``delta.deletedFileRetentionDuration`` in ms (Delta's ``DeltaLog.tombstoneRetentionMillis``)."""
    return parse_interval_ms(snapshot.configuration.get(RETENTION_PROPERTY, DEFAULT_DELETED_FILE_RETENTION))


def rounded_hours(retention_hours: float) -> int:
    """The whole hours Delta's ``gc`` applies: ``math.round(h)`` (Scala's, i.e. Java's
    ``Math.round``: the nearest integer, halves up), before ``TimeUnit.HOURS.toMillis``. So
    ``RETAIN 0.5 HOURS`` keeps one hour and ``-0.4`` is 0, not negative. ``Math.round(NaN)`` is 0
    (its Javadoc: "If the argument is NaN, the result is 0"), so a NaN retention is 0 hours in
    Delta (``VacuumCommand.gc``'s ``retentionMillis``): the cutoff is now, the retention check
    sees 0 ms, VACUUM START logs ``specifiedRetentionMillis`` 0."""
    if math.isnan(retention_hours):
        return 0
    whole = math.floor(retention_hours)
    return whole + 1 if retention_hours - whole >= 0.5 else whole  # exact: a double's fraction is representable


def retention_ms(snapshot: Snapshot, retention_hours: float, enforce_retention: bool) -> int:
    """The retention in ms, from the hours rounded as Delta rounds them (:func:`rounded_hours`);
    refuses an infinite one, a negative one once rounded, and one below the table's
    ``delta.deletedFileRetentionDuration`` unless ``enforce_retention`` is off (Delta's
    ``checkRetentionPeriodSafety``, which sees the rounded value too). NaN is not refused: it
    rounds to 0 hours as in Delta, so it passes only with the check off (or a 0 retention table)."""
    if isinstance(retention_hours, bool) or not isinstance(retention_hours, (int, float)) or math.isinf(retention_hours):
        raise InvalidArgumentError(
            f"retention_hours must be a finite number (or NaN, which rounds to 0 as in Delta), got {retention_hours!r}"
        )
    hours = rounded_hours(retention_hours)
    if hours < 0:
        raise InvalidArgumentError(
            f"retention_hours must be >= 0, got {retention_hours} ({hours} once rounded to whole hours, as Delta does)"
        )
    requested = hours * HOUR_MS
    configured_text = snapshot.configuration.get(RETENTION_PROPERTY, DEFAULT_DELETED_FILE_RETENTION)
    configured = parse_interval_ms(configured_text)
    if enforce_retention and requested < configured:
        raise InvalidArgumentError(
            f"refusing to vacuum {snapshot.table_root} with a retention of {retention_hours} hours ({hours} once "
            f"rounded to whole hours, as Delta does): the table's {RETENTION_PROPERTY} is {configured_text!r} "
            f"({configured / HOUR_MS:g} hours). A shorter retention "
            "breaks time travel and may delete files of writes still in flight; pass enforce_retention=False "
            "(CLI: --force) if you are sure no reader or writer needs them"
        )
    return requested


def norm_path(path: str) -> str:
    """Comparable spelling of a path: normalised locally; object URIs are canonical already."""
    return path if is_object_uri(path) else os.path.normpath(path)


def action_file_paths(table_root: str, action: AddFile | RemoveFile) -> Iterator[str]:
    """The data file of an add/remove and its DV file (when not inline), as absolute paths."""
    yield norm_path(resolve_data_path(table_root, action.path))
    dv = action.deletion_vector
    if dv is not None and not dv.is_inline:
        yield norm_path(absolute_dv_path(table_root, dv))


def is_hidden(name: str, partition_columns: Iterable[str]) -> bool:
    """Delta's rule: ``.``/``_`` prefixed names are hidden unless they are partition folders or
    ``_change_data`` (change data files expire with the retention window like data files)."""
    if not name.startswith((".", "_")) or name == CHANGE_DATA_DIR:
        return False
    return not any(name.startswith(f"{column}=") for column in partition_columns)


@dataclass(frozen=True)
class RetentionWindow:
    """What the retention window protects, and the commit it starts after.

    ``keep``: absolute paths of every data, DV and change-data file a version inside the window
    may read. ``boundary_version``: the newest commit made at or before the cutoff - the version
    time travel to the cutoff resolves to (Delta's ``latestCommitVersionOutsideOfRetentionWindow``)
    - or None when every commit still in the log is newer than the cutoff.
    """

    keep: frozenset[str]
    boundary_version: int | None
    listing: LogListing


def retention_window(snapshot: Snapshot, cutoff_ms: int) -> RetentionWindow:
    """Scan commits newest first; every file an ``add``/``remove``/``cdc`` of a commit newer than the
    cutoff names is kept, as are live files and tombstones younger than the cutoff; the scan stops
    at the first commit at or before the cutoff (older commits' files are live, kept above, or were
    removed by a commit the scan saw or a commit at or before the boundary)."""
    root = snapshot.table_root
    keep: set[str] = set()
    for add in snapshot.files:
        keep.update(action_file_paths(root, add))
    for remove in snapshot.tombstones:
        if remove.deletion_timestamp is None or remove.deletion_timestamp > cutoff_ms:
            keep.update(action_file_paths(root, remove))
    store = storage_for(root)
    listing = list_log(store, root)
    boundary: int | None = None
    for version in sorted((v for v in listing.commits if v <= snapshot.version), reverse=True):
        info = listing.commits[version]
        raw = store.read_bytes(info.path)
        committed_at = commit_info_timestamp(find_commit_info(raw, info.path), info.modification_time_ms)
        if committed_at <= cutoff_ms:
            boundary = version
            break
        for action in parse_actions(raw, info.path):
            if isinstance(action, (AddFile, RemoveFile)):
                keep.update(action_file_paths(root, action))
            elif isinstance(action, AddCDCFile):  # the change feed of a version in the window
                keep.add(norm_path(resolve_data_path(root, action.path)))
    return RetentionWindow(frozenset(keep), boundary, listing)


def relative_to_table(table_root: str, path: str) -> str | None:
    """``path`` relative to the table root (``/``-separated), or None when it lies outside (a shallow
    clone's files live in its source table: never ours to delete)."""
    if is_object_uri(table_root):
        prefix = table_root.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None
    relative = os.path.relpath(path, table_root)
    if relative == os.curdir or relative.startswith(os.pardir + os.sep) or relative == os.pardir or os.path.isabs(relative):
        return None
    return relative.replace(os.sep, "/")


def is_dv_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1]
    return name.startswith("deletion_vector_") and name.endswith(".bin")
