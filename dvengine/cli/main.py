"""Command line: ``dvengine show|inspect|...``.

Read-only commands work from Arrow without starting a JVM, so ``show`` and ``inspect`` answer
in well under a second; commands that change a table start (or reuse) a SparkSession.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from dvengine.cli.errors import EXIT_USAGE, PROG, ArgumentParser, UsageError, exit_code, non_negative_int, report
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.features import reader_features, writer_features
from dvengine.protocol.stats import FileStats
from dvengine.read import read_snapshot_arrow
from dvengine.storage import normalize_table_path

Handler = Callable[[argparse.Namespace], int]


def json_value(value: Any) -> Any:
    """JSON form of a cell: ISO dates/timestamps, decimals as strings (exact), bytes as base64."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def _snapshot(args: argparse.Namespace) -> Snapshot:
    return load_snapshot(normalize_table_path(args.path), version=getattr(args, "version", None))


def cmd_show(args: argparse.Namespace) -> int:
    table = read_snapshot_arrow(_snapshot(args))
    if args.limit is not None:
        table = table.slice(0, args.limit)
    out = sys.stdout
    if args.format == "jsonl":
        for row in table.to_pylist():
            out.write(json.dumps({k: json_value(v) for k, v in row.items()}, ensure_ascii=False) + "\n")
    else:
        out.write(format_table(table) + "\n")
    return 0


def format_table(table: pa.Table) -> str:
    headers = table.column_names
    rows = [["null" if v is None else str(json_value(v)) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    body = [line, render(headers), line, *[render(r) for r in rows], line]
    return "\n".join(body) + f"\n({table.num_rows} rows)"


def inspect_report(snapshot: Snapshot) -> dict[str, Any]:
    files = []
    for add in snapshot.files:
        stats = FileStats.parse(add.stats)
        dv = add.deletion_vector
        files.append(
            {
                "path": add.path,
                "partitionValues": dict(add.partition_values),
                "sizeBytes": add.size,
                "rows": None if stats is None else stats.num_records,
                "deletedRows": add.deleted_row_count,
                "dvStorageType": None if dv is None else dv.storage_type,
                "dvCardinality": None if dv is None else dv.cardinality,
                "dvSizeBytes": None if dv is None else dv.size_in_bytes,
            }
        )
    protocol = snapshot.protocol
    return {
        "path": snapshot.table_root,
        "version": snapshot.version,
        "protocol": {
            "minReaderVersion": protocol.min_reader_version,
            "minWriterVersion": protocol.min_writer_version,
            "readerFeatures": sorted(reader_features(protocol)),
            "writerFeatures": sorted(writer_features(protocol)),
        },
        "properties": dict(snapshot.configuration),
        "partitionColumns": list(snapshot.partition_columns),
        "schema": json.loads(snapshot.metadata.schema_string),
        "numFiles": len(files),
        "numFilesWithDV": sum(1 for f in files if f["dvStorageType"] is not None),
        "numRecords": snapshot.num_records,
        "files": files,
    }


def cmd_inspect(args: argparse.Namespace) -> int:
    report = inspect_report(_snapshot(args))
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return 0
    p = report["protocol"]
    print(f"table      {report['path']}")
    print(f"version    {report['version']}")
    print(f"protocol   reader {p['minReaderVersion']} {p['readerFeatures']}, writer {p['minWriterVersion']} {p['writerFeatures']}")
    print(f"properties {report['properties']}")
    print(f"partitions {report['partitionColumns']}")
    print(f"files      {report['numFiles']} ({report['numFilesWithDV']} with deletion vectors), live rows {report['numRecords']}")
    for f in report["files"]:
        dv = "-" if f["dvStorageType"] is None else f"dv {f['dvStorageType']} card={f['dvCardinality']} {f['dvSizeBytes']}B"
        print(f"  {f['path']}  rows={f['rows']}  {f['sizeBytes']}B  {dv}")
    return 0


DEBUG_HELP = "on failure, print the full traceback (and leave Spark's own logging on)"


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=PROG, description="Delta Lake DML with deletion vectors on Spark")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    show = sub.add_parser("show", help="print the rows of a table (deletion vectors applied; no Spark needed)")
    show.add_argument("path")
    show.add_argument("--version", type=int)
    show.add_argument("--format", choices=["jsonl", "table"], default="table")
    show.add_argument("--limit", type=non_negative_int)
    show.set_defaults(handler=cmd_show)

    insp = sub.add_parser("inspect", help="protocol, features, properties and per-file DV details")
    insp.add_argument("path")
    insp.add_argument("--version", type=int)
    insp.add_argument("--json", action="store_true", help="machine-readable output")
    insp.set_defaults(handler=cmd_inspect)

    from dvengine.bench import cli as bench_cli
    from dvengine.cli import dml as cli_dml
    from dvengine.cli import maintenance as cli_maintenance
    from dvengine.cli import upsert as cli_upsert

    cli_dml.register(sub)
    cli_upsert.register_cli(sub)
    cli_maintenance.register(sub)
    bench_cli.register(sub)
    for command in sub.choices.values():  # `dvengine delete ... --debug` works as well as `dvengine --debug delete`
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        command.add_argument(
            "--storage-option", action="append", type=storage_option, default=[], metavar="KEY=VALUE",
            help="object-store setting as delta-rs names it (AWS_ENDPOINT_URL=..., AWS_ALLOW_HTTP=true); repeatable",
        )
    return parser


def storage_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--storage-option``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _register_storage_options(args: argparse.Namespace) -> None:
    """Options given on the command line apply to the command's table (and everything under it)."""
    options = dict(getattr(args, "storage_option", []) or [])
    path = getattr(args, "path", None)
    if options and isinstance(path, str):
        normalize_table_path(path, options)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one ``dvengine: error: ...`` line on stderr (see cli/errors.py).

    Exit codes: 0 success, 1 the command failed, 2 the command line is wrong.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(arguments)
    except UsageError as exc:
        return report(exc, EXIT_USAGE, debug="--debug" in arguments)
    handler: Handler = args.handler
    try:
        _register_storage_options(args)
        return handler(args)
    except Exception as exc:
        return report(exc, exit_code(exc), debug=bool(getattr(args, "debug", False)))


if __name__ == "__main__":
    sys.exit(main())
