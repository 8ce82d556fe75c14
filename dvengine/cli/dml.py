"""CLI commands that change tables (``create``, ``delete``, ``update``); they run on a SparkSession.

Everything that can be checked without Spark (the table path, the input Parquet file, the
arguments) is checked first, so a typo fails in well under a second with one line of error
instead of after a JVM start. The session the CLI starts keeps Spark's own output (start-up
banner, log lines, executors' Java stacks) off the terminal unless ``--debug`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.errors import InvalidArgumentError, TableAlreadyExistsError
from dvengine.storage import is_object_uri, normalize_table_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dvengine.api.table import DeltaTable


def _print_metrics(metrics: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")


def parquet_source_schema(path: str, option: str) -> pa.Schema:
    """Schema of the Parquet file (or folder of Parquet files) named by ``option``, read without Spark.

    InvalidArgumentError naming the file when it is missing or not Parquet (with Arrow's error as
    cause), so ``--from``/``--source`` mistakes never reach Spark's error reporting.
    """
    if not os.path.exists(path):
        raise InvalidArgumentError(f"{option} {path}: no such file or folder")
    try:
        return pq.ParquetDataset(path).schema if os.path.isdir(path) else pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidArgumentError(f"{option} {path} is not a readable Parquet file: {reason}") from exc


def cli_session(args: argparse.Namespace) -> SparkSession:
    """The SparkSession for a CLI command: reused if active, else started quietly (see
    ``engine.spark.session.quiet_session``); ``--debug`` leaves Spark's logging on."""
    from dvengine.engine.spark.session import quiet_session

    return quiet_session(debug=bool(getattr(args, "debug", False)))


def cmd_create(args: argparse.Namespace) -> int:
    from dvengine.engine.spark.write_api import write
    from dvengine.log import table_exists

    root = normalize_table_path(args.path)
    if args.mode == "error" and table_exists(root):  # write() would say so too, but only after Spark starts
        raise TableAlreadyExistsError(f"a Delta table already exists at {root}; use --mode append or overwrite")
    parquet_source_schema(args.source, "--from")
    data = pq.read_table(args.source)
    partition_by = [c.strip() for c in args.partition_by.split(",")] if args.partition_by else None
    if is_object_uri(root):  # written in-process: Spark jobs on object stores are not implemented yet
        from dvengine import write as write_in_process

        version = write_in_process(data, root, mode=args.mode, partitionBy=partition_by)
    else:
        version = write(data, root, mode=args.mode, partitionBy=partition_by, spark=cli_session(args))
    _print_metrics({"version": version, "numOutputRows": data.num_rows})
    return 0


def _check_expressions(table: DeltaTable, where: str | None, assignments: dict[str, str]) -> None:
    """Parse and bind the condition and SET expressions against the table's schema before Spark starts.

    The DML itself binds them again; doing it here only makes a typo fail in milliseconds.
    """
    from dvengine.expressions import parse_predicate, parse_value_expression

    schema = table.snapshot().schema
    if where is not None:
        parse_predicate(where, schema)
    for expression in assignments.values():
        parse_value_expression(expression, schema)


def cmd_delete(args: argparse.Namespace) -> int:
    from dvengine.api.table import DeltaTable

    table = DeltaTable.forPath(None, args.path)  # a missing table fails here, before Spark starts
    _check_expressions(table, args.where, {})
    if not is_object_uri(table.path):  # object-store tables run in-process (Spark on stores: not yet)
        cli_session(args)
    _print_metrics(table.deleteMetrics(args.where, mode=args.mode))
    return 0


def parse_assignment(text: str) -> tuple[str, str]:
    """``col=expr`` -> (col, expr); the expression itself is validated by the UPDATE binder."""
    column, sep, expression = text.partition("=")
    if not sep or not column.strip() or not expression.strip():
        raise InvalidArgumentError(f"--set expects COLUMN=EXPRESSION, got {text!r}")
    return column.strip(), expression.strip()


def assignment_argument(text: str) -> tuple[str, str]:
    """argparse type for ``--set``: malformed syntax is a usage error (exit 2)."""
    try:
        return parse_assignment(text)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def cmd_update(args: argparse.Namespace) -> int:
    from dvengine.api.table import DeltaTable

    assignments = dict(args.set)
    table = DeltaTable.forPath(None, args.path)
    _check_expressions(table, args.where, assignments)
    if not is_object_uri(table.path):  # object-store tables run in-process (Spark on stores: not yet)
        cli_session(args)
    _print_metrics(table.updateMetrics(args.where, assignments, mode=args.mode))
    return 0


def register(sub: Any) -> None:
    create = sub.add_parser("create", help="create a table from a Parquet file (deletion vectors enabled)")
    create.add_argument("path")
    create.add_argument("--from", dest="source", required=True, help="Parquet file with the rows")
    create.add_argument("--partition-by", help="comma-separated partition columns")
    create.add_argument("--mode", choices=["error", "append", "overwrite"], default="error")
    create.set_defaults(handler=cmd_create)

    delete = sub.add_parser("delete", help="DELETE rows matching a SQL condition, printing the metrics")
    delete.add_argument("path")
    delete.add_argument("--where", help="SQL condition; omit to delete every row")
    delete.add_argument("--mode", choices=["dv", "rewrite", "auto"])
    delete.set_defaults(handler=cmd_delete)

    update = sub.add_parser("update", help="UPDATE rows matching a SQL condition, printing the metrics")
    update.add_argument("path")
    update.add_argument(
        "--set", action="append", required=True, type=assignment_argument, metavar="COL=EXPR", help="repeatable assignment"
    )
    update.add_argument("--where", help="SQL condition; omit to update every row")
    update.add_argument("--mode", choices=["dv", "rewrite", "auto"])
    update.set_defaults(handler=cmd_update)
