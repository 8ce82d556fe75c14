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

- the whole predicate is ``col = <integer literal>`` or ``col IN (<integer literals>[, NULL])``
  on a top-level BYTE/SHORT/INT/BIGINT column, with every literal inside the column type's range
  (an out-of-range literal keeps the Arrow translation's error). Spark's SQL answers TRUE exactly
  for the non-NULL rows whose value equals a listed value; NULL rows and a listed NULL are never
  TRUE, so a DML condition (TRUE rows only) keeps exactly those rows;
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
from sqlglot import exp

from dvengine.expressions import BoundPredicate
from dvengine.expressions.literals import literal_of
from dvengine.expressions.refs import ref_of

_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


@dataclass(frozen=True)
class PointLookup:
    """``column`` (logical, top-level) equals one of ``values`` (sorted, unique int64)."""

    column: str
    values: np.ndarray


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
    if column.null_count:
        valid = np.flatnonzero(pc.is_valid(column).to_numpy(zero_copy_only=False))
        values = np.asarray(pc.drop_null(column).to_numpy(), dtype=np.int64)
    else:
        valid = None
        values = np.asarray(column.to_numpy(), dtype=np.int64)
    if len(values) > 1 and not bool(np.all(values[:-1] <= values[1:])):
        order = np.argsort(values, kind="stable")  # timsort: cheap on concatenated sorted runs
        values = values[order]
        valid = order if valid is None else valid[order]
    if valid is not None:
        valid = valid.astype(np.int32 if len(column) < 2**31 else np.int64)
    return KeyIndex(np.ascontiguousarray(values), valid)


def is_integer_column(column: pa.ChunkedArray | pa.Array) -> bool:
    return bool(pa.types.is_integer(column.type))


def point_lookup(predicate: BoundPredicate | None) -> PointLookup | None:
    """The lookup a predicate amounts to (see the module docstring), or None."""
    if predicate is None:
        return None
    node = _unparen(predicate.tree)
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        subject, items = node.this, list(node.expressions)
    elif isinstance(node, exp.EQ):
        if ref_of(_unparen(node.this)) is not None:
            subject, items = node.this, [node.expression]
        else:
            subject, items = node.expression, [node.this]
    else:
        return None
    ref = ref_of(_unparen(subject))
    if ref is None or len(ref.path) != 1 or ref.qualifier is not None:
        return None
    bounds = _RANGES.get(ref.leaf.type.name)
    if bounds is None:
        return None
    values: list[int] = []
    for item in items:
        lit = literal_of(item)
        if lit is None:
            return None
        if lit.value is None:
            if isinstance(node, exp.EQ):
                return None  # col = NULL: never TRUE, but leave that to the general path
            continue
        if not isinstance(lit.value, int) or isinstance(lit.value, bool) or not bounds[0] <= lit.value <= bounds[1]:
            return None
        values.append(lit.value)
    return PointLookup(ref.top, np.unique(np.array(values, dtype=np.int64)))


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
