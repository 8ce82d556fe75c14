"""MERGE on Spark: running a MERGE request, collecting small sources, and the ``dvengine upsert`` command.

The builder only records clauses (names and semantics as in delta-spark, plus ``withMode``);
all checking and work happens in :func:`execute`, so a builder can be assembled freely and a
bad clause still leaves the table untouched. Execution lives in ``merge_exec``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from dvengine.commands.merge_clauses import MergeClause
from dvengine.engine.local.write_api import as_arrow_table, normalize_arrow_types
from dvengine.engine.spark.merge_exec import MergeRequest, execute_merge
from dvengine.planning.decisions import MODES
from dvengine.storage import normalize_table_path


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
    )
    return execute_merge(spark, request)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def upsert_condition(keys: list[str]) -> str:
    return " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in keys)


def key_columns(text: str) -> list[str]:
    """argparse type for ``--key``: comma-separated names; none at all is a usage error (exit 2)."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise argparse.ArgumentTypeError(f"needs at least one column name, got {text!r}")
    return keys


def cmd_upsert(args: argparse.Namespace) -> int:
    """The source file and the table are checked without Spark, so typos fail before a JVM starts."""
    from dvengine.cli_dml import cli_session, parquet_source_schema
    from dvengine.log import latest_version

    keys: list[str] = args.key
    root = normalize_table_path(args.path)
    latest_version(root)  # TableNotFoundError before Spark starts
    parquet_source_schema(args.source, "--source")
    import pyarrow.parquet as pq

    from dvengine.table import DeltaTable

    # The source is read with Arrow and merged in-process when it fits (no JVM); a session is
    # started only if the MERGE must run on Spark.
    source = pq.read_table(args.source)
    table = DeltaTable(None, root, "t")
    table._spark_factory = lambda: cli_session(args)
    builder = (
        table.merge(source, upsert_condition(keys), source_alias="s")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
    )
    if args.mode:
        builder = builder.withMode(args.mode)
    metrics = builder.execute()
    sys.stdout.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return 0


def register_cli(subparsers: Any) -> None:
    """Add ``dvengine upsert PATH --source FILE.parquet --key COL[,COL...] [--mode dv|rewrite|auto]``."""
    upsert = subparsers.add_parser(
        "upsert", help="MERGE a Parquet file into a table by key: update all columns on match, insert otherwise"
    )
    upsert.add_argument("path")
    upsert.add_argument("--source", required=True, help="Parquet file with the new rows")
    upsert.add_argument(
        "--key", required=True, type=key_columns, help="comma-separated key columns (same names in table and file)"
    )
    upsert.add_argument("--mode", choices=list(MODES))
    upsert.set_defaults(handler=cmd_upsert)
