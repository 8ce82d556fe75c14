"""Row conditions and value expressions: parse (sqlglot, Spark dialect), bind to schemas, and
evaluate for partition pruning and stats skipping, or translate to Spark SQL and Arrow."""

from __future__ import annotations

from dvengine.expressions.bind import BoundExpression, BoundPredicate, parse_predicate, parse_value_expression

__all__ = ["BoundExpression", "BoundPredicate", "parse_predicate", "parse_value_expression"]
