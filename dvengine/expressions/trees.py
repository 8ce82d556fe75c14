"""Small structural helpers over bound sqlglot trees."""

from __future__ import annotations

from sqlglot import exp


def conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The AND-ed parts of a condition, parentheses looked through (``a AND (b AND c)`` -> a, b, c)."""
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def disjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The OR-ed parts of a condition, parentheses looked through (``a OR (b OR c)`` -> a, b, c)."""
    if isinstance(node, exp.Paren):
        return disjuncts(node.this)
    if isinstance(node, exp.Or):
        return disjuncts(node.this) + disjuncts(node.expression)
    return [node]
