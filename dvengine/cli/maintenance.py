"""CLI commands for table maintenance: ``history``, ``vacuum`` (no JVM) and ``purge`` (Spark).

``history`` and ``vacuum`` only read the log and the file system, so they answer without
starting Spark; ``purge`` rewrites data and starts (or reuses) a SparkSession.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any

from dvengine.cli.errors import non_negative_int
from dvengine.storage import normalize_table_path


def _dump(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")


def _iso(ms: Any) -> str:
    if not isinstance(ms, int):
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def cmd_history(args: argparse.Namespace) -> int:
    from dvengine.maintenance.history import history

    records = history(normalize_table_path(args.path), limit=args.limit)
    if args.json:
        _dump(records)
        return 0
    print(f"{'version':>7}  {'timestamp (UTC)':<29}  {'operation':<18}  {'readVersion':>11}  parameters / metrics")
    for r in records:
        read = r.get("readVersion")
        print(
            f"{r['version']:>7}  {_iso(r.get('timestamp')):<29}  {r.get('operation', '')!s:<18}  "
            f"{'' if read is None else read:>11}  {json.dumps(r.get('operationParameters', {}))} "
            f"{json.dumps(r.get('operationMetrics', {}))}"
        )
    return 0


def cmd_vacuum(args: argparse.Namespace) -> int:
    from dvengine.maintenance.vacuum import vacuum

    report = vacuum(
        normalize_table_path(args.path),
        retention_hours=args.retain_hours,
        dry_run=args.dry_run,
        enforce_retention=not args.force,
        vacuum_type="LITE" if args.lite else "FULL",
    )
    _dump(report)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    from dvengine.cli.dml import cli_session
    from dvengine.engine.spark.purge import purge
    from dvengine.log import latest_version

    root = normalize_table_path(args.path)
    latest_version(root)  # a missing table fails here, before Spark starts
    _dump(purge(cli_session(args), root, args.where, args.min_deleted_ratio))
    return 0


def register(sub: Any) -> None:
    """Add the maintenance subcommands to the ``dvengine`` argparse subparsers."""
    hist = sub.add_parser("history", help="commit history, newest first (no Spark needed)")
    hist.add_argument("path")
    hist.add_argument("--limit", type=non_negative_int, help="show at most N commits")
    hist.add_argument("--json", action="store_true", help="machine-readable output")
    hist.set_defaults(handler=cmd_history)

    vac = sub.add_parser("vacuum", help="delete unreferenced data and DV files older than the retention")
    vac.add_argument("path")
    vac.add_argument(
        "--retain-hours",
        type=float,
        default=None,
        help="retention window in hours (default: the table's delta.deletedFileRetentionDuration, 168 unless set)",
    )
    vac.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    vac.add_argument(
        "--force", action="store_true", help="allow a retention below delta.deletedFileRetentionDuration"
    )
    vac.add_argument(
        "--lite",
        action="store_true",
        help="VACUUM LITE: take the files to delete from the log's removes instead of listing the table "
        "(no listing of data folders; orphans no commit named stay for a full vacuum)",
    )
    vac.set_defaults(handler=cmd_vacuum)

    pur = sub.add_parser("purge", help="REORG ... APPLY (PURGE): rewrite files with deletion vectors")
    pur.add_argument("path")
    pur.add_argument("--where", help="SQL condition on partition columns selecting the files")
    pur.add_argument("--min-deleted-ratio", type=float, default=0.0, help="only files with deleted/physical >= R")
    pur.set_defaults(handler=cmd_purge)
