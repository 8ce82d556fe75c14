"""The serialized bitmap of a deletion vector ("RoaringBitmapArray", portable layout).

Bytes: the magic 1681511377 as a little-endian u32, then the 64-bit *portable* Roaring format
(u64 LE bucket count; per bucket a u32 LE high key and a standard 32-bit portable Roaring
bitmap). That second part is exactly what CRoaring's ``roaring64_bitmap_portable_serialize``
produces, which ``pyroaring.BitMap64.serialize`` calls, so no Python loop over rows is needed:
a DV of millions of rows (de)serializes in milliseconds.

Delta Spark stores the high key as a Java ``int``, so keys must be below 2**63 (top bit of the
high key clear). Row indexes are physical positions in a Parquet file, so real DVs are far below.
"""

from __future__ import annotations

import struct
from array import array

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap64

from dvengine.errors import DeletionVectorError

MAGIC = 1681511377
_MAGIC_BYTES = struct.pack("<I", MAGIC)
MAX_ROW_INDEX = 2**63 - 1


def serialize_bitmap(rows: BitMap64) -> bytes:
    """Magic + portable 64-bit Roaring bytes of ``rows``.

    Run containers are used where they are smaller (``run_optimize`` on a copy, so the caller's
    bitmap is untouched): dense deletes (ranges of rows) shrink to a few bytes, which keeps more
    DVs inline. Raises :class:`DeletionVectorError` for a row index >= 2**63.
    """
    if rows and rows.max() > MAX_ROW_INDEX:
        raise DeletionVectorError(f"deletion vector row index {rows.max()} is >= 2**63; Delta cannot store it")
    optimized = rows.copy()
    optimized.run_optimize()
    return _MAGIC_BYTES + bytes(optimized.serialize())


def deserialize_bitmap(data: bytes) -> BitMap64:
    """Parse bytes written by :func:`serialize_bitmap` (or Delta Spark / kernel writers).

    Raises :class:`DeletionVectorError` for a wrong magic, bytes that are not a valid portable
    Roaring bitmap (pyroaring validates container structure and cardinalities), or a row index
    >= 2**63. Trailing bytes after the bitmap are not detected (see spec_notes).
    """
    if len(data) < 4:
        raise DeletionVectorError(
            f"serialized deletion vector is {len(data)} bytes, too short to hold the magic number"
        )
    magic = struct.unpack_from("<I", data)[0]
    if magic != MAGIC:
        raise DeletionVectorError(
            f"serialized deletion vector has magic {magic} (bytes {data[:4].hex()}), expected {MAGIC} (d1d33964); "
            "only the portable RoaringBitmapArray format is supported"
        )
    body = data[4:]
    if len(body) < 8:
        raise DeletionVectorError(
            f"serialized deletion vector has {len(body)} bytes after the magic, fewer than the 8-byte bucket count"
        )
    try:
        rows = BitMap64.deserialize(body)
    except (ValueError, IndexError, OverflowError) as exc:
        raise DeletionVectorError(f"serialized deletion vector is not a valid portable Roaring bitmap: {exc}") from exc
    if rows and rows.max() > MAX_ROW_INDEX:
        raise DeletionVectorError(
            f"serialized deletion vector holds row index {rows.max()} >= 2**63 (negative high key in Delta's format)"
        )
    return rows


def bitmap_from_row_indexes(row_indexes: npt.ArrayLike) -> BitMap64:
    """Build a bitmap from a numpy array (or array-like) of row indexes, fast.

    ``BitMap64(numpy_array)`` iterates element by element (~0.5 s for 5M rows); handing it an
    ``array('Q')`` takes CRoaring's bulk path (~0.1 s). Negative indexes raise
    :class:`DeletionVectorError` instead of wrapping around to huge unsigned values.
    """
    values = np.asarray(row_indexes)
    if values.size == 0:
        return BitMap64()
    if values.dtype.kind not in "iu":
        raise DeletionVectorError(f"row indexes must be integers, got an array of dtype {values.dtype}")
    if values.dtype.kind == "i" and int(values.min()) < 0:
        raise DeletionVectorError(f"row indexes must be >= 0, got {int(values.min())}")
    packed = array("Q")
    packed.frombytes(np.ascontiguousarray(values, dtype=np.uint64).tobytes())
    return BitMap64(packed)


def outside(row_indexes: npt.NDArray[np.int64], deleted: BitMap64) -> npt.NDArray[np.bool_]:
    """A mask over ``row_indexes`` (any order, repeats allowed): True where the row is not in
    ``deleted``.

    Why not ``np.isin(rows, deleted.to_array())``: that turns the whole DV into an array and sorts
    it on every call, so a MERGE that matches 50 rows of a file whose DV holds 40,000 paid for
    the 40,000 each round, and the cost grew with the DV over a stream of upserts (issue 22's
    drift; spec_notes/auto-compaction.md). When the rows are few, intersect them with the DV
    (bitmap work, no sort of the DV) and test against that intersection instead.
    """
    if not len(deleted) or not len(row_indexes):
        return np.ones(len(row_indexes), dtype=bool)
    if len(row_indexes) * 8 >= len(deleted):
        return ~np.isin(row_indexes, np.asarray(deleted.to_array(), dtype=np.int64))
    hits = deleted & bitmap_from_row_indexes(row_indexes)
    if not len(hits):
        return np.ones(len(row_indexes), dtype=bool)
    return ~np.isin(row_indexes, np.asarray(hits.to_array(), dtype=np.int64))
