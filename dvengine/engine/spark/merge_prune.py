"""Which target files a MERGE must read: a target-only predicate derived from the source.

A target row can be matched only if it satisfies every conjunct of the merge condition. For an
equality conjunct ``t.k = <source expression>`` that means ``t.k`` lies within the source's
[min, max] of that expression (or in its distinct set when small); conjuncts that reference the
target only apply as they are. Their conjunction is an ordinary predicate on the target, so the
same partition pruning and stats skipping as DELETE select the candidate files, and the same
predicate is what the transaction records as read (so a concurrent append of a matching key
conflicts). Everything here is conservative: a conjunct that cannot be turned into a target-only
predicate exactly (mixed types, floats, timestamps) is simply left out.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass

import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from dvengine.expressions import BoundPredicate, parse_predicate, to_spark_sql
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.refs import bound_refs, ref_of
from dvengine.expressions.trees import conjuncts
from dvengine.protocol.schema import StructField, StructType

IN_LIST_MAX = 1000


@dataclass(frozen=True)
class JoinKey:
    """An equality conjunct: a top-level target column equal to a source-only expression."""

    target: StructField
    source_sql: str  # Spark SQL over the source frame's internal column names


@dataclass(frozen=True)
class ConditionParts:
    keys: tuple[JoinKey, ...]
    target_only: tuple[str, ...]  # conjunct SQL over the target's logical (unqualified) names


def _qualifiers(node: exp.Expr) -> set[str | None]:
    return {r.qualifier for r in bound_refs(node)}


def _target_column(node: exp.Expr, target_alias: str) -> StructField | None:
    while isinstance(node, exp.Paren):
        node = node.this
    ref = ref_of(node)
    if ref is None or ref.qualifier != target_alias or len(ref.path) != 1:
        return None
    return ref.leaf


def split_condition(
    condition: BoundPredicate,
    target_alias: str,
    source_alias: str,
    target_schema: StructType,
    source_rename: dict[str, str],
) -> ConditionParts:
    """Join keys and target-only conjuncts of a bound merge condition."""
    aliases = {target_alias: target_schema}
    keys: list[JoinKey] = []
    target_only: list[str] = []
    for conj in conjuncts(condition.tree):
        quals = _qualifiers(conj)
        if quals == {target_alias}:
            bound = parse_predicate(conj.sql(dialect="spark"), target_schema, aliases=aliases)
            rename = {f"{target_alias}.{name}": name for name in bound.columns}
            target_only.append(to_spark_sql(bound, rename))
            continue
        if not isinstance(conj, exp.EQ):
            continue
        for mine, theirs in ((conj.this, conj.expression), (conj.expression, conj.this)):
            field = _target_column(mine, target_alias)
            if field is not None and _qualifiers(theirs) == {source_alias}:
                source_expr = BoundPredicate(
                    sql="", columns=frozenset(), qualified_columns=frozenset(), tree=theirs.copy()
                )
                keys.append(JoinKey(field, to_spark_sql(source_expr, source_rename)))
                break
    return ConditionParts(tuple(keys), tuple(target_only))


def _literal(value: object, data_type: T.DataType) -> str | None:
    """SQL literal for a key value of a type whose comparison semantics are exact, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(data_type, T.IntegralType) and isinstance(value, int):
        return str(value)
    if isinstance(data_type, T.StringType) and isinstance(value, str):
        return str(exp.Literal.string(value).sql(dialect="spark"))
    if isinstance(data_type, T.DateType) and isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(data_type, T.DecimalType) and isinstance(value, decimal.Decimal) and value.is_finite():
        return format(value, "f")
    return None


def _comparable(source_type: T.DataType, target_type: T.DataType) -> bool:
    """Only types whose equality needs no lossy coercion give exact bounds."""
    if isinstance(target_type, T.IntegralType) and isinstance(source_type, T.IntegralType):
        return True
    if isinstance(target_type, (T.StringType, T.DateType)):
        return type(source_type) is type(target_type)
    if isinstance(target_type, T.DecimalType):
        return source_type == target_type
    return False


# Sources up to this many rows are summarized on the driver from one Arrow collect of their key
# columns (one Spark job); larger ones by an aggregation plus, for few distinct keys, a second job.
LOCAL_SUMMARY_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class KeySummary:
    """What the source says about one join key: its range and, when small, its distinct values."""

    lo: object
    hi: object
    values: list[object] | None  # None: more than IN_LIST_MAX distinct values (or not collected)


def derive_target_predicate(
    source: DataFrame,
    parts: ConditionParts,
    target_schema: StructType,
    target_spark_types: dict[str, T.DataType],
) -> tuple[BoundPredicate | None, int]:
    """The target-only predicate every matchable target row satisfies, and the source row count.

    A small source (the common upsert) is summarized from one Arrow collect of its key columns;
    a large one by one aggregation (count, each key's min, max and approximate distinct count),
    then keys with few distinct values are collected exactly. Each Spark job costs 100-300 ms
    of fixed overhead here, so the small case matters.
    """
    usable: list[tuple[int, JoinKey, T.DataType]] = []
    for i, key in enumerate(parts.keys):
        source_type = source.select(F.expr(key.source_sql)).schema.fields[0].dataType
        target_type = target_spark_types[key.target.name]
        if _comparable(source_type, target_type):
            usable.append((i, key, target_type))
    found = _summarize_locally(source, usable)
    if found is None:
        found = _summarize_on_spark(source, usable)
    num_source_rows, summaries = found
    conjuncts: list[str] = list(parts.target_only)
    for i, key, target_type in usable:
        summary = summaries[i]
        column = quote_identifier(key.target.name)
        if summary.lo is None:
            conjuncts.append("FALSE")  # no non-null key: `t.k = NULL` never holds, nothing can match
            continue
        text = _in_list_sql(summary.values, target_type, column)
        if text is None:
            lo_sql, hi_sql = _literal(summary.lo, target_type), _literal(summary.hi, target_type)
            if lo_sql is None or hi_sql is None:
                continue
            text = f"{column} >= {lo_sql} AND {column} <= {hi_sql}"
        conjuncts.append(text)
    if not conjuncts:
        return None, num_source_rows
    sql = " AND ".join(f"({c})" for c in conjuncts)
    return parse_predicate(sql, target_schema), num_source_rows


def _summarize_locally(
    source: DataFrame, usable: list[tuple[int, JoinKey, T.DataType]]
) -> tuple[int, dict[int, KeySummary]] | None:
    """Count and key summaries from the key columns collected as Arrow, or None if the source is large."""
    columns = [F.expr(key.source_sql).alias(f"k{i}") for i, key, _ in usable] or [F.lit(True).alias("row")]
    keys = source.select(*columns).limit(LOCAL_SUMMARY_MAX_ROWS + 1).toArrow()
    if keys.num_rows > LOCAL_SUMMARY_MAX_ROWS:
        return None
    summaries = {}
    for i, _, _ in usable:
        present = pc.drop_null(keys.column(f"k{i}"))
        if len(present) == 0:
            summaries[i] = KeySummary(None, None, None)
            continue
        distinct = pc.unique(present)
        values = distinct.to_pylist() if len(distinct) <= IN_LIST_MAX else None
        summaries[i] = KeySummary(pc.min(present).as_py(), pc.max(present).as_py(), values)
    return keys.num_rows, summaries


def _summarize_on_spark(
    source: DataFrame, usable: list[tuple[int, JoinKey, T.DataType]]
) -> tuple[int, dict[int, KeySummary]]:
    aggs = [F.count(F.lit(1)).alias("n")]
    for i, key, _ in usable:
        value = F.expr(key.source_sql)
        aggs += [F.min(value).alias(f"lo{i}"), F.max(value).alias(f"hi{i}"), F.approx_count_distinct(value).alias(f"nd{i}")]
    row = source.agg(*aggs).collect()[0]
    summaries = {}
    for i, key, _ in usable:
        values = _distinct_values(source, key) if int(row[f"nd{i}"]) <= IN_LIST_MAX * 1.1 else None
        summaries[i] = KeySummary(row[f"lo{i}"], row[f"hi{i}"], values)
    return int(row["n"]), summaries


def _distinct_values(source: DataFrame, key: JoinKey) -> list[object] | None:
    values = [
        r[0]
        for r in source.select(F.expr(key.source_sql).alias("k")).where(F.col("k").isNotNull()).distinct()
        .limit(IN_LIST_MAX + 1).collect()
    ]
    return values if len(values) <= IN_LIST_MAX else None


def _in_list_sql(values: list[object] | None, target_type: T.DataType, column: str) -> str | None:
    if not values:
        return None
    literals = [_literal(v, target_type) for v in values]
    if any(lit is None for lit in literals):
        return None
    return f"{column} IN ({', '.join(str(lit) for lit in sorted(literals, key=str))})"
