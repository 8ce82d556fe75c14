"""Replacing column references in SQL text by other expressions.

Used where one expression must be evaluated against values another expression produces, e.g. a
generated column's expression over an UPDATE's new values: ``c = a * 2`` under ``SET a = a + 1``
becomes ``c = (a + 1) * 2``, evaluated on the old row like every other assignment.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dvengine.expressions.parse import parse_sql


def substitute_columns(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with each unqualified column named in ``replacements`` (case-insensitive) replaced by
    its parenthesized expression; Spark SQL text."""
    lower = {k.lower(): v for k, v in replacements.items()}

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in lower:
            return exp.Paren(this=parse_sql(lower[node.name.lower()]))
        return node

    return str(parse_sql(text).transform(swap).sql(dialect="spark"))
