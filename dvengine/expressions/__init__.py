"""Row conditions and value expressions: parse (sqlglot, Spark dialect), bind to schemas, and
evaluate for partition pruning and stats skipping, or translate to Spark SQL and Arrow."""

from __future__ import annotations

from dvengine.expressions.bind import BoundExpression, BoundPredicate, parse_predicate, parse_value_expression
from dvengine.expressions.evaluate import (
    is_partition_only,
    partition_might_match,
    stats_might_match,
    to_pyarrow_expression,
    to_pyarrow_typed,
    to_pyarrow_value,
    to_spark_sql,
)
from dvengine.expressions.refs import ColumnRef

__all__ = [
    "BoundExpression",
    "BoundPredicate",
    "ColumnRef",
    "is_partition_only",
    "parse_predicate",
    "parse_value_expression",
    "partition_might_match",
    "stats_might_match",
    "to_pyarrow_expression",
    "to_pyarrow_typed",
    "to_pyarrow_value",
    "to_spark_sql",
]
