"""Which predicates are point lookups that a file's key index can answer exactly.

The embedded executor filters a candidate file's cached columns with Arrow, in time proportional
to the file. A predicate that only asks whether one top-level column equals one of a few literals
can instead be answered by the file's sorted key index (``key_lookup``) in microseconds. This
module decides, from the bound tree alone and before any file is read, whether a predicate is
such a lookup, and what its keys are; anything it does not recognise filters as before.

Recognised (the whole predicate): ``col = <literal>``, ``<literal> = col`` and
``col IN (<literals>[, NULL])`` on a top-level column of one of these types, every literal of the
column's own type (an implicit cast is the general path's to judge):

- BYTE/SHORT/INT/BIGINT: integer literals inside the column type's range (an out-of-range literal
  keeps the Arrow translation's error);
- STRING: plain string literals, compared byte-wise (Spark's default UTF8_BINARY collation);
- DATE: typed date literals (``DATE 'yyyy-mm-dd'``, ``CAST('yyyy-mm-dd' AS DATE)``), looked up
  by their day number in the integer index; ``date_col = '2024-01-01'`` is a string that Spark
  casts by its comparison rules, which the binder does not type, so it filters as before.

An OR of such lookups on the same column (``id = 1 OR id = 2``, ``s IN ('a', 'b') OR s = 'c'``)
is the lookup of all their keys: a row's disjunction is TRUE exactly when one disjunct is TRUE.

Spark's SQL answers TRUE exactly for the non-NULL rows whose value equals a listed value; NULL
rows and a listed NULL are never TRUE, so a DML condition (TRUE rows only) keeps exactly those
rows.

``lookup AND other AND ...`` (``id = 5 AND status = 'x'``): the first conjunct that is a lookup
finds candidate rows (``whole`` False), and the whole predicate is then evaluated by the Arrow
filter on those rows only. A row where the conjunction is TRUE has the lookup TRUE, so it is a
candidate, and a row's value does not depend on the other rows: the same rows come out. Errors
are the exception (a filter over all rows raises for ``x + 1`` overflowing on any row, one over
the candidates only for theirs), so this is taken only when no conjunct's evaluation can fail
(``_cannot_fail``: connectives and comparisons of plain columns and literals); anything else
filters the whole column as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from dvengine.engine.local.key_lookup import LookupKeys, lookup_keys
from dvengine.expressions import BoundPredicate
from dvengine.expressions.kinds import Kind
from dvengine.expressions.literals import Lit, literal_of
from dvengine.expressions.refs import ref_of
from dvengine.expressions.trees import conjuncts, disjuncts

_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}


@dataclass(frozen=True)
class PointLookup:
    """``column`` (logical, top-level) equals one of ``keys`` (int64 for an integer column,
    string for a string column, date32 for a date column)."""

    column: str
    keys: LookupKeys
    whole: bool  # the lookup is the whole predicate; else its rows are candidates (module docstring)


def point_lookup(predicate: BoundPredicate | None) -> PointLookup | None:
    """The lookup a predicate amounts to (see the module docstring), or None."""
    if predicate is None:
        return None
    parts = conjuncts(predicate.tree)
    if len(parts) == 1:
        return _lookup(parts[0], whole=True)
    if not all(_cannot_fail(part) for part in parts):
        return None
    for part in parts:
        found = _lookup(part, whole=False)
        if found is not None:
            return found
    return None


def _lookup(node: exp.Expr, whole: bool) -> PointLookup | None:
    """The lookup one conjunct is, if it is one: a single lookup, or an OR of lookups that all
    test the same column (their keys together)."""
    column: str | None = None
    arrow_type: pa.DataType | None = None
    values: list[object] = []
    for part in disjuncts(node):
        found = _keys_of(part)
        if found is None:
            return None
        part_column, part_type, part_values = found
        if column is not None and (part_column != column or part_type != arrow_type):
            return None
        column, arrow_type = part_column, part_type
        values.extend(part_values)
    assert column is not None and arrow_type is not None  # disjuncts() yields at least one part
    try:
        keys = lookup_keys(pa.array(values, type=arrow_type))
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 bytes: the general path judges it
        return None
    return None if keys is None else PointLookup(column, keys, whole)


def _keys_of(node: exp.Expr) -> tuple[str, pa.DataType, list[object]] | None:
    """``col = lit`` / ``lit = col`` / ``col IN (lits)``: the column, its keys' Arrow type and the
    non-NULL keys; None for any other shape or a literal the column's reader does not take."""
    node = _unparen(node)
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
    column_type = ref.leaf.type.name
    reader = _KEY_READERS.get(column_type)
    if reader is None:
        return None
    values: list[object] = []
    for item in items:
        lit = literal_of(item)
        if lit is None:
            return None
        if lit.value is None:
            if isinstance(node, exp.EQ):
                return None  # col = NULL: never TRUE, but leave that to the general path
            continue
        value = reader.read(column_type, _unparen(item), lit)
        if value is None:
            return None
        values.append(value)
    return ref.top, reader.arrow_type, values


# Shapes whose Arrow evaluation cannot fail on any row: boolean connectives and comparisons of
# columns of these types with each other or with literals (the translation types and checks the
# literals before any file is read). No arithmetic, function, cast of a column, LIKE pattern or
# DECIMAL (Arrow rescales decimals to compare them).
_CONNECTIVES = (exp.And, exp.Or, exp.Not, exp.Paren)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.In, exp.Between, exp.Is)
_PLAIN_TYPES = frozenset({*_RANGES, "string", "date", "boolean", "timestamp", "timestamp_ntz", "float", "double"})


def _cannot_fail(node: exp.Expr) -> bool:
    """Whether evaluating ``node`` (a bound condition) in Arrow can raise on no row, so that
    evaluating it on some rows gives, for those rows, what evaluating it on all rows gives,
    and no error is left out."""
    if isinstance(node, _CONNECTIVES):
        return all(_cannot_fail(child) for child in node.iter_expressions())
    if isinstance(node, _COMPARISONS):
        if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
            return False
        return all(_plain_operand(child) for child in node.iter_expressions())
    return _plain_operand(node)


def _plain_operand(node: exp.Expr) -> bool:
    node = _unparen(node)
    ref = ref_of(node)
    if ref is not None:
        return ref.leaf.type.name in _PLAIN_TYPES
    return literal_of(node) is not None


def _integer_key(column_type: str, node: exp.Expr, lit: Lit) -> object | None:
    """An integer literal inside the column type's range (an out-of-range one keeps the Arrow
    translation's error)."""
    low, high = _RANGES[column_type]
    value = lit.value
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        return None
    return value


def _string_key(column_type: str, node: exp.Expr, lit: Lit) -> object | None:
    """A plain string literal; anything else compared with a string column (a number, a date, a
    cast) is an implicit or explicit cast that the general path judges."""
    if not (isinstance(node, exp.Literal) and node.is_string and lit.kind == Kind.STRING):
        return None
    return str(lit.value)


def _date_key(column_type: str, node: exp.Expr, lit: Lit) -> object | None:
    """A typed date literal (``DATE '2024-01-01'``, ``CAST('2024-01-01' AS DATE)``), as
    ``literal_of`` reads it. A plain string compared with a date column is cast by Spark's
    comparison rules, which the binder leaves to the Arrow translation: the general path."""
    if lit.kind != Kind.DATE or not isinstance(lit.value, dt.date):
        return None
    return lit.value


@dataclass(frozen=True)
class _KeyReader:
    """How a column type's lookup keys are read from literals, and their Arrow type."""

    arrow_type: pa.DataType
    read: Callable[[str, exp.Expr, Lit], object | None]


_KEY_READERS = {
    **{name: _KeyReader(pa.int64(), _integer_key) for name in _RANGES},
    "string": _KeyReader(pa.string(), _string_key),
    "date": _KeyReader(pa.date32(), _date_key),
}


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node
