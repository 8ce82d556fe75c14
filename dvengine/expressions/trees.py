"""Small structural helpers over bound sqlglot trees."""

from __future__ import annotations

from sqlglot import exp


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The AND-ed parts of a condition, parentheses looked through (``a AND (b AND c)`` -> a, b, c)."""
    return _operands(node, exp.And)


def disjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The OR-ed parts of a condition, parentheses looked through (``a OR (b OR c)`` -> a, b, c)."""
    return _operands(node, exp.Or)


def _operands(node: exp.Expr, connective: type[exp.Connector]) -> list[exp.Expr]:
    if isinstance(node, exp.Paren):
        return _operands(node.this, connective)
    if isinstance(node, connective):
        return _operands(node.this, connective) + _operands(node.expression, connective)
    return [node]
