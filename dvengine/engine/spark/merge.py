"""MERGE on Spark: running a MERGE request, collecting small sources, and the ``dvengine upsert`` command.

The builder only records clauses (names and semantics as in delta-spark, plus ``withMode``);
all checking and work happens in :func:`execute`, so a builder can be assembled freely and a
bad clause still leaves the table untouched. Execution lives in ``merge_exec``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from dvengine.commands.merge_clauses import MergeClause
from dvengine.engine.local.write_api import as_arrow_table, normalize_arrow_types
from dvengine.engine.spark.merge_exec import MergeRequest, execute_merge


def dataframe_alias(df: DataFrame) -> str | None:
    """The alias given with ``df.alias(name)`` (a SubqueryAlias at the top of the plan), if any.

    PySpark has no public accessor; the analyzed plan of a classic DataFrame carries it. Spark
    Connect frames (no JVM plan) answer None and need an explicit alias.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().analyzed()
        if str(plan.nodeName()) == "SubqueryAlias":
            return str(plan.alias())
    except Exception:
        return None
    return None


def collect_small_source(source: DataFrame, max_rows: int | None) -> pa.Table | None:
    """The source as Arrow when it has at most ``max_rows`` rows (one Spark job), else None."""
    frame = source if max_rows is None else source.limit(max_rows + 1)
    table = frame.toArrow()
    if max_rows is not None and table.num_rows > max_rows:
        return None
    return normalize_arrow_types(table)


def local_merge_resolver(spark: SparkSession) -> Any:
    """``LocalMergeRequest.resolver`` for a session: resolve Columns against empty frames of both schemas."""
    from dvengine.engine.spark.merge_exec import column_resolver
    from dvengine.engine.spark.reader import spark_schema

    def resolver(target: Any, source: Any, target_alias: str, source_alias: str) -> Any:
        return column_resolver(spark, target, spark_schema(source), target_alias, source_alias)

    return resolver


def run_spark_merge(
    spark: SparkSession,
    table_root: str,
    target_alias: str | None,
    source: Any,
    source_alias: str | None,
    condition: object,
    clauses: Sequence[MergeClause],
    mode: str | None,
    schema_evolution: bool = False,
) -> dict[str, Any]:
    """Execute a MERGE on Spark (an Arrow or pandas source becomes a Spark DataFrame)."""
    from dvengine.engine.spark.session import check_python_workers

    check_python_workers(spark)
    arrow = as_arrow_table(source)
    frame = spark.createDataFrame(arrow) if arrow is not None else source
    request = MergeRequest(
        table_root=table_root,
        target_alias=target_alias,
        source=frame,
        source_alias=source_alias,
        condition=condition,  # type: ignore[arg-type]
        clauses=tuple(clauses),
        mode=mode,
        schema_evolution=schema_evolution,
    )
    return execute_merge(spark, request)
