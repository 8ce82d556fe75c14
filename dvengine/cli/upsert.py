"""``dvengine upsert``: MERGE a Parquet file into a table by key columns.

The source is read with Arrow and merged in-process when the local executor can (no JVM); a quiet
SparkSession is started only when the MERGE must run on Spark.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import pyarrow.parquet as pq

from dvengine.api.table import DeltaTable
from dvengine.cli.dml import cli_session, parquet_source_schema
from dvengine.expressions.identifiers import quote_identifier
from dvengine.planning.decisions import MODES
from dvengine.storage import normalize_table_path


def upsert_condition(keys: list[str]) -> str:
    return " AND ".join(f"t.{quote_identifier(k)} = s.{quote_identifier(k)}" for k in keys)


def key_columns(text: str) -> list[str]:
    """argparse type for ``--key``: comma-separated names; none at all is a usage error (exit 2)."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise argparse.ArgumentTypeError(f"needs at least one column name, got {text!r}")
    return keys


def cmd_upsert(args: argparse.Namespace) -> int:
    """The source file and the table are checked without Spark, so typos fail before a JVM starts."""
    from dvengine.log import latest_version

    keys: list[str] = args.key
    root = normalize_table_path(args.path)
    latest_version(root)  # TableNotFoundError before Spark starts
    parquet_source_schema(args.source, "--source")
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
    metrics = builder.executeMetrics()
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
