"""Tombstones held as atomic values (key text -> marshalled tuple), and their checkpoint column.

Log replay keeps every remove still inside ``delta.deletedFileRetentionDuration`` (7 days by
default), and a stream of small DML retires a few (path, DV) pairs per commit: after 6,000 rounds
of the uniform soak the snapshot cache held 23,600 of them (~4 a round). As ``RemoveFile``
instances (plus their ``DeletionVectorDescriptor``) in a dict keyed by (path, DV id) tuples that
was two objects per tombstone the cyclic garbage collector tracks and walks on every full
collection (41,700 of the 85,000 tracked objects, full collection ~70 ms), and a dict it tracks
too, so each round's copy of it (the snapshot cache never mutates an entry) was walked by the
young collections as well.

Here a tombstone is ``bytes`` (:func:`tombstone_bytes`: the ``marshal`` of a flat tuple of its
fields) under a ``str`` key (:func:`tombstone_key`). Neither is ever tracked, so neither is a dict
holding only them, nor its copies: the collector does not see tombstones at all. They become
``RemoveFile`` again only for callers that ask for the actions (``Snapshot.tombstones``: VACUUM,
V2 checkpoints), and Arrow rows for the classic checkpoint writer (:func:`remove_column`, built
column by column, cheaper than one dict per row through ``pa.Table.from_pylist``). ``marshal``'s
format is private to one Python version, which is fine: the bytes never leave the process.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import pyarrow as pa

from dvengine.log.checkpoint_schema import DELETION_VECTOR, REMOVE, STRING_MAP
from dvengine.protocol.actions import DeletionVectorDescriptor, RemoveFile

__all__ = ["TombstoneRow", "remove_column", "to_remove", "tombstone_bytes", "tombstone_key", "tombstone_row", "tombstone_rows"]

# A map as one flat tuple (key, value, key, value, ...), made from a list: the collector untracks a
# tuple only when its items already are, in allocation order, and a tuple of 2-tuples (or one that
# ``tuple()`` grew from an iterator, which re-allocates it) sits behind them and stays tracked
# for one more collection.
Pairs = tuple[str | None, ...]
# (path, deletionTimestamp, dataChange, extendedFileMetadata, partitionValues, size, stats, tags,
#  dv storageType, dv pathOrInlineDv, dv offset, dv sizeInBytes, dv cardinality, dv maxRowIndex,
#  baseRowId, defaultRowCommitVersion); the DV fields are all None when there is no DV.
TombstoneRow = tuple[
    str, int | None, bool, bool | None, Pairs | None, int | None, str | None, Pairs | None,
    str | None, str | None, int | None, int | None, int | None, int | None, int | None, int | None,
]


def _pairs(values: Mapping[str, str | None] | None) -> Pairs | None:
    return None if values is None else tuple([x for item in values.items() for x in item])


def _mapping(pairs: Pairs) -> dict[str, str | None]:
    return {str(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)}


def tombstone_key(key: tuple[str, str | None]) -> str:
    """The text of a replay key (path, DV unique id); a path holds no NUL, so it is unique, and
    these texts sort as the (path, DV id or "") tuples do."""
    return f"{key[0]}\x00{key[1] or ''}"


def tombstone_bytes(remove: RemoveFile) -> bytes:
    """``remove`` as the atomic value the replay state keeps."""
    return marshal.dumps(tombstone_row(remove))


def tombstone_rows(values: Iterable[bytes]) -> list[TombstoneRow]:
    return [cast(TombstoneRow, marshal.loads(v)) for v in values]


def tombstone_row(remove: RemoveFile) -> TombstoneRow:
    """``remove`` as a flat tuple (nothing in it is tracked by the garbage collector)."""
    dv = remove.deletion_vector
    return (
        remove.path, remove.deletion_timestamp, remove.data_change, remove.extended_file_metadata,
        _pairs(remove.partition_values), remove.size, remove.stats, _pairs(remove.tags),
        None if dv is None else dv.storage_type, None if dv is None else dv.path_or_inline_dv,
        None if dv is None else dv.offset, None if dv is None else dv.size_in_bytes,
        None if dv is None else dv.cardinality, None if dv is None else dv.max_row_index,
        remove.base_row_id, remove.default_row_commit_version,
    )


def to_remove(row: TombstoneRow) -> RemoveFile:
    """The ``RemoveFile`` a row was made from (equal to it, not the same object)."""
    (path, ts, data_change, extended, pvs, size, stats, tags,
     storage, dv_path, offset, dv_size, cardinality, max_row, base_row_id, row_commit_version) = row
    dv = None
    if storage is not None:
        assert dv_path is not None and dv_size is not None and cardinality is not None
        dv = DeletionVectorDescriptor(storage, dv_path, dv_size, cardinality, offset, max_row)
    return RemoveFile(
        path=path, deletion_timestamp=ts, data_change=data_change, extended_file_metadata=extended,
        partition_values=None if pvs is None else _mapping(pvs), size=size, stats=stats,
        tags=None if tags is None else _mapping(tags), deletion_vector=dv,
        base_row_id=base_row_id, default_row_commit_version=row_commit_version,
    )


def remove_column(rows: Sequence[TombstoneRow]) -> pa.StructArray:
    """The checkpoint ``remove`` struct (schema ``REMOVE``) of ``rows``, built column by column.

    Every row is a non-null remove written with ``dataChange=false`` (a checkpoint changes no
    data), as Delta Spark writes them.
    """
    n = len(rows)
    if n == 0:
        return pa.array([], REMOVE)
    (paths, stamps, _changes, extended, pvs, sizes, _stats, _tags,
     storage, dv_paths, offsets, dv_sizes, cardinalities, max_rows, base_row_ids, row_commit_versions) = zip(*rows)
    dv_fields: list[pa.Array] = [
        pa.array(storage, DELETION_VECTOR.field("storageType").type),
        pa.array(dv_paths, DELETION_VECTOR.field("pathOrInlineDv").type),
        pa.array(offsets, DELETION_VECTOR.field("offset").type),
        pa.array(dv_sizes, DELETION_VECTOR.field("sizeInBytes").type),
        pa.array(cardinalities, DELETION_VECTOR.field("cardinality").type),
        pa.array(max_rows, DELETION_VECTOR.field("maxRowIndex").type),
    ]
    no_dv = pa.array([s is None for s in storage], pa.bool_())
    dv = pa.StructArray.from_arrays(dv_fields, fields=list(DELETION_VECTOR), mask=no_dv)
    pv_values: list[Any] = [None if p is None else list(zip(p[::2], p[1::2], strict=True)) for p in pvs]
    columns: list[pa.Array] = [
        pa.array(paths, pa.string()),
        pa.array(stamps, pa.int64()),
        pa.array([False] * n, pa.bool_()),
        pa.array(extended, pa.bool_()),
        pa.array(pv_values, STRING_MAP),
        pa.array(sizes, pa.int64()),
        dv,
        pa.array(base_row_ids, pa.int64()),
        pa.array(row_commit_versions, pa.int64()),
    ]
    return pa.StructArray.from_arrays(columns, fields=list(REMOVE))
