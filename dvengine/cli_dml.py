"""CLI commands that change tables (``create``, ``delete``); they run on a SparkSession."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dvengine.errors import InvalidArgumentError
from dvengine.storage import normalize_table_path


def _print_metrics(metrics: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")


def cmd_create(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    from dvengine.engine.spark.session import get_or_create_session
    from dvengine.engine.spark.write_api import write

    data = pq.read_table(args.source)
    partition_by = [c.strip() for c in args.partition_by.split(",")] if args.partition_by else None
    version = write(data, normalize_table_path(args.path), mode=args.mode, partitionBy=partition_by,
                    spark=get_or_create_session())
    _print_metrics({"version": version, "numOutputRows": data.num_rows})
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from dvengine.table import DeltaTable

    table = DeltaTable.forPath(None, args.path)
    _print_metrics(table.delete(args.where, mode=args.mode))
    return 0


def parse_assignment(text: str) -> tuple[str, str]:
    """``col=expr`` -> (col, expr); the expression itself is validated by the UPDATE binder."""
    column, sep, expression = text.partition("=")
    if not sep or not column.strip() or not expression.strip():
        raise InvalidArgumentError(f"--set expects COLUMN=EXPRESSION, got {text!r}")
    return column.strip(), expression.strip()


def cmd_update(args: argparse.Namespace) -> int:
    from dvengine.table import DeltaTable

    assignments = dict(parse_assignment(a) for a in args.set)
    table = DeltaTable.forPath(None, args.path)
    _print_metrics(table.update(args.where, assignments, mode=args.mode))
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
    update.add_argument("--set", action="append", required=True, metavar="COL=EXPR", help="repeatable assignment")
    update.add_argument("--where", help="SQL condition; omit to update every row")
    update.add_argument("--mode", choices=["dv", "rewrite", "auto"])
    update.set_defaults(handler=cmd_update)
