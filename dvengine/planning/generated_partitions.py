"""Partition filters derived through generated partition columns, as Delta's
``OptimizablePartitionExpression`` does for a date generated from a timestamp.

A table partitioned by ``day DATE GENERATED ALWAYS AS (CAST(ts AS DATE))`` (or ``to_date(ts)``)
is usually filtered on ``ts``, which no partition value holds. A comparison of ``ts`` with a
literal bounds ``day`` too, so files of other days can be pruned before any stats are read.

Only a conservative bound is derived: ``CAST(ts AS DATE)`` depends on the session time zone
(which the planner does not know) and a literal may carry its own offset, so the literal's
wall-clock date is widened by one day on the open side (``ts >= '2024-03-10 08:00'`` gives
``day >= 2024-03-09``). A derived filter never drops a file the original condition could match;
it is used only to prune, never to evaluate rows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlglot import exp

from dvengine.errors import InvalidPredicateError
from dvengine.expressions import BoundPredicate, parse_predicate
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.kinds import Kind
from dvengine.expressions.literals import Lit, TimestampText, literal_of, parse_date_text, parse_timestamp_text
from dvengine.expressions.parse import parse_sql
from dvengine.expressions.refs import ref_of
from dvengine.expressions.trees import conjuncts
from dvengine.protocol.schema import StructType

GENERATION_EXPRESSION = "delta.generationExpression"  # PROTOCOL.md "Generated Columns": the field metadata key

_FLIP: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}
_ONE_DAY = dt.timedelta(days=1)


def _date_source(text: str) -> str | None:
    """The column a generation expression takes the date of: ``CAST(c AS DATE)`` or ``to_date(c)``."""
    try:
        tree = parse_sql(text)
    except InvalidPredicateError:  # the table's own text; if it does not parse it cannot prune (writes refuse it)
        return None
    if isinstance(tree, exp.Cast) and tree.to.is_type(exp.DataType.Type.DATE) and isinstance(tree.this, exp.Column):
        return str(tree.this.name)
    if isinstance(tree, exp.TsOrDsToDate) and isinstance(tree.this, exp.Column) and tree.args.get("format") is None:
        return str(tree.this.name)
    if isinstance(tree, exp.Anonymous) and str(tree.this).lower() == "to_date" and len(tree.expressions) == 1:
        arg = tree.expressions[0]
        return str(arg.name) if isinstance(arg, exp.Column) else None
    return None


def _wall_date(lit: Lit) -> dt.date | None:
    value = lit.value
    if lit.kind == Kind.STRING and isinstance(value, str):
        value = parse_timestamp_text(value) or parse_date_text(value)
    if isinstance(value, TimestampText):
        return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value.wall_micros)).date()
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return None


def _bounds(node: exp.Expr, source: str) -> tuple[dt.date | None, dt.date | None] | None:
    """(lowest, highest) date of ``source`` rows that can satisfy comparison ``node``; None: no bound."""
    if type(node) not in _FLIP:
        return None
    left, right, op = node.this, node.expression, type(node)  # a comparison: exp.Binary
    ref = ref_of(left)
    if ref is None or ref.qualifier is not None or ref.top.lower() != source.lower() or len(ref.path) != 1:
        ref, left, right, op = ref_of(right), right, left, _FLIP[op]
        if ref is None or ref.qualifier is not None or ref.top.lower() != source.lower() or len(ref.path) != 1:
            return None
    lit = literal_of(right)
    day = None if lit is None else _wall_date(lit)
    if day is None:
        return None
    low = day - _ONE_DAY if op in (exp.GT, exp.GTE, exp.EQ) else None
    high = day + _ONE_DAY if op in (exp.LT, exp.LTE, exp.EQ) else None
    return low, high


def generated_partition_filter(
    schema: StructType, partition_columns: Sequence[str], predicate: BoundPredicate | None
) -> BoundPredicate | None:
    """A predicate on generated date partition columns implied by ``predicate``'s top-level
    comparisons of their source column with literals (None when nothing can be derived)."""
    if predicate is None:
        return None
    parts: list[str] = []
    for column in partition_columns:
        field = schema.find(column)
        if field is None or GENERATION_EXPRESSION not in field.metadata or field.type.simple_string() != "date":
            continue
        source = _date_source(str(field.metadata[GENERATION_EXPRESSION]))
        source_field = None if source is None else schema.find(source)
        if source_field is None or source_field.type.simple_string() not in ("timestamp", "timestamp_ntz", "date"):
            continue
        for node in conjuncts(predicate.tree):
            found = _bounds(node, source_field.name)
            if found is None:
                continue
            low, high = found
            name = quote_identifier(field.name)
            if low is not None:
                parts.append(f"{name} >= DATE'{low.isoformat()}'")
            if high is not None:
                parts.append(f"{name} <= DATE'{high.isoformat()}'")
    return parse_predicate(" AND ".join(parts), schema) if parts else None
