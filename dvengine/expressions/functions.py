"""Which SQL functions a row-level condition may not use, and why.

A DML condition is evaluated once per row and possibly several times per row (planning, a
verification scan, a rewrite). It must therefore give the same answer every time: functions
whose value depends on time, randomness, or the physical layout of the scan are rejected, as are
aggregates and window functions, which have no meaning for a single row.
"""

from __future__ import annotations

from sqlglot import exp

# Lower-case Spark names (and sqlglot's canonical names for them) of functions whose result is
# not a pure function of the row.
NON_DETERMINISTIC = frozenset(
    {
        "rand",
        "random",
        "randn",
        "randstr",
        "rand_str",
        "uniform",
        "uuid",
        "shuffle",
        "current_timestamp",
        "current_date",
        "current_time",
        "curdate",
        "now",
        "localtimestamp",
        "current_timezone",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "reflect",
        "try_reflect",
        "java_method",
    }
)

# Spark aggregates that sqlglot does not model as AggFunc (they parse as anonymous calls).
AGGREGATE_NAMES = frozenset(
    {
        "every",
        "some",
        "any",
        "bool_or",
        "bool_and",
        "collect_set",
        "collect_list",
        "count_min_sketch",
        "histogram_numeric",
        "kurtosis",
        "skewness",
        "max_by",
        "min_by",
        "mode",
        "percentile_approx",
        "approx_percentile",
        "regr_count",
        "try_sum",
        "try_avg",
        "bit_and",
        "bit_or",
        "bit_xor",
        "listagg",
        "string_agg",
    }
)


def function_name(node: exp.Expr) -> str | None:
    """Lower-case name of a function call node, or None when the node is not a call."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        return str(node.sql_name()).lower()
    return None


def is_non_deterministic(node: exp.Expr) -> bool:
    name = function_name(node)
    if name is None:
        return False
    if name in NON_DETERMINISTIC:
        return True
    # unix_timestamp() without an argument reads the clock.
    return isinstance(node, exp.StrToUnix) and node.this is None


def is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    name = function_name(node)
    return isinstance(node, exp.Anonymous) and name in AGGREGATE_NAMES
