"""Point lookups on a string key column: a sorted index of 64-bit hashes, checked exactly.

CDC and GDPR keys are often strings (UUIDs, user ids). The integer index (``key_index``) keeps
the sorted values themselves; for strings that would be a sorted copy of the column (~44 bytes a
row for UUIDs, unbounded for long values) and the sort itself is slow: measured on 1M random UUID
strings (2 busy cores), ``pc.sort_indices`` + ``take`` took 0.55-0.93 s and a numpy ``S36`` view
(fixed width only, and numpy ignores trailing NUL bytes) 0.27-0.34 s. Instead each row's bytes are
hashed to 64 bits (``string_hashes``: ~0.11 s for 1M UUIDs) and the hashes go into the integer
index (``np.argsort``, ~0.09 s): 12 bytes a row, counted against the column cache's budget like
the integer index. A lookup hashes the keys, finds the rows with an equal hash (two
``np.searchsorted``) and keeps those whose value is byte-for-byte one of the keys (``pc.is_in`` on
the few rows taken): a hash collision costs a row checked, never a wrong answer. A file's index
is built at its second lookup, not its first (``key_lookup._string_index`` says why).

Equality is Spark's default UTF8_BINARY collation: byte-wise. (Tables with other collations use a
writer feature dvengine refuses to write, so DML never sees them.) NULL rows are not in the index.
The hash covers the first ``_HASHED_WORDS`` 8-byte words and the length: longer values that share
that prefix and their length collide and are told apart by the exact check (slower, still exact),
which bounds the build's passes over a column with a few huge values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.engine.local.key_index import KeyIndex, sorted_key_index, valid_rows

_HASHED_WORDS = 16  # the first 128 bytes
_M1, _M2 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F)  # XXH64's primes: odd, well mixed
_ALL_BITS = np.uint64(0xFFFFFFFFFFFFFFFF)


def is_string_column(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether ``string_hashes`` can read the column's layout (offsets + bytes)."""
    kind = column.type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


@dataclass(frozen=True)
class StringKeyIndex:
    """The hashes of one file's non-NULL string values, sorted, with their row positions."""

    hashes: KeyIndex

    @property
    def nbytes(self) -> int:
        return self.hashes.nbytes

    def rows_of(self, column: pa.ChunkedArray, keys: pa.Array, hashes: np.ndarray) -> np.ndarray:
        """Ascending positions of the rows of ``column`` (the column this index was built from)
        whose value equals one of ``keys`` (distinct, non-NULL strings); ``hashes``: their
        ``string_hashes``, distinct and sorted (computed once by the caller for many files)."""
        candidates = self.hashes.rows_of(hashes)
        if not len(candidates):
            return candidates
        equal = pc.is_in(column.take(pa.array(candidates)), value_set=keys.cast(column.type))
        found: np.ndarray = candidates[np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)]
        return found


def build_string_key_index(column: pa.ChunkedArray) -> StringKeyIndex:
    """The index of one file's string column."""
    hashes = np.concatenate([string_hashes(chunk) for chunk in column.chunks]) if column.num_chunks else np.empty(0, np.int64)
    rows = valid_rows(column)
    return StringKeyIndex(sorted_key_index(hashes if rows is None else hashes[rows], rows, len(column)))


def string_hashes(array: pa.Array) -> np.ndarray:
    """A 64-bit hash (as int64) of each value's UTF-8 bytes; NULL slots get some value.

    Vectorised over the rows, one pass per 8-byte word: each word is read as one unaligned
    little-endian uint64 through a byte-strided view of the data buffer, bytes past the value's
    end are masked off, and the word is mixed in with a multiply and a shift; the length seeds the
    hash, so values that differ only by trailing zero bytes differ. A function of the bytes only:
    keys and columns hash alike whatever their chunking, offsets or large/small layout."""
    starts, lengths, data = _layout(array)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])  # every word read stays inside
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    hashes = lengths.astype(np.uint64) * _M1
    rows = np.flatnonzero(lengths > 0)
    for w in range(_HASHED_WORDS):
        if w:
            rows = rows[lengths[rows] > 8 * w]
        if not len(rows):
            break
        remaining = (lengths[rows] - 8 * w).astype(np.uint64)
        tail_mask = (np.uint64(1) << (np.minimum(remaining, np.uint64(7)) * np.uint64(8))) - np.uint64(1)
        word = words[starts[rows] + 8 * w] & np.where(remaining >= 8, _ALL_BITS, tail_mask)
        mixed = (hashes[rows] ^ word) * _M2
        hashes[rows] = mixed ^ (mixed >> np.uint64(29))
    hashes ^= hashes >> np.uint64(33)
    hashes *= _M1
    hashes ^= hashes >> np.uint64(32)
    return hashes.view(np.int64)


def _layout(array: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start offset, length, data bytes up to the last value's end) of a string array."""
    offset_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    _validity, offsets_buffer, data_buffer = array.buffers()
    if offsets_buffer is None or not len(array):
        return np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(0, np.uint8)
    offsets: np.ndarray = np.frombuffer(offsets_buffer, dtype=offset_type)[array.offset : array.offset + len(array) + 1]
    offsets = offsets.astype(np.int64)
    end = int(offsets[-1])
    data = np.frombuffer(data_buffer, dtype=np.uint8)[:end] if data_buffer is not None else np.zeros(0, np.uint8)
    return offsets[:-1], offsets[1:] - offsets[:-1], data
