"""The ``remove`` rows of a classic checkpoint, encoded to Arrow once per tombstone per process.

A checkpoint carries every tombstone still inside ``delta.deletedFileRetentionDuration`` (7 days
by default). A stream of small DML retires a few (path, DV) pairs per commit, so after 2,000
rounds of the growing-key soak a checkpoint held 11,600 removes (tens of thousands at 10,000
rounds). Encoding them all (action -> Python dict -> ``pa.Table.from_pylist``) cost 112 ms per
checkpoint at 11,600 rows; the tombstones of one checkpoint are mostly those of the previous one.
So this process keeps, per table, the rows it last encoded with the tombstones they encode (keyed
by (path, DV id), as log replay keys them), and a checkpoint encodes only the tombstones it has
not seen and drops the rows of those that left (re-added) with one vectorized ``is_in`` filter.

The previous version matched tombstones by object identity over a sorted tuple, which cost a sort
of every tombstone (``Snapshot.tombstones``: 8-10 ms at 11,600) plus three Python passes (5.6-6.7
ms) per checkpoint. Now the caller hands over the replay state's own dict (no sort), one pass
compares values by identity (the snapshot cache carries the same ``RemoveFile`` objects forward,
and actions are frozen, so the same object means the same row; a tombstone re-created by a fresh
replay is a new object and is simply encoded again), and expiry is a filter on the cached
``deletionTimestamp`` column. Expired rows stay cached (the tombstones are still in the replay
state), so a later checkpoint with a longer retention or an earlier clock gets them back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.protocol.actions import RemoveFile

FileKey = tuple[str, str | None]

# Tables whose encoded tombstones are kept at once (a few MB each at tens of thousands of rows).
MAX_TABLES = 16
# Appending each checkpoint's new rows adds a chunk; past this many they are combined (a copy).
MAX_CHUNKS = 32


@dataclass(frozen=True)
class _Encoded:
    """Rows of ``table`` encode ``objects``, one row per entry; ``keys`` and ``timestamps`` are
    row-aligned columns of the key text and ``deletionTimestamp`` (null as 0)."""

    schema: pa.Schema
    objects: Mapping[FileKey, RemoveFile]
    table: pa.Table
    keys: pa.ChunkedArray
    timestamps: pa.ChunkedArray


_LOCK = threading.Lock()
_CACHE: OrderedDict[str, _Encoded] = OrderedDict()


def _key_text(key: FileKey) -> str:
    return f"{key[0]}\x00{key[1] or ''}"  # a path holds no NUL


def _encode(
    items: list[tuple[FileKey, RemoveFile]], schema: pa.Schema, to_row: Callable[[RemoveFile], dict[str, Any]]
) -> tuple[pa.Table, pa.ChunkedArray, pa.ChunkedArray]:
    table = pa.Table.from_pylist([{"remove": to_row(r)} for _, r in items], schema=schema)
    keys = pa.chunked_array([pa.array([_key_text(k) for k, _ in items], pa.string())])
    stamps = pa.chunked_array([pa.array([r.deletion_timestamp or 0 for _, r in items], pa.int64())])
    return table, keys, stamps


def _updated(
    previous: _Encoded,
    tombstones: Mapping[FileKey, RemoveFile],
    schema: pa.Schema,
    to_row: Callable[[RemoveFile], dict[str, Any]],
) -> _Encoded:
    seen = previous.objects.get
    new = [(k, r) for k, r in tombstones.items() if seen(k) is not r]
    gone = [k for k in previous.objects.keys() - tombstones.keys()]
    gone += [k for k, _ in new if k in previous.objects]  # the same key, another remove: re-encoded
    table, keys, stamps = previous.table, previous.keys, previous.timestamps
    if gone:
        keep = pc.invert(pc.is_in(keys, value_set=pa.array([_key_text(k) for k in gone], pa.string())))
        table, keys, stamps = table.filter(keep), keys.filter(keep), stamps.filter(keep)
    if new:
        added, added_keys, added_stamps = _encode(new, schema, to_row)
        table = pa.concat_tables([table, added])
        keys = pa.chunked_array(keys.chunks + added_keys.chunks, pa.string())
        stamps = pa.chunked_array(stamps.chunks + added_stamps.chunks, pa.int64())
        if table.column("remove").num_chunks > MAX_CHUNKS:  # one chunk per checkpoint otherwise
            table, keys, stamps = table.combine_chunks(), keys.combine_chunks(), stamps.combine_chunks()
            keys, stamps = pa.chunked_array([keys]), pa.chunked_array([stamps])
    return _Encoded(schema, dict(tombstones), table, keys, stamps)


def tombstone_table(
    table_root: str,
    tombstones: Mapping[FileKey, RemoveFile],
    schema: pa.Schema,
    to_row: Callable[[RemoveFile], dict[str, Any]],
    min_kept_ms: int,
) -> pa.Table:
    """The ``tombstones`` (by replay key) deleted after ``min_kept_ms`` as checkpoint rows of
    ``schema`` (``remove`` set, every other action column null), in no particular order, reusing
    this process's rows of the table's last call."""
    with _LOCK:
        previous = _CACHE.get(table_root)
    if previous is None or not previous.schema.equals(schema):
        items = list(tombstones.items())
        encoded = _Encoded(schema, dict(tombstones), *_encode(items, schema, to_row))
    else:
        encoded = _updated(previous, tombstones, schema, to_row)
    with _LOCK:
        _CACHE[table_root] = encoded
        _CACHE.move_to_end(table_root)
        while len(_CACHE) > MAX_TABLES:
            _CACHE.popitem(last=False)
    if encoded.table.num_rows == 0:
        return encoded.table
    oldest = pc.min(encoded.timestamps).as_py()
    if oldest is not None and oldest > min_kept_ms:
        return encoded.table  # nothing expired: the common case, no copy
    return encoded.table.filter(pc.greater(encoded.timestamps, min_kept_ms))


def clear_tombstone_rows() -> None:
    """Forget every table's encoded rows (tests; memory)."""
    with _LOCK:
        _CACHE.clear()
