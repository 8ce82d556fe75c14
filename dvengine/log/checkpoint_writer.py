"""Writing checkpoints (classic single-part; V2 through :mod:`dvengine.log.checkpoint_v2`) and ``_last_checkpoint``.

A checkpoint is the Snapshot's reconciled state as Parquet: protocol, metaData, txn,
domainMetadata, every live add, and the removes still within
``delta.deletedFileRetentionDuration`` (VACUUM needs those tombstones; older ones are dropped,
as Delta does). File actions are written with ``dataChange=false`` because a checkpoint changes
no data. The file is written atomically (temp file + rename) so readers never see half of it,
and ``_last_checkpoint`` is replaced only afterwards and never moved backwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.errors import InvalidArgumentError
from dvengine.log import snapshot_cache
from dvengine.log.checkpoint_schema import CHECKPOINT_SCHEMA, CLUSTERED_CHECKPOINT_SCHEMA
from dvengine.log.checkpoint_v2 import uses_v2_checkpoints, write_v2_checkpoint
from dvengine.log.cleanup import cleanup_expired_logs, expired_logs_possible
from dvengine.log.filenames import checkpoint_file_name
from dvengine.log.intervals import parse_interval_ms
from dvengine.log.last_checkpoint import LastCheckpoint, last_checkpoint_path, read_last_checkpoint
from dvengine.log.loader import load_snapshot, replayed_tombstones
from dvengine.log.snapshot import Snapshot
from dvengine.log.tombstone_rows import tombstone_table
from dvengine.protocol.actions import AddFile, DeletionVectorDescriptor, RemoveFile
from dvengine.storage.logstore import LogStore, log_dir, normalize_table_path
from dvengine.storage.registry import storage_for
from dvengine.storage.uris import join

__all__ = [
    "DueCheckpoint",
    "checkpoint_interval",
    "cleanup_expired_logs",
    "due_checkpoint",
    "maybe_checkpoint",
    "parse_interval_ms",
    "write_checkpoint",
    "write_due_checkpoint",
]

DEFAULT_CHECKPOINT_INTERVAL = 10
DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
DICTIONARY_COLUMNS = [
    "remove.path",
    *(f"{action}.partitionValues.key_value.{part}" for action in ("add", "remove") for part in ("key", "value")),
]
CHECKPOINT_WRITE_BATCH = 65_536


def _dv(dv: DeletionVectorDescriptor | None) -> dict[str, Any] | None:
    if dv is None:
        return None
    return {
        "storageType": dv.storage_type,
        "pathOrInlineDv": dv.path_or_inline_dv,
        "offset": dv.offset,
        "sizeInBytes": dv.size_in_bytes,
        "cardinality": dv.cardinality,
        "maxRowIndex": dv.max_row_index,
    }


def _map(values: Any) -> list[tuple[str, str | None]] | None:
    return None if values is None else list(dict(values).items())


def _add_row(add: AddFile) -> dict[str, Any]:
    return {
        "path": add.path,
        "partitionValues": _map(add.partition_values),
        "size": add.size,
        "modificationTime": add.modification_time,
        "dataChange": False,
        "tags": _map(add.tags),
        "deletionVector": _dv(add.deletion_vector),
        "baseRowId": add.base_row_id,
        "defaultRowCommitVersion": add.default_row_commit_version,
        "stats": add.stats,
        "clusteringProvider": add.clustering_provider,  # a column only in clustered tables' checkpoints
    }


def _remove_row(remove: RemoveFile) -> dict[str, Any]:
    return {
        "path": remove.path,
        "deletionTimestamp": remove.deletion_timestamp,
        "dataChange": False,
        "extendedFileMetadata": remove.extended_file_metadata,
        "partitionValues": _map(remove.partition_values),
        "size": remove.size,
        "deletionVector": _dv(remove.deletion_vector),
        "baseRowId": remove.base_row_id,
        "defaultRowCommitVersion": remove.default_row_commit_version,
    }


def _table_rows(snapshot: Snapshot) -> list[dict[str, Any]]:
    p, m = snapshot.protocol, snapshot.metadata
    rows: list[dict[str, Any]] = [
        {
            "protocol": {
                "minReaderVersion": p.min_reader_version,
                "minWriterVersion": p.min_writer_version,
                "readerFeatures": None if p.reader_features is None else list(p.reader_features),
                "writerFeatures": None if p.writer_features is None else list(p.writer_features),
            }
        },
        {
            "metaData": {
                "id": m.id,
                "name": m.name,
                "description": m.description,
                "format": {"provider": m.format.provider, "options": _map(m.format.options)},
                "schemaString": m.schema_string,
                "partitionColumns": list(m.partition_columns),
                "configuration": _map(m.configuration),
                "createdTime": m.created_time,
            }
        },
    ]
    for txn in sorted(snapshot.app_transactions.values(), key=lambda t: t.app_id):
        rows.append({"txn": {"appId": txn.app_id, "version": txn.version, "lastUpdated": txn.last_updated}})
    for dm in sorted(snapshot.domain_metadata.values(), key=lambda d: d.domain):
        rows.append({"domainMetadata": {"domain": dm.domain, "configuration": dm.configuration, "removed": dm.removed}})
    return rows


def _min_kept_ms(snapshot: Snapshot, now_ms: int) -> int:
    """Tombstones deleted at or before this time have expired (``deletedFileRetentionDuration``)."""
    retention = parse_interval_ms(snapshot.configuration.get("delta.deletedFileRetentionDuration", DEFAULT_DELETED_FILE_RETENTION))
    return now_ms - retention


def _unexpired_tombstones(snapshot: Snapshot, now_ms: int) -> list[RemoveFile]:
    min_kept = _min_kept_ms(snapshot, now_ms)
    return [r for r in snapshot.tombstones if (r.deletion_timestamp or 0) > min_kept]


def _tombstones_by_key(snapshot: Snapshot) -> Mapping[str, bytes]:
    """Every tombstone of ``snapshot`` as log replay keeps them (key text -> bytes), unsorted.

    The snapshot cache's entry of this version holds them as its replay state's dict once a
    checkpoint or VACUUM has asked for them; taking that dict skips ``Snapshot.tombstones``, which
    sorts them all (8-10 ms per checkpoint at 11,600 tombstones). Otherwise (the first checkpoint
    of a process, the cache off, an older version) a replay with the checkpoint's removes gives
    them, without making ``RemoveFile`` objects of them.
    """
    entry = snapshot_cache.get(snapshot.table_root) if snapshot_cache.cache_enabled() else None
    if entry is not None and entry.with_tombstones and _same_snapshot(entry.snapshot, snapshot):
        return entry.state.tombstones
    return replayed_tombstones(snapshot)  # it may leave the cache holding them for next time


def _same_snapshot(cached: Snapshot, snapshot: Snapshot) -> bool:
    return cached is snapshot or (
        cached.table_root == snapshot.table_root
        and cached.version == snapshot.version
        and cached.metadata.id == snapshot.metadata.id
        and cached.timestamp_ms == snapshot.timestamp_ms
    )


def split_rows(snapshot: Snapshot, now_ms: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(protocol, metaData, txn and domainMetadata rows; add and unexpired remove rows) of a checkpoint."""
    files: list[dict[str, Any]] = [{"add": _add_row(add)} for add in snapshot.files]
    files.extend({"remove": _remove_row(r)} for r in _unexpired_tombstones(snapshot, now_ms))
    return _table_rows(snapshot), files


def checkpoint_schema_for(snapshot: Snapshot) -> pa.Schema:
    clustered = any(add.clustering_provider is not None for add in snapshot.files)
    return CLUSTERED_CHECKPOINT_SCHEMA if clustered else CHECKPOINT_SCHEMA


def checkpoint_bytes(
    snapshot: Snapshot, now_ms: int | None = None, tombstones: Mapping[str, bytes] | None = None
) -> tuple[bytes, int, int]:
    """(Parquet bytes, number of actions, number of adds) of the checkpoint of ``snapshot``.

    ``tombstones``: every tombstone of ``snapshot`` as replay keeps them, when the caller took them
    already (:func:`due_checkpoint`); otherwise they are looked up here.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    schema = checkpoint_schema_for(snapshot)
    head = _table_rows(snapshot) + [{"add": _add_row(add)} for add in snapshot.files]
    # The removes are encoded incrementally (tombstone_rows): they are most of a stream's
    # checkpoint and mostly the previous checkpoint's.
    by_key = _tombstones_by_key(snapshot) if tombstones is None else tombstones
    removes = tombstone_table(snapshot.table_root, by_key, schema, _min_kept_ms(snapshot, now))
    table = pa.concat_tables([pa.Table.from_pylist(head, schema=schema), removes])
    sink = pa.BufferOutputStream()
    # No column statistics: no reader of a checkpoint needs them to be correct, and computing them
    # was a third of the encoding (11,633 rows: 11.1 -> 7.0 ms, 316 -> 311 KB, median of 15).
    # Dictionaries only where values repeat (a stream's tombstones name the same data file once
    # per DV it had; partition keys and values); the other strings are unique and a dictionary
    # was built for them only to be abandoned. Larger write batches: fewer per-batch calls for
    # the ~50 all-null leaf columns of the remove rows. 48,900 rows: 21.0 -> 17.5 ms, 1.0 -> 1.3 MB.
    pq.write_table(table, sink, compression="snappy", write_statistics=False, use_dictionary=DICTIONARY_COLUMNS,
                   write_batch_size=CHECKPOINT_WRITE_BATCH)
    return sink.getvalue().to_pybytes(), table.num_rows, len(snapshot.files)


def write_checkpoint(
    snapshot: Snapshot,
    store: LogStore | None = None,
    now_ms: int | None = None,
    tombstones: Mapping[str, bytes] | None = None,
) -> str:
    """Write the checkpoint of ``snapshot`` and update ``_last_checkpoint``; return its path.

    ``<version>.checkpoint.parquet`` (classic, V1 spec), or, on a table with the ``v2Checkpoint``
    feature and ``delta.checkpointPolicy=v2``, a UUID-named V2 checkpoint with a sidecar
    (:mod:`dvengine.log.checkpoint_v2`). ``tombstones``: see :func:`checkpoint_bytes`.
    """
    st = storage_for(snapshot.table_root) if store is None else store
    log_path = log_dir(snapshot.table_root)
    if uses_v2_checkpoints(snapshot):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        table_rows, file_rows = split_rows(snapshot, now)
        schema = checkpoint_schema_for(snapshot)
        path, num_actions, size, num_adds = write_v2_checkpoint(snapshot, st, log_path, table_rows, file_rows, schema, now)
        _advance_last_checkpoint(st, log_path, LastCheckpoint(snapshot.version, size=num_actions, size_in_bytes=size,
                                                              num_of_add_files=num_adds))
        return path
    data, num_actions, num_adds = checkpoint_bytes(snapshot, now_ms, tombstones)
    path = join(log_path, checkpoint_file_name(snapshot.version))
    st.write(path, data)  # temp file + rename: atomic, and rewriting the same version is harmless
    _advance_last_checkpoint(st, log_path, LastCheckpoint(snapshot.version, size=num_actions, size_in_bytes=len(data),
                                                          num_of_add_files=num_adds))
    return path


def _advance_last_checkpoint(st: LogStore, log_path: str, hint: LastCheckpoint) -> None:
    """Replace ``_last_checkpoint`` unless it already names a newer version (never moved backwards)."""
    current = read_last_checkpoint(st, log_path)
    if current is None or current.version <= hint.version:
        st.write(last_checkpoint_path(log_path), hint.to_bytes())


def checkpoint_interval(configuration: Any) -> int:
    raw = configuration.get("delta.checkpointInterval", str(DEFAULT_CHECKPOINT_INTERVAL))
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgumentError(f"table property delta.checkpointInterval={raw!r} is not an integer") from None
    if value <= 0:
        raise InvalidArgumentError(f"table property delta.checkpointInterval={raw!r} must be positive")
    return value


@dataclass(frozen=True)
class DueCheckpoint:
    """A checkpoint a commit made due, with everything writing it needs taken at commit time.

    ``snapshot`` and ``tombstones`` are immutable (the snapshot cache never mutates a state it
    handed out), so the checkpoint can be written later, on another thread, while this process
    goes on committing: it still describes exactly ``snapshot.version``.
    """

    snapshot: Snapshot
    tombstones: Mapping[str, bytes] | None  # None: V2 checkpoints, which take the snapshot's own
    cleanup_logs: bool

    @property
    def table_root(self) -> str:
        return self.snapshot.table_root

    @property
    def version(self) -> int:
        return self.snapshot.version


def due_checkpoint(
    table_root: str, version: int, cleanup_logs: bool = True, configuration: Mapping[str, str] | None = None
) -> DueCheckpoint | None:
    """After committing ``version``: the checkpoint it makes due (``version % delta.checkpointInterval
    == 0``), or None. A committer that knows the table properties passes ``configuration``, so the
    nine commits in ten that need no checkpoint do not load the snapshot (~15 ms on a 20-file
    table with a checkpoint).

    Cheap when this process's snapshot cache holds ``version`` with its tombstones (every
    checkpoint of a process after its first): one cache lookup. The first checkpoint of a process
    replays the log with the removes here, in the caller, so that the cache carries the
    tombstones forward from this version on (taken later, the cache may have moved past it).
    """
    if version <= 0:
        return None
    if configuration is not None and version % checkpoint_interval(configuration) != 0:
        return None
    root = normalize_table_path(table_root)
    snapshot = load_snapshot(root, version=version)
    if version % checkpoint_interval(snapshot.configuration) != 0:
        return None
    tombstones = None if uses_v2_checkpoints(snapshot) else _tombstones_by_key(snapshot)
    return DueCheckpoint(snapshot, tombstones, cleanup_logs)


def write_due_checkpoint(due: DueCheckpoint) -> str:
    """Write ``due`` and (like Delta Spark) remove expired log files unless the caller or the
    table disables it; return the checkpoint's path."""
    root = due.table_root
    path = write_checkpoint(due.snapshot, tombstones=due.tombstones)
    snapshot_cache.note_checkpoint(root, due.version)  # no blind commit on a cached snapshot older than it
    if due.cleanup_logs and expired_logs_possible(root, due.snapshot.configuration):
        cleanup_expired_logs(root)
    return path


def maybe_checkpoint(
    table_root: str, version: int, cleanup_logs: bool = True, configuration: Mapping[str, str] | None = None
) -> bool:
    """After committing ``version``: write its checkpoint now when it is due (:func:`due_checkpoint`),
    then remove expired log files; True when a checkpoint was written. The committer's own hook
    goes through :mod:`dvengine.log.background_checkpoints` instead, which writes it off the
    committing thread."""
    due = due_checkpoint(table_root, version, cleanup_logs, configuration)
    if due is None:
        return False
    write_due_checkpoint(due)
    return True


def last_checkpoint_json(table_root: str) -> dict[str, Any] | None:
    """The current ``_last_checkpoint`` content (for tools and tests)."""
    root = normalize_table_path(table_root)
    path = last_checkpoint_path(log_dir(root))
    try:
        loaded: dict[str, Any] = json.loads(storage_for(root).read_bytes(path))
    except FileNotFoundError:
        return None
    return loaded
