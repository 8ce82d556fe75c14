"""Expired log cleanup (Delta's "metadata cleanup").

Commits and checkpoints older than ``delta.logRetentionDuration`` may be deleted, but every
version still inside retention must stay reconstructable. So we find the oldest version inside
retention, keep the newest *readable* checkpoint at or before it and everything after that
checkpoint, and delete only files of versions strictly before the kept checkpoint.

Like Delta Spark for tables without in-commit timestamps, a version's age is the modification
time of its log file, pushed forward to be strictly increasing across versions (clock skew
between writers must not make an old version look young or vice versa).
"""

from __future__ import annotations

import logging
import time

from dvengine.errors import LogCorruptedError
from dvengine.log import snapshot_cache
from dvengine.log.checkpoint_reader import read_checkpoint
from dvengine.log.filenames import LogFileKind
from dvengine.log.intervals import parse_interval_ms
from dvengine.log.listing import CheckpointFiles, LogListing, list_log
from dvengine.log.loader import load_snapshot
from dvengine.storage.logstore import LogStore, normalize_table_path
from dvengine.storage.registry import storage_for

_LOG = logging.getLogger(__name__)

DEFAULT_LOG_RETENTION = "interval 30 days"


def _version_times(listing: LogListing) -> dict[int, int]:
    raw: dict[int, int] = {v: info.modification_time_ms for v, info in listing.commits.items()}
    for cp in listing.checkpoints:
        raw.setdefault(cp.version, cp.modification_time_ms)
    out: dict[int, int] = {}
    previous: int | None = None
    for version in sorted(raw):
        ts = raw[version] if previous is None else max(raw[version], previous + 1)
        out[version] = ts
        previous = ts
    return out


def _readable(store: LogStore, listing: LogListing, cp: CheckpointFiles) -> bool:
    try:
        read_checkpoint(store, cp, listing.log_path)
    except LogCorruptedError as exc:
        _LOG.warning("not cleaning up before unreadable checkpoint of version %d: %s", cp.version, exc)
        return False
    return True


def cleanup_expired_logs(table_root: str, now_ms: int | None = None, store: LogStore | None = None) -> list[str]:
    """Delete expired log files; return the deleted paths (empty when cleanup is disabled)."""
    root = normalize_table_path(table_root)
    st = storage_for(root) if store is None else store
    config = load_snapshot(root, store=st).configuration
    if config.get("delta.enableExpiredLogCleanup", "true").strip().lower() == "false":
        return []
    retention = parse_interval_ms(config.get("delta.logRetentionDuration", DEFAULT_LOG_RETENTION))
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - retention
    listing = list_log(st, root)
    if listing.checkpoints:  # commits below them may go now: no blind commit on an older snapshot
        snapshot_cache.note_checkpoint(root, max(cp.version for cp in listing.checkpoints))
    times = _version_times(listing)
    inside = [v for v, ts in times.items() if ts > cutoff]
    first_retained = min(inside) if inside else listing.latest_version
    keep: CheckpointFiles | None = None
    for cp in listing.checkpoints_at_or_before(first_retained):
        if _readable(st, listing, cp):
            keep = cp
            break
    if keep is None:
        return []
    boundary = keep.version
    doomed: list[str] = [info.path for v, info in listing.commits.items() if v < boundary]
    doomed += [path for cp in listing.checkpoints if cp.version < boundary for path in cp.paths]
    for name, info in listing.other:
        last = name.end_version if name.kind is LogFileKind.COMPACTED and name.end_version is not None else name.version
        if last < boundary:
            doomed.append(info.path)
    deleted: list[str] = []
    for path in sorted(doomed):
        try:
            st.delete(path)
        except FileNotFoundError:
            continue  # another writer's cleanup removed it first
        deleted.append(path)
    return deleted
