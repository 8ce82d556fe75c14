"""Converting pyspark Columns to SQL text, so every condition goes through one parser.

An unresolved Column prints as Spark's internal tree (``and(<(id, 20), ...)``), not as SQL.
Resolving it against an empty DataFrame with the table's schema and printing the analyzed
expression yields real Spark SQL (``((id < CAST(20 AS BIGINT)) AND ...)``), which is then
bound and validated exactly like a condition given as a string.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame

from dvengine.errors import InvalidPredicateError, UnsupportedFeatureError
from dvengine.writing.defaults import mentions_default_keyword


def _require_jvm_plan(frame: DataFrame) -> None:
    """Connect frames have no JVM plan to resolve a Column against: a typed refusal, checked before
    the callers' ``try`` so it is not reported as a bad expression."""
    if getattr(frame, "_jdf", None) is None:
        raise UnsupportedFeatureError(
            "conditions and values given as pyspark Columns cannot be resolved on a Spark Connect session (no JVM "
            "plan on the client): pass them as SQL text, e.g. delete(\"id = 5\") or update(..., {\"v\": \"v + 1\"})"
        )


def _analyzed(frame: DataFrame) -> Any:
    jdf: Any = frame._jdf
    return jdf.queryExecution().analyzed()


def predicate_column_to_sql(column: Column, frame: DataFrame) -> str:
    """SQL of a boolean Column resolved against ``frame`` (usually empty, with the table schema)."""
    _require_jvm_plan(frame)
    try:
        return str(_analyzed(frame.filter(column)).condition().sql())
    except Exception as exc:
        raise InvalidPredicateError(f"cannot resolve condition {column!r} against columns {frame.columns}: {exc}") from exc


def value_column_to_sql(column: Column, frame: DataFrame) -> str:
    """SQL of a value Column (UPDATE SET / MERGE values) resolved against ``frame``."""
    _require_jvm_plan(frame)
    try:
        project = _analyzed(frame.select(column.alias("__dvengine_value")))
        return str(project.projectList().apply(0).child().sql())
    except Exception as exc:
        raise InvalidPredicateError(f"cannot resolve expression {column!r} against columns {frame.columns}: {exc}") from exc


def update_value_column_to_sql(column: Column, frame: DataFrame) -> str:
    """SQL of an UPDATE SET value Column. As :func:`value_column_to_sql`, except that a Column the
    table cannot resolve because it names DEFAULT (``F.expr("DEFAULT")``, ``F.col("DEFAULT")``)
    is handed on as its own SQL text: delta-spark's update() puts the Column into Spark's UpdateTable,
    whose analyzer reads it as the DEFAULT keyword (see dvengine.writing.defaults)."""
    try:
        return value_column_to_sql(column, frame)
    except InvalidPredicateError:
        jc: Any = column._jc  # the JVM Column: its node prints as the SQL it was written as
        text = str(jc.node().sql())
        if mentions_default_keyword(text):
            return text
        raise
