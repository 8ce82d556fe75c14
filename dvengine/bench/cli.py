"""``dvengine bench``: argparse wiring for the benchmark harness.

``register(subparsers)`` adds the subcommand to the main CLI; ``python -m dvengine.bench``
runs the same parser standalone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from dvengine.bench.config import (
    ALL_CONTENDERS,
    FULL_FILES,
    FULL_REPEAT,
    FULL_ROWS,
    QUICK_FILES,
    QUICK_REPEAT,
    QUICK_ROWS,
    BenchConfig,
)
from dvengine.bench.workloads import ALL_WORKLOADS, KINDS, select_workloads

CONF_REWRITE_THRESHOLD = "dvengine.dml.rewriteThreshold"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, help=f"table rows (default {FULL_ROWS:,}; --quick: {QUICK_ROWS:,})")
    parser.add_argument("--files", type=int, help=f"data files (default {FULL_FILES}; --quick: {QUICK_FILES})")
    parser.add_argument(
        "--repeat", type=int, help=f"repetitions per measurement (default {FULL_REPEAT}; --quick: {QUICK_REPEAT})"
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=[],
        metavar="W",
        help=f"workload names or kinds {KINDS} (default: all): {', '.join(ALL_WORKLOADS)}",
    )
    parser.add_argument(
        "--contenders",
        nargs="+",
        default=list(ALL_CONTENDERS),
        choices=ALL_CONTENDERS,
        metavar="C",
        help=f"default: all of {', '.join(ALL_CONTENDERS)}",
    )
    parser.add_argument("--out", default="bench-results", help="output folder for results.json, results.md and PNGs")
    parser.add_argument(
        "--table-uri",
        help="object-store prefix (s3://bucket/prefix): run the point DML set there and on a local folder, with "
        "delta-rs on the same endpoint (settings: --storage-option or AWS_* variables)",
    )
    parser.add_argument(
        "--local-s3", action="store_true", help="like --table-uri, against a moto S3 server started on 127.0.0.1"
    )
    parser.add_argument("--ops", type=int, default=50, help="point DELETEs and UPDATEs per contender (--table-uri)")
    parser.add_argument("--quick", action="store_true", help="small table, one repetition: a few minutes on 2 cores")
    parser.add_argument("--partitioned", action="store_true", help="partition the tables by cat")
    parser.add_argument("--work-dir", help="scratch folder (kept between runs so the generated data is reused)")
    parser.add_argument("--keep-work", action="store_true", help="keep the scratch folder (base tables, copies)")
    parser.add_argument("--no-read-after", action="store_true", help="skip the full-table read after each operation")
    parser.add_argument(
        "--read-after-reps",
        type=int,
        default=1,
        help="time the full-table reads in the first N repetitions only (default 1; every run is still verified)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up operations")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a Spark SQL conf in the bench's session (repeatable), e.g. dvengine.spark.dmlStrategy=rows",
    )
    parser.add_argument(
        "--spark-session",
        choices=["dvengine", "plain", "connect"],
        default="dvengine",
        help="session of the dvengine contenders: dvengine (get_or_create_session), plain (a user's bare "
        "SparkSession.builder...getOrCreate()), connect (a local Spark Connect server)",
    )
    parser.add_argument(
        "--rewrite-threshold",
        type=float,
        help=f"set {CONF_REWRITE_THRESHOLD} for the session (what dvengine-auto uses)",
    )
    parser.add_argument(
        "--reads-per-write",
        type=float,
        default=1.0,
        help="full reads within which a rewrite must pay for itself, to derive a threshold from the crossover (default 1)",
    )
    parser.add_argument(
        "--soak", type=int, metavar="ROUNDS",
        help="run the soak job instead (dvengine/bench/soak.py): ROUNDS rounds of 100-key upserts on --rows rows "
        "(default 1,000,000), dvengine with and without auto compaction against delta-rs; results in --out",
    )
    parser.add_argument("--soak-shape", choices=["uniform", "growing", "both"], default="both",
                        help="key shape of the soak job (default both)")
    parser.add_argument("--profile", action="store_true", help="soak: cProfile each dvengine contender's last round")
    parser.add_argument("--soak-contenders", nargs="+", choices=["dvengine", "dvengine-nocompact", "delta-rs"],
                        default=None,
                        help="soak: which contenders run (default all three); leave out dvengine-nocompact for "
                        "long runs: without compaction each round reads every file so far (quadratic over 10,000 rounds)")
    parser.add_argument("--soak-vacuum-every", type=int, default=0, metavar="N",
                        help="soak: VACUUM the delta-rs table (retention 0) every N rounds, outside the timed "
                        "section, so a long run fits the disk (delta-rs rewrites the table every round, ~15 MB; "
                        "30 GB per 2,000 rounds); the vacuumed bytes still count as written. Default 0 = never")
    parser.add_argument("--soak-workers", action="store_true",
                        help="soak: run each contender in its own worker process (same lockstep; each worker "
                        "times its own rounds, GC and reads), to tell co-residence in one process from the "
                        "machine's speed drifting")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    quick = bool(args.quick)
    return BenchConfig(
        rows=args.rows or (QUICK_ROWS if quick else FULL_ROWS),
        files=args.files or (QUICK_FILES if quick else FULL_FILES),
        repeat=args.repeat or (QUICK_REPEAT if quick else FULL_REPEAT),
        partitioned=bool(args.partitioned),
        workloads=select_workloads(args.workloads, quick),
        contenders=tuple(args.contenders),
        out_dir=args.out,
        work_dir=args.work_dir,
        keep_work=bool(args.keep_work),
        read_after=not args.no_read_after,
        read_after_reps=args.read_after_reps,
        warmup=not args.no_warmup,
        quick=quick,
        spark_conf=parse_spark_conf(args.spark_conf),
        spark_session=args.spark_session,
    )


def parse_spark_conf(values: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` pairs (``--spark-conf``) as a dict; a pair without ``=`` or key is a ValueError."""
    conf: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--spark-conf takes KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf


def run_bench(args: argparse.Namespace, spark: Any = None) -> int:
    """Run, write the outputs, print where they are; exit 1 if any contender failed its checks."""
    from dvengine.bench.outputs import write_outputs
    from dvengine.bench.results import STATUS_FAILED
    from dvengine.bench.runner import run_benchmark

    if args.soak is not None:
        from dvengine.bench.soak import run_from_args

        if args.soak < 1:
            print("dvengine bench: error: --soak needs at least 1 round", file=sys.stderr)
            return 2
        if args.soak_vacuum_every < 0:
            print("dvengine bench: error: --soak-vacuum-every must not be negative", file=sys.stderr)
            return 2
        return run_from_args(
            args.soak, args.soak_shape, args.rows or 1_000_000, args.out, args.profile, args.soak_contenders,
            args.soak_vacuum_every, workers=args.soak_workers,
        )
    if getattr(args, "table_uri", None) or getattr(args, "local_s3", False):
        from dvengine.bench.object_store import run_cli

        return run_cli(
            args.table_uri, dict(getattr(args, "storage_option", []) or []), args.local_s3,
            args.rows or 1_000_000, args.files or 10, args.ops, args.out,
        )
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"dvengine bench: error: {exc}", file=sys.stderr)
        return 2
    if args.rewrite_threshold is not None:
        if spark is None:
            from dvengine.engine.spark.session import get_or_create_session

            spark = get_or_create_session()
        spark.conf.set(CONF_REWRITE_THRESHOLD, str(args.rewrite_threshold))
    payload = run_benchmark(config, spark=spark, log=lambda line: print(line, flush=True))
    paths = write_outputs(payload, config.out_dir, reads_per_write=args.reads_per_write)
    failed = sorted({(m["workload"], m["contender"]) for m in payload["measurements"] if m["status"] == STATUS_FAILED})
    print(f"\nresults: {os.path.abspath(config.out_dir)}")
    for path in paths:
        print(f"  {path}")
    if failed:
        print(f"FAILED correctness checks (not timed): {', '.join(f'{w}/{c}' for w, c in failed)}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``bench`` to the main CLI's subparsers (``set_defaults(handler=...)`` convention)."""
    parser = subparsers.add_parser(
        "bench",
        help="benchmark DELETE/UPDATE/MERGE: deletion vectors vs copy-on-write vs delta-rs",
        description="Generate a table, run each workload on fresh copies for every contender, check correctness,"
        " and write results.json, results.md and PNG plots.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_bench)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dvengine bench")
    add_arguments(parser)
    return run_bench(parser.parse_args(argv))
