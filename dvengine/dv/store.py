"""Reading and writing deletion vectors through the storage layer: the DV codec's I/O edge.

Everything here is a top-level function of plain, picklable arguments because the Spark engine
calls it on executors (``mapPartitions`` / ``applyInPandas``). Reads fetch only the bytes of
the requested DV (version byte + one frame), not the whole file, since a file may pack many DVs.

Every read is validated end to end (version, size, CRC, magic, Roaring structure, cardinality,
row bound) because a wrong DV silently resurrects or hides rows: failing loudly is the only
safe behaviour.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from pyroaring import BitMap64, FrozenBitMap64

from dvengine.dv.bitmap import deserialize_bitmap, serialize_bitmap
from dvengine.dv.descriptor import absolute_dv_path, inline_descriptor_from_serialized, new_dv_file_id
from dvengine.dv.dvfile import DVFileWriter, check_descriptor_range, check_dv_record, check_version_byte
from dvengine.dv.z85 import z85_decode
from dvengine.errors import DeletionVectorError
from dvengine.protocol.actions import STORAGE_UUID, DeletionVectorDescriptor
from dvengine.storage.registry import storage_for
from dvengine.storage.uris import join

# A descriptor of a file DV without an offset means the first (only) DV: right after the version byte.
_DEFAULT_OFFSET = 1
# Frames starting this close to the file's head are read with the version byte in one request
# (a round trip on an object store costs more than reading a few KiB more).
_ONE_REQUEST_PREFIX = 64 * 1024


# Decoded inline DVs, keyed by their whole text (plus size and cardinality): the text is the
# bitmap, so a hit is exactly what decoding would return. It serves writers on one hot file,
# which decode the same few DVs again and again: a winner's DV in the commit race
# (commit/rebase.py), then as the file's DV in the next command's scan; the DV a command encodes
# inline itself (seeded by encode_deletion_vectors), when a rebase starts from it. 27 us per
# decode of an 840-byte DV vs ~1 us for a copy (spec_notes/isolation-and-concurrency.md).
# Only validated bitmaps are stored; callers get a mutable copy. Bounded: inline DVs are small.
_INLINE_MEMO_ENTRIES = 64
_INLINE_MEMO: OrderedDict[tuple[str, int, int], FrozenBitMap64] = OrderedDict()
_INLINE_MEMO_LOCK = threading.Lock()


def _inline_key(dv: DeletionVectorDescriptor) -> tuple[str, int, int]:
    return (dv.path_or_inline_dv, dv.size_in_bytes, dv.cardinality)


def _remember_inline(key: tuple[str, int, int], rows: BitMap64) -> None:
    with _INLINE_MEMO_LOCK:
        _INLINE_MEMO[key] = FrozenBitMap64(rows)
        _INLINE_MEMO.move_to_end(key)
        while len(_INLINE_MEMO) > _INLINE_MEMO_ENTRIES:
            _INLINE_MEMO.popitem(last=False)


def _decoded_inline(key: tuple[str, int, int]) -> BitMap64 | None:
    with _INLINE_MEMO_LOCK:
        found = _INLINE_MEMO.get(key)
        if found is None:
            return None
        _INLINE_MEMO.move_to_end(key)
    return BitMap64(found)


def _read_serialized(table_root: str, dv: DeletionVectorDescriptor) -> tuple[bytes, str]:
    """The serialized bitmap of ``dv`` and a human-readable location for error messages."""
    if dv.is_inline:
        where = f"inline deletion vector {dv.path_or_inline_dv[:40]!r}"
        try:
            return z85_decode(dv.path_or_inline_dv, dv.size_in_bytes), where
        except DeletionVectorError as exc:
            raise DeletionVectorError(f"{where} with sizeInBytes {dv.size_in_bytes}: {exc}") from exc
    path = absolute_dv_path(table_root, dv)
    offset = _DEFAULT_OFFSET if dv.offset is None else dv.offset
    check_descriptor_range(offset, dv.size_in_bytes, path)
    storage = storage_for(path)
    try:
        if offset <= _ONE_REQUEST_PREFIX:  # one ranged read covers the version byte and the frame
            head = storage.read_range(path, 0, offset + dv.size_in_bytes + 8)
            first, record = head[:1], head[offset:]
        else:
            first = storage.read_range(path, 0, 1)
            record = storage.read_range(path, offset, dv.size_in_bytes + 8)
        check_version_byte(first, path)
    except FileNotFoundError:
        raise DeletionVectorError(
            f"deletion vector file {path} (descriptor {dv.unique_id}) does not exist; the table is missing a DV file"
        ) from None
    return check_dv_record(record, offset, dv.size_in_bytes, path), f"deletion vector file {path} at offset {offset}"


def load_deletion_vector(table_root: str, dv: DeletionVectorDescriptor, num_records: int | None = None) -> BitMap64:
    """The deleted row indexes of one DV, fully validated.

    Raises :class:`DeletionVectorError` for a missing file, wrong version byte, size mismatch,
    CRC mismatch, wrong magic or malformed bitmap, a cardinality different from the descriptor's,
    or (when ``num_records``, the data file's physical row count, is given) a row index
    >= ``num_records``.
    """
    key = _inline_key(dv) if dv.is_inline else None
    rows = None if key is None else _decoded_inline(key)
    if rows is not None:
        where = f"inline deletion vector {dv.path_or_inline_dv[:40]!r}"
    else:
        serialized, where = _read_serialized(table_root, dv)
        try:
            rows = deserialize_bitmap(serialized)
        except DeletionVectorError as exc:
            raise DeletionVectorError(f"{where}: {exc}") from exc
        if len(rows) != dv.cardinality:
            raise DeletionVectorError(
                f"{where}: descriptor says cardinality {dv.cardinality} but the bitmap holds {len(rows)} rows"
            )
        if key is not None:
            _remember_inline(key, rows)
    if num_records is not None and rows and rows.max() >= num_records:
        raise DeletionVectorError(
            f"{where}: deletes row index {rows.max()} but the data file has only {num_records} rows (numRecords)"
        )
    return rows


def _serialize_non_empty(bitmaps: Sequence[BitMap64]) -> list[bytes]:
    out = []
    for i, rows in enumerate(bitmaps):
        if not rows:
            raise DeletionVectorError(
                f"bitmap #{i} is empty; an empty deletion vector must not be written (omit the DV instead)"
            )
        out.append(serialize_bitmap(rows))
    return out


def _write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see either nothing or the whole file."""
    storage_for(path).put_new(path, data)


def _write_serialized(
    table_root: str,
    serialized: Sequence[bytes],
    cardinalities: Sequence[int],
    random_prefix_len: int,
    file_id: tuple[str, str] | None = None,
    sink: Callable[[str, bytes], None] = _write_atomically,
) -> list[DeletionVectorDescriptor]:
    path_or_inline_dv, relative = file_id if file_id is not None else new_dv_file_id(random_prefix_len)
    writer = DVFileWriter()
    descriptors = []
    for payload, cardinality in zip(serialized, cardinalities, strict=True):
        offset, size = writer.add(payload)
        descriptors.append(
            DeletionVectorDescriptor(
                storage_type=STORAGE_UUID,
                path_or_inline_dv=path_or_inline_dv,
                size_in_bytes=size,
                cardinality=cardinality,
                offset=offset,
            )
        )
    sink(join(table_root, relative), writer.to_bytes())
    return descriptors


def write_dv_file(
    table_root: str, bitmaps: Sequence[BitMap64], random_prefix_len: int = 0
) -> list[DeletionVectorDescriptor]:
    """Write ONE new DV file holding all ``bitmaps``; return a ``"u"`` descriptor per bitmap.

    Descriptors come back in input order with their offset, sizeInBytes and cardinality.
    Empty bitmaps raise :class:`DeletionVectorError`; an empty input writes nothing.
    """
    if not bitmaps:
        return []
    serialized = _serialize_non_empty(bitmaps)
    return _write_serialized(table_root, serialized, [len(b) for b in bitmaps], random_prefix_len)


def encode_deletion_vectors(
    table_root: str,
    bitmaps: Sequence[BitMap64],
    inline_max_bytes: int,
    random_prefix_len: int = 0,
    file_id: tuple[str, str] | None = None,
    sink: Callable[[str, bytes], None] = _write_atomically,
) -> list[DeletionVectorDescriptor]:
    """A descriptor per bitmap: inline when its serialized size is <= ``inline_max_bytes``,
    otherwise stored in one DV file shared by all non-inline bitmaps of this call.

    No file is written when every bitmap is inline. Use ``inline_max_bytes < 0`` to never inline.
    ``file_id`` (from :func:`new_dv_file_id`) names the DV file in advance, so a caller that may
    have to clean up after a failed job knows every path a task could have written. ``sink``
    receives (path, bytes) of the DV file instead of the storage layer: Spark tasks on tables
    reached through Hadoop hand the bytes to the JVM to write (``engine.spark.jvm_files``).
    """
    serialized = _serialize_non_empty(bitmaps)
    out: list[DeletionVectorDescriptor | None] = [None] * len(bitmaps)
    to_file: list[int] = []
    for i, payload in enumerate(serialized):
        if len(payload) <= inline_max_bytes:
            descriptor = inline_descriptor_from_serialized(payload, len(bitmaps[i]))
            _remember_inline(_inline_key(descriptor), bitmaps[i])
            out[i] = descriptor
        else:
            to_file.append(i)
    if to_file:
        written = _write_serialized(
            table_root, [serialized[i] for i in to_file], [len(bitmaps[i]) for i in to_file], random_prefix_len, file_id, sink
        )
        for i, descriptor in zip(to_file, written, strict=True):
            out[i] = descriptor
    return [d for d in out if d is not None]
