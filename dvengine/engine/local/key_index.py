"""Point lookups on an integer key column through a sorted index kept per immutable data file.

A stream of small upserts and deletes asks the same question of the same files round after
round: which rows have ``id IN (a few keys)``. Filtering the cached key column answers it in time
proportional to the file (Acero's filter over 1.5M rows / 7 files cost a 5-key DELETE ~18 ms a
round at the end of the 10,000-round soak, and grew with the table: the soak's drift). Data files
are immutable, so the sorted order of a file's key column is computed once (``np.argsort``, or
nothing when the file is already sorted, as appends of sorted batches and the first write are)
and kept in the column cache's LRU next to the column itself (``column_cache.cached_derived``);
each lookup is then two ``np.searchsorted`` over the wanted keys: microseconds.

Only exact cases take this path, everything else filters as before:

- predicates that ``point_lookup`` recognises (one column equals one of a few literals);
- MERGE's target side (``merge.run_target_locally``) narrows each candidate file to the rows whose
  key equals some source key before its hash join, when the join has an integer key and no
  NOT MATCHED BY SOURCE clause needs the other rows.

The index holds the non-NULL key values sorted (int64) and their row positions (int32 for files
under 2**31 rows); ~12 bytes a row, counted against ``DVENGINE_EXECUTION_COLUMNCACHEBYTES``.
Deletion vectors are applied by the caller after the lookup, exactly as after a filter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class KeyIndex:
    """The non-NULL values of one file's integer column, sorted, with their row positions
    (``positions`` None: the column has no NULLs and is sorted already, position = index)."""

    values: np.ndarray
    positions: np.ndarray | None

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + (0 if self.positions is None else self.positions.nbytes))

    def rows_of(self, keys: np.ndarray) -> np.ndarray:
        """Ascending row positions whose value is in ``keys`` (sorted, unique int64)."""
        lo = np.searchsorted(self.values, keys, side="left")
        hi = np.searchsorted(self.values, keys, side="right")
        counts = hi - lo
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64)
        hit = counts > 0
        lo, counts = lo[hit], counts[hit]
        # every index in [lo, hi) of every hit key, without a Python loop
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        sorted_at = starts + np.arange(total, dtype=np.int64)
        rows = sorted_at if self.positions is None else self.positions[sorted_at].astype(np.int64)
        return np.sort(rows)


def build_key_index(column: pa.ChunkedArray | pa.Array) -> KeyIndex:
    """The index of one file's integer column (any Arrow integer type)."""
    rows = valid_rows(column)
    present = column if rows is None else pc.drop_null(column)
    return sorted_key_index(np.asarray(present.to_numpy(), dtype=np.int64), rows, len(column))


def valid_rows(column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """Positions of the non-NULL rows of ``column``; None when it has no NULLs (every row)."""
    if not column.null_count:
        return None
    return np.flatnonzero(pc.is_valid(column).to_numpy(zero_copy_only=False))


def sorted_key_index(values: np.ndarray, rows: np.ndarray | None, length: int) -> KeyIndex:
    """The index of int64 ``values`` found at ``rows`` (None: at 0, 1, ...) of a column of
    ``length`` rows: sorted (``np.argsort``, stable, or nothing when already sorted)."""
    if len(values) > 1 and not bool(np.all(values[:-1] <= values[1:])):
        order = np.argsort(values, kind="stable")  # timsort: cheap on concatenated sorted runs
        values = values[order]
        rows = order if rows is None else rows[order]
    if rows is not None:
        rows = rows.astype(np.int32 if length < 2**31 else np.int64)
    return KeyIndex(np.ascontiguousarray(values), rows)


def is_integer_column(column: pa.ChunkedArray | pa.Array) -> bool:
    return bool(pa.types.is_integer(column.type))
