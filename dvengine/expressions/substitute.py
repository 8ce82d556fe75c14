"""Replacing column references in a bound expression by other expressions.

Used where one expression must be evaluated against values another expression produces, e.g. a
generated column's expression over an UPDATE's new values: ``c = a * 2`` under ``SET a = a + 1``
becomes ``c = (a + 1) * 2``, evaluated on the old row like every other assignment; ``g = s.x + 1``
under ``SET s.x = 5`` becomes ``(5) + 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from dvengine.expressions.bind import BoundExpression
from dvengine.expressions.parse import parse_sql
from dvengine.expressions.refs import ColumnRef, ref_of


def substitute_paths(
    expr: BoundExpression,
    values: Mapping[tuple[str, ...], str],
    rebuilt: Mapping[tuple[str, ...], str] | None = None,
    otherwise: Callable[[ColumnRef], str | None] | None = None,
) -> str:
    """Spark SQL of ``expr`` evaluated over new values given per column path (lower-case keys):
    a reference at or below an assigned path becomes ``(value)`` (then ``.field`` for the rest of
    its path), a reference to a struct rebuilt around assigned fields becomes that struct
    (``rebuilt``), anything else what ``otherwise`` says (None: unchanged). Working on the bound
    tree means ``s.x`` is matched as the nested field it is, not as column ``x`` of a table ``s``."""
    rebuilt = rebuilt or {}
    tree = expr.tree.copy()
    for node in list(tree.walk()):
        ref = ref_of(node)
        if ref is None:
            continue
        path = tuple(p.lower() for p in ref.path)
        new: exp.Expr | None = None
        for n in range(len(path), 0, -1):
            if path[:n] in values:
                new = exp.Paren(this=parse_sql(values[path[:n]]))
                for name in ref.path[n:]:
                    new = _field_of(new, name)
                break
        if new is None and path in rebuilt:
            new = exp.Paren(this=parse_sql(rebuilt[path]))
        if new is None and otherwise is not None:
            text = otherwise(ref)
            new = None if text is None else exp.Paren(this=parse_sql(text))
        if new is None:
            continue
        if node is tree:
            tree = new
        else:
            node.replace(new)
    return str(tree.sql(dialect="spark", comments=False))


def _field_of(value: exp.Expr, name: str) -> exp.Expr:
    """``value.name``: the field's own expression when ``value`` is a struct literal
    (``named_struct('x', 7, ...)``.x is ``(7)``, which the embedded evaluator can take), else a dereference."""
    inner = value
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Struct):
        for item in inner.expressions:
            if isinstance(item, exp.PropertyEQ) and str(item.this.name).lower() == name.lower():
                return exp.Paren(this=item.expression.copy())
    return exp.Dot(this=value, expression=exp.to_identifier(name, quoted=True))
