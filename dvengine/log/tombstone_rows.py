"""The ``remove`` rows of a classic checkpoint, encoded to Arrow once per tombstone per process.

A checkpoint carries every tombstone still inside ``delta.deletedFileRetentionDuration`` (7 days
by default). A stream of small DML retires a few (path, DV) pairs per commit, so after 2,000
rounds of the growing-key soak a checkpoint held 11,600 removes (tens of thousands at 10,000
rounds). Encoding them all (action -> Python dict -> ``pa.Table.from_pylist``) cost 112 ms per
checkpoint at 11,600 rows; the tombstones of one checkpoint are mostly those of the previous one.
So this process keeps, per table, the rows it last encoded with the tombstones they encode (keyed
by the text of (path, DV id), as log replay keeps them), and a checkpoint encodes only the tombstones it has
not seen and drops the rows of those that left (re-added) with one vectorized ``is_in`` filter.

The previous version matched tombstones by object identity over a sorted tuple, which cost a sort
of every tombstone (``Snapshot.tombstones``: 8-10 ms at 11,600) plus three Python passes (5.6-6.7
ms) per checkpoint. Now the caller hands over the replay state's own map (no sort) and values are
compared by identity (the snapshot cache carries the same tombstone tuples forward, and they are
immutable, so the same object means the same row; a tombstone re-created by a fresh replay is a
new object and is simply encoded again): only over the keys in the two maps' overlays when both
are ``TombstoneMap`` copies of one base (``changed_keys``: a checkpoint of the table left by
10,000 soak rounds, 41,458 tombstones, spent ~10 ms less on its thread), else in one pass over
every tombstone; expiry is a filter on the cached
``deletionTimestamp`` column. Expired rows stay cached (the tombstones are still in the replay
state), so a later checkpoint with a longer retention or an earlier clock gets them back.

The tombstones are the replay state's flat tuples (:mod:`dvengine.log.tombstones`), encoded
column by column (``remove_column``): the first checkpoint of a process encodes every unexpired
tombstone, ~36,000 after 10,000 soak rounds, where one dict per row through
``pa.Table.from_pylist`` cost ~10 us a row.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.log.tombstone_map import TombstoneMap, changed_keys, flat_tombstones
from dvengine.log.tombstones import TombstoneRow, remove_column, tombstone_rows

# Tables whose encoded tombstones are kept at once (a few MB each at tens of thousands of rows).
MAX_TABLES = 16
# Appending each checkpoint's new rows adds a chunk; past this many they are combined (a copy).
MAX_CHUNKS = 32


@dataclass(frozen=True)
class _Encoded:
    """Rows of ``table`` encode ``objects``, one row per entry; ``keys`` and ``timestamps`` are
    row-aligned columns of the key text and ``deletionTimestamp`` (null as 0)."""

    schema: pa.Schema
    objects: Mapping[str, bytes]
    table: pa.Table
    keys: pa.ChunkedArray
    timestamps: pa.ChunkedArray


_LOCK = threading.Lock()
_CACHE: OrderedDict[str, _Encoded] = OrderedDict()


def remove_rows_table(rows: list[TombstoneRow], schema: pa.Schema) -> pa.Table:
    """Checkpoint rows of ``schema`` with ``remove`` set to ``rows`` and every other column null."""
    n = len(rows)
    columns = [remove_column(rows) if f.name == "remove" else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _encode(items: list[tuple[str, bytes]], schema: pa.Schema) -> tuple[pa.Table, pa.ChunkedArray, pa.ChunkedArray]:
    rows = tombstone_rows(v for _, v in items)
    table = remove_rows_table(rows, schema)
    keys = pa.chunked_array([pa.array([k for k, _ in items], pa.string())])
    stamps = pa.chunked_array([pa.array([r[1] or 0 for r in rows], pa.int64())])
    return table, keys, stamps


def _updated(
    previous: _Encoded,
    tombstones: Mapping[str, bytes],
    schema: pa.Schema,
) -> _Encoded:
    new, gone = _difference(previous.objects, tombstones)
    table, keys, stamps = previous.table, previous.keys, previous.timestamps
    if gone:
        keep = pc.invert(pc.is_in(keys, value_set=pa.array(gone, pa.string())))
        table, keys, stamps = table.filter(keep), keys.filter(keep), stamps.filter(keep)
    if new:
        added, added_keys, added_stamps = _encode(new, schema)
        table = pa.concat_tables([table, added])
        keys = pa.chunked_array(keys.chunks + added_keys.chunks, pa.string())
        stamps = pa.chunked_array(stamps.chunks + added_stamps.chunks, pa.int64())
        if table.column("remove").num_chunks > MAX_CHUNKS:  # one chunk per checkpoint otherwise
            table, keys, stamps = table.combine_chunks(), keys.combine_chunks(), stamps.combine_chunks()
            keys, stamps = pa.chunked_array([keys]), pa.chunked_array([stamps])
    return _Encoded(schema, tombstones, table, keys, stamps)


def _difference(old: Mapping[str, bytes], current: Mapping[str, bytes]) -> tuple[list[tuple[str, bytes]], list[str]]:
    """(tombstones of ``current`` to encode, keys whose rows of ``old`` must go): a tombstone whose
    object is the same in both keeps its row; one whose key is new or holds another object is
    encoded (its old row, if any, goes); a key only in ``old`` goes."""
    candidates = changed_keys(old, current)
    if candidates is not None:  # two copies of one base: only their overlays can differ
        was, now = old.get, current.get
        new = []
        gone = []
        for key in candidates:
            before, after = was(key), now(key)
            if before is after:
                continue
            if before is not None:
                gone.append(key)
            if after is not None:
                new.append((key, after))
        return new, gone
    seen = old.get
    new = [(k, r) for k, r in current.items() if seen(k) is not r]
    gone = [k for k, _ in new if k in old]  # the same key, another remove: re-encoded
    if len(old) > len(current) - len(new) + len(gone):  # some key left (re-added)
        gone += old.keys() - current.keys()
    return new, gone


def _kept(tombstones: Mapping[str, bytes]) -> Mapping[str, bytes]:
    """What the cache keeps of a caller's tombstones: a :class:`TombstoneMap` as it is (the snapshot
    cache's maps are never changed once handed out, and keeping the object itself lets the next
    checkpoint's map of the same base be diffed by overlays; a copy could fold and lose that);
    anything else flattened into a new dict the caller cannot change."""
    return tombstones if isinstance(tombstones, TombstoneMap) else flat_tombstones(tombstones)


def tombstone_table(
    table_root: str,
    tombstones: Mapping[str, bytes],
    schema: pa.Schema,
    min_kept_ms: int,
) -> pa.Table:
    """The ``tombstones`` (replay state's key text -> bytes, :mod:`dvengine.log.tombstones`) deleted after ``min_kept_ms`` as checkpoint rows of
    ``schema`` (``remove`` set, every other action column null), in no particular order, reusing
    this process's rows of the table's last call. A :class:`TombstoneMap` passed here must not be
    changed afterwards (it is kept, not copied): the snapshot cache's never are."""
    kept = _kept(tombstones)
    with _LOCK:
        previous = _CACHE.get(table_root)
    if previous is None or not previous.schema.equals(schema):
        encoded = _Encoded(schema, kept, *_encode(list(kept.items()), schema))
    else:
        encoded = _updated(previous, kept, schema)
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
