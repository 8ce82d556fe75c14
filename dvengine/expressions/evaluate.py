"""Evaluation entry points of the expressions layer, gathered in one place.

Each concern lives in its own module (pruning and stats skipping in ``skipping``, Spark SQL in
``spark_sql``, Arrow in ``arrow``); this module is the stable import path the interface names.
"""

from __future__ import annotations

from dvengine.expressions.arrow import to_pyarrow_expression, to_pyarrow_typed, to_pyarrow_value
from dvengine.expressions.skipping import is_partition_only, partition_might_match, stats_might_match
from dvengine.expressions.spark_sql import to_spark_sql

__all__ = [
    "is_partition_only",
    "partition_might_match",
    "stats_might_match",
    "to_pyarrow_expression",
    "to_pyarrow_typed",
    "to_pyarrow_value",
    "to_spark_sql",
]
