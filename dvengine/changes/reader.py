"""The change data feed of a version range, computed from the log as Delta Spark's CDCReader does.

Per commit (PROTOCOL.md "Add CDC File"): a version with ``cdc`` actions is read from those files
only (their ``_change_type`` column says what each row is). A version without them is derived
from its ``add``/``remove`` actions with ``dataChange: true``: a removed file's live rows are
``delete`` rows, an added file's live rows ``insert`` rows, and a file removed and re-added with
another deletion vector contributes the rows its new DV deletes as ``delete`` (and any its old
DV deleted that the new one does not as ``insert``), which is how DV-only DELETEs (ours and
other writers') are read; a MERGE whose metrics report no changed row reads as no change (Delta's
hotfix for MERGEs that rewrote files without changing them). Every row gets ``_commit_version``
and ``_commit_timestamp``. Rows are shaped by the schema of the range's last version; metadata
changes inside the range are only checked for the feed being enabled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvengine.dv import load_deletion_vector
from dvengine.errors import InvalidArgumentError
from dvengine.log import Snapshot, latest_version, load_snapshot, read_commit_actions
from dvengine.log.filenames import commit_file_name
from dvengine.log.timestamps import commit_info_timestamp, to_epoch_ms
from dvengine.protocol.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    Metadata,
    RemoveFile,
)
from dvengine.protocol.features import change_data_feed_enabled
from dvengine.protocol.schema import conform_table, to_arrow_field
from dvengine.read import open_data_file, read_physical_rows
from dvengine.storage import join, log_dir, resolve_data_path, storage_for
from dvengine.writing.files import HIVE_DEFAULT_PARTITION

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
TimestampArg = int | dt.datetime | dt.date | str


def change_schema(snapshot: Snapshot) -> pa.Schema:
    """The feed's columns: the table's, then ``_change_type``, ``_commit_version``, ``_commit_timestamp``."""
    fields = [to_arrow_field(f).with_nullable(True) for f in snapshot.schema.fields]
    return pa.schema(
        [*fields, pa.field(CHANGE_TYPE, pa.string()), pa.field(COMMIT_VERSION, pa.int64()),
         pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"))]
    )


def _as_add(path: str, partition_values: Mapping[str, str | None], dv: DeletionVectorDescriptor | None) -> AddFile:
    """A removed file in the shape the Arrow reader takes (only path, partitions and DV matter)."""
    return AddFile(path=path, partition_values=dict(partition_values), size=0, modification_time=0, deletion_vector=dv)


def _rows_at(snapshot: Snapshot, add: AddFile, positions: np.ndarray) -> pa.Table:
    parquet = open_data_file(snapshot, add)
    return read_physical_rows(snapshot, add, None, parquet).take(pa.array(positions, pa.int64()))


def _dv_rows(snapshot: Snapshot, add: AddFile, num_rows: int) -> BitMap64:
    if add.deletion_vector is None:
        return BitMap64()
    return load_deletion_vector(snapshot.table_root, add.deletion_vector, num_records=num_rows)


def _live_positions(snapshot: Snapshot, add: AddFile) -> tuple[np.ndarray, int]:
    num_rows = open_data_file(snapshot, add).metadata.num_rows
    keep = np.ones(num_rows, dtype=bool)
    dead = _dv_rows(snapshot, add, num_rows)
    if len(dead):
        keep[np.asarray(dead.to_array(), dtype=np.int64)] = False
    return np.flatnonzero(keep), num_rows


def _tag(rows: pa.Table, change_type: str) -> pa.Table:
    return rows.append_column(CHANGE_TYPE, pa.array([change_type] * rows.num_rows, pa.string()))


def _from_cdc_files(snapshot: Snapshot, files: Sequence[AddCDCFile]) -> list[pa.Table]:
    out = []
    for cdc in files:
        as_add = AddFile(path=cdc.path, partition_values=dict(cdc.partition_values), size=cdc.size, modification_time=0)
        rows = read_physical_rows(snapshot, as_add)
        path = resolve_data_path(snapshot.table_root, cdc.path)
        types = pq.read_table(storage_for(path).parquet_source(path), columns=[CHANGE_TYPE]).column(0)
        out.append(rows.append_column(CHANGE_TYPE, types.cast(pa.string())))
    return out


def _from_file_actions(snapshot: Snapshot, actions: Sequence[Action]) -> list[pa.Table]:
    """Changes of a version without cdc actions, derived from its data-changing adds and removes."""
    removed = {a.path: a for a in actions if isinstance(a, RemoveFile) and a.data_change}
    added = [a for a in actions if isinstance(a, AddFile) and a.data_change]
    out: list[pa.Table] = []
    for add in added:
        old = removed.pop(add.path, None)
        if old is None:
            positions, _ = _live_positions(snapshot, add)
            out.append(_tag(_rows_at(snapshot, add, positions), "insert"))
            continue
        num_rows = open_data_file(snapshot, add).metadata.num_rows
        before = _dv_rows(snapshot, _as_add(old.path, add.partition_values, old.deletion_vector), num_rows)
        after = _dv_rows(snapshot, add, num_rows)
        newly_deleted = np.asarray((after - before).to_array(), dtype=np.int64)
        restored = np.asarray((before - after).to_array(), dtype=np.int64)
        if len(newly_deleted):
            out.append(_tag(_rows_at(snapshot, add, newly_deleted), "delete"))
        if len(restored):
            out.append(_tag(_rows_at(snapshot, add, restored), "insert"))
    for remove in removed.values():
        partition_values = remove.partition_values
        if partition_values is None:
            partition_values = _folder_partition_values(remove.path)
        as_add = _as_add(remove.path, partition_values, remove.deletion_vector)
        positions, _ = _live_positions(snapshot, as_add)
        out.append(_tag(_rows_at(snapshot, as_add, positions), "delete"))
    return out


_MERGE_CHANGE_METRICS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")


def _no_op_merge(actions: Sequence[Action]) -> bool:
    """A MERGE commit whose metrics say it inserted, updated and deleted no row: its file actions are
    not read as changes. Older Delta Spark MERGEs could rewrite files (``dataChange: true``, no
    ``cdc`` files) without changing a row, and Delta's CDCReader (``shouldSkipFileActionsInCommit``)
    serves nothing for such a version instead of every copied row as ``delete`` + ``insert``; so
    does this reader. A missing metric keeps the version read as usual, as in Delta."""
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    if info is None or info.operation != "MERGE":
        return False
    metrics = info.values.get("operationMetrics")
    if not isinstance(metrics, Mapping):
        return False
    return all(k in metrics and str(metrics[k]) == "0" for k in _MERGE_CHANGE_METRICS)


def _folder_partition_values(path: str) -> dict[str, str | None]:
    """Partition values of a removed file whose ``remove`` omits them (legacy writers): its folder names.

    The log's path is a URI (``k=p%252Fq``): it is decoded to the folder names first, then each
    name's Hive escaping (``k=p%2Fq`` -> ``p/q``); a ``/`` inside a value is escaped in the folder
    name, so splitting the decoded path on ``/`` keeps values whole."""
    values: dict[str, str | None] = {}
    for part in unquote(path).split("/")[:-1]:
        key, sep, value = part.partition("=")
        if sep:
            values[unquote(key)] = None if value == HIVE_DEFAULT_PARTITION else unquote(value)
    return values


def _version_range(table_root: str, latest: int, start: int | None, end: int | None,
                   start_ts: TimestampArg | None, end_ts: TimestampArg | None) -> tuple[int, int]:
    if start is None and start_ts is None:
        raise InvalidArgumentError("reading the change data feed needs startingVersion or startingTimestamp")
    if start is not None and start_ts is not None:
        raise InvalidArgumentError("pass either startingVersion or startingTimestamp, not both")
    if end is not None and end_ts is not None:
        raise InvalidArgumentError("pass either endingVersion or endingTimestamp, not both")
    for name, value in (("startingVersion", start), ("endingVersion", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
        if value is not None and value < 0:
            raise InvalidArgumentError(f"{name} must be >= 0, got {value}")
    if start_ts is not None or end_ts is not None:
        times = {v: _commit_time(table_root, v) for v in range(latest + 1) if _has_commit(table_root, v)}
        if start_ts is not None:
            ts = to_epoch_ms(start_ts)
            later = [v for v, t in times.items() if t >= ts]
            if not later:
                raise InvalidArgumentError(f"startingTimestamp {start_ts!r} is after the latest commit (version {latest})")
            start = min(later)
        if end_ts is not None:
            ts = to_epoch_ms(end_ts)
            earlier = [v for v, t in times.items() if t <= ts]
            if not earlier:
                raise InvalidArgumentError(f"endingTimestamp {end_ts!r} is before the first commit")
            end = max(earlier)
    assert start is not None
    if start > latest:
        raise InvalidArgumentError(f"startingVersion {start} is after the latest version {latest} of {table_root}")
    end = latest if end is None else min(end, latest)
    if end < start:
        raise InvalidArgumentError(f"endingVersion {end} is before startingVersion {start}")
    return start, end


def _commit_path(table_root: str, version: int) -> str:
    return join(log_dir(table_root), commit_file_name(version))


def _has_commit(table_root: str, version: int) -> bool:
    return storage_for(table_root).exists(_commit_path(table_root, version))


def _commit_time(table_root: str, version: int, actions: Sequence[Action] | None = None) -> int:
    """The commit's time as time travel sees it (see spec_notes/change-data-feed.md)."""
    if actions is None:
        actions = read_commit_actions(table_root, version)
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    path = _commit_path(table_root, version)
    return commit_info_timestamp(info, storage_for(path).head(path).modification_time_ms)


def read_changes(
    table_root: str,
    starting_version: int | None = None,
    ending_version: int | None = None,
    starting_timestamp: TimestampArg | None = None,
    ending_timestamp: TimestampArg | None = None,
) -> pa.Table:
    """Change rows of the versions from ``starting_*`` to ``ending_*`` (inclusive; default: latest)."""
    latest = latest_version(table_root)
    start, end = _version_range(table_root, latest, starting_version, ending_version, starting_timestamp, ending_timestamp)
    snapshot = load_snapshot(table_root, end)
    schema = change_schema(snapshot)
    enabled = change_data_feed_enabled(load_snapshot(table_root, start).metadata) if start > 0 else False
    tables: list[pa.Table] = []
    for version in range(start, end + 1):
        actions = read_commit_actions(table_root, version)
        for metadata in (a for a in actions if isinstance(a, Metadata)):
            enabled = change_data_feed_enabled(metadata)
        cdc = [a for a in actions if isinstance(a, AddCDCFile)]
        if cdc:
            changes = _from_cdc_files(snapshot, cdc)
        else:
            changes = [] if _no_op_merge(actions) else _from_file_actions(snapshot, actions)
        changes = [t for t in changes if t.num_rows]
        if changes and not enabled:
            raise InvalidArgumentError(
                f"the change data feed of {table_root} is not enabled at version {version} "
                "(delta.enableChangeDataFeed); changes before it was enabled cannot be read"
            )
        when = pa.scalar(_commit_time(table_root, version, actions) * 1000, pa.timestamp("us", tz="UTC"))
        for t in changes:
            t = t.append_column(COMMIT_VERSION, pa.array([version] * t.num_rows, pa.int64()))
            t = t.append_column(COMMIT_TIMESTAMP, pa.array([when.value] * t.num_rows, pa.timestamp("us", tz="UTC")))
            tables.append(conform_table(t.select(schema.names), schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()
