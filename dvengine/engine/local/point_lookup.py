"""Which predicates are point lookups that a file's key index can answer exactly.

The embedded executor filters a candidate file's cached columns with Arrow, in time proportional
to the file. A predicate that only asks whether one top-level column equals one of a few literals
can instead be answered by the file's sorted key index (``key_lookup``) in microseconds. This
module decides, from the bound tree alone and before any file is read, whether a predicate is
such a lookup, and what its keys are; anything it does not recognise filters as before.

Recognised (the whole predicate): ``col = <literal>``, ``<literal> = col`` and
``col IN (<literals>[, NULL])`` on a top-level BYTE/SHORT/INT/BIGINT column with integer
literals inside the column type's range (an out-of-range literal keeps the Arrow translation's
error). Spark's SQL answers TRUE exactly for the non-NULL rows whose value equals a listed value;
NULL rows and a listed NULL are never TRUE, so a DML condition (TRUE rows only) keeps exactly those
rows.
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
    """``column`` (logical, top-level) equals one of ``keys`` (``distinct_keys``: int64)."""

    column: str
    keys: pa.Array


def distinct_keys(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The distinct non-NULL values, sorted: the form every key index searches (computed once per
    command, not once per file)."""
    present = pc.drop_null(values)
    if isinstance(present, pa.ChunkedArray):
        present = present.combine_chunks()
    distinct = pc.unique(present)
    return distinct.take(pc.sort_indices(distinct))


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
    return PointLookup(ref.top, distinct_keys(pa.array(np.array(values, dtype=np.int64))))


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
