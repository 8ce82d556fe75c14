"""UPDATE's whole-struct values matched to the column by field *name*, as Delta does.

Delta casts a struct value into a struct column by name for UPDATE as for MERGE
(``UpdateExpressionsSupport.generateUpdateExpressions`` with ``MergeOrUpdateCastingBehavior``,
``resolveMergeUpdateStructsByName.enabled`` on by default); Spark's CAST, which the Spark executor
applies to every assigned value, matches fields by *position*. So ``SET s = named_struct('y', 'b',
'x', 'a')`` on ``s struct<x: string, y: string>`` would store x = 'b' on Spark, where Delta stores
x = 'a' (and the in-process evaluator takes a struct value only with the column's fields in order).

This rewrites, before binding, the two value shapes whose fields can be matched by name from the
text alone, so both executors then see the column's order:

- ``named_struct(...)`` / ``STRUCT(v AS f, ...)`` naming the column's fields in another order (names
  compared case-insensitively): its items are put in the column's order;
- a reference to another struct column whose fields come in another order:
  ``IF(r IS NULL, NULL, named_struct('x', r.x, 'y', r.y))`` (a NULL struct stays NULL, as Delta's
  by-name cast keeps it).

Fields that differ by more than order (missing or extra; Delta without schema evolution:
DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION) raise :class:`SchemaMismatchError` before anything is
written. Only the top level of the value is matched: structs nested inside its fields, and values
of other shapes (functions returning structs), are left to the engines as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlglot
from sqlglot import exp

from dvengine.errors import SchemaMismatchError
from dvengine.expressions import parse_value_expression
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.refs import ref_of
from dvengine.protocol.schema import StructType


def by_name_struct_values(schema: StructType, texts: Mapping[str, str]) -> dict[str, str]:
    """``texts`` (top-level column -> SQL value) with struct values put in their column's field order."""
    out = dict(texts)
    for name, text in texts.items():
        field = schema.find(name)
        if field is None or not isinstance(field.type, StructType):
            continue
        rewritten = _by_name(name, field.type, text, schema)
        if rewritten is not None:
            out[name] = rewritten
    return out


def _by_name(column: str, target: StructType, text: str, schema: StructType) -> str | None:
    wanted = [f.name for f in target.fields]
    try:
        raw = sqlglot.parse_one(text, dialect="spark")
    except sqlglot.errors.ParseError:
        return None  # the binder reports it with its own message
    node = raw.unnest() if isinstance(raw, exp.Paren) else raw
    if isinstance(node, exp.Struct):
        items = list(node.expressions)
        if not all(isinstance(i, exp.PropertyEQ) and isinstance(i.this, exp.Identifier) for i in items):
            return None
        given = [str(i.this.name) for i in items]
        if _same_order(given, wanted):
            return None
        by_name = {n.lower(): i.expression for n, i in zip(given, items, strict=True)}
        _check_same_fields(column, given, wanted)
        parts = ", ".join(f"'{w}', {by_name[w.lower()].sql(dialect='spark')}" for w in wanted)
        return f"named_struct({parts})"
    ref = ref_of(parse_value_expression(text, schema).tree)
    if ref is None or not isinstance(ref.leaf.type, StructType):
        return None
    given = [f.name for f in ref.leaf.type.fields]
    if _same_order(given, wanted):
        return None
    _check_same_fields(column, given, wanted)
    source = {g.lower(): g for g in given}
    value = f"({text})"
    parts = ", ".join(f"'{w}', {value}.{quote_identifier(source[w.lower()])}" for w in wanted)
    return f"IF({value} IS NULL, NULL, named_struct({parts}))"


def _same_order(given: list[str], wanted: list[str]) -> bool:
    return [g.lower() for g in given] == [w.lower() for w in wanted]


def _check_same_fields(column: str, given: list[str], wanted: list[str]) -> None:
    lowered = [g.lower() for g in given]
    if len(set(lowered)) != len(lowered) or set(lowered) != {w.lower() for w in wanted}:
        raise SchemaMismatchError(
            f"UPDATE cannot store a struct with fields {given} into column {column!r} with fields {wanted}: "
            "struct values are matched by field name and must have the column's fields "
            "(Delta's DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION); nothing was written"
        )
