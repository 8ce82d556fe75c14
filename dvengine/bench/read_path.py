"""Spark reads of a table with deletion vectors against the plain Parquet scan of the same files.

    python -m dvengine.bench.read_path [--rows N] [--files F] [--repeat K] [--out DIR] [--dv-reader R ...]
        [--spark-session dvengine|plain|connect]

Measures ``count + sum(id) + sum(value)`` (every row and two columns touched) through:
``spark.read.parquet`` of the data files (no DVs applied: the floor), ``DeltaTable.toDF()``
with no DVs, after a 1-row DELETE (one file carries a DV), after DVs on 1 % of the rows of every
file; plus ``toArrow()`` and ``spark.read.format("delta")`` (the same plan as ``toDF()``, reached
through the registered format: the difference is the cost of resolving the format). The DV'd
cases run once per ``--dv-reader`` (``jvm``: the JVM format applying DVs inside the Parquet scan;
``python``: the join/filter plan), in the same session. ``--repeat`` interleaved rounds, ratios
against the floor taken in the same round (see ``phase``). DV'd cases must return the Arrow
reader's count and sums, or the run fails. ``--spark-session``: the session the reads run in:
``dvengine`` (get_or_create_session, the default), ``plain`` (a user's bare
``SparkSession.builder.master(...).getOrCreate()``), ``connect`` (a Spark Connect client of a local
server); the floor is the plain Parquet scan in that same session.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.outputs import write_report
from dvengine.storage import resolve_data_path


def _build(root: str, rows: int, files: int) -> None:
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        values = np.random.default_rng(i).random(len(ids))
        dvengine.write(pa.table({"id": ids, "value": values}), root, mode="append" if i else "error")


PHASES = ("clean", "one-dv", "many-dvs")


def run(
    rows: int,
    files: int,
    repeat: int,
    work: str,
    dv_readers: tuple[str, ...] = ("auto",),
    phases: tuple[str, ...] = PHASES,
    session_kind: str = "dvengine",
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from dvengine.commands.options import CONF_DV_READER
    from dvengine.engine.spark.session import start_session

    spark = start_session(session_kind)
    root = os.path.join(work, "t")
    _build(root, rows, files)
    paths = [resolve_data_path(root, a.path) for a in DeltaTable.forPath(None, root).snapshot().files]

    def facts(df: Any) -> tuple[int, int, float]:
        row = df.agg(F.count(F.lit(1)), F.sum("id"), F.sum("value")).collect()[0]
        return int(row[0]), int(row[1]), float(row[2])

    def plain() -> Any:
        return facts(spark.read.parquet(*paths))

    def through_dvengine() -> Any:
        return facts(DeltaTable.forPath(spark, root).toDF())

    def through_format() -> Any:
        return facts(spark.read.format("delta").load(root))

    def with_dv_reader(reader: str, through: Callable[[], Any] = through_dvengine) -> Callable[[], Any]:
        def read() -> Any:
            spark.conf.set(CONF_DV_READER, reader)
            try:
                return through()
            finally:
                spark.conf.unset(CONF_DV_READER)

        return read

    def arrow_facts() -> tuple[int, int, float]:
        t = DeltaTable.forPath(None, root).toArrow()
        return t.num_rows, int(pc.sum(t["id"]).as_py() or 0), float(pc.sum(t["value"]).as_py() or 0.0)

    def through_arrow() -> Any:
        return DeltaTable.forPath(None, root).toArrow().num_rows

    out: dict[str, Any] = {"rows": rows, "files": files, "repeat": repeat, "spark_session": session_kind, "cases": {}}
    plain() and through_dvengine()  # warm-up: JIT and caches, not timed

    def phase(cases: dict[str, Callable[[], Any]], checked: tuple[str, ...]) -> None:
        """Interleaved rounds: each round runs the floor and every case in a shuffled order, so a
        case's ratio is taken against the floor measured within the same round (load on a shared
        machine drifts more between sequential blocks than within a round). The cases in ``checked`` must
        return the Arrow reader's count and sums for the table as it is (DVs applied)."""
        for fn in cases.values():
            fn()  # warm-up of this plan shape, not timed
        want = arrow_facts()
        times: dict[str, list[float]] = {name: [] for name in ["floor", *cases]}
        results: dict[str, Any] = {}
        order = [("floor", plain), *cases.items()]
        shuffle = random.Random(len(out["cases"]))  # seeded: the same orders on every run
        for _ in range(repeat):
            shuffle.shuffle(order)  # no case always runs right after the same one (GC, caches)
            for name, fn in order:
                started = time.perf_counter()
                results[name] = fn()
                times[name].append(time.perf_counter() - started)
        for name in checked:
            if not _same_facts(results[name], want):
                raise AssertionError(f"read-path case {name!r} returned {results[name]}, the Arrow reader {want}")
        for name, seconds in times.items():
            if name == "floor":
                continue
            ratios = [a / b for a, b in zip(seconds, times["floor"], strict=True)]
            out["cases"][name] = {
                "median_s": round(statistics.median(seconds), 3),
                "min_s": round(min(seconds), 3),
                "max_s": round(max(seconds), 3),
                "floor_median_s": round(statistics.median(times["floor"]), 3),
                "x_floor": round(statistics.median(ratios), 2),
                "x_floor_quartiles": [round(q, 2) for q in statistics.quantiles(ratios, n=4)] if len(ratios) > 1 else None,
                "result": str(results[name]),
            }

    if "clean" in phases:
        phase({"toDF, no DVs": through_dvengine, "format('delta'), no DVs": through_format}, ("toDF, no DVs",))
    DeltaTable.forPath(None, root).delete("id = 7", engine="local")
    one_dv = {f"toDF ({reader}), 1 file with a 1-row DV": with_dv_reader(reader) for reader in dv_readers}
    if "one-dv" in phases:
        phase(one_dv, tuple(one_dv))
    if "many-dvs" not in phases:
        return out
    DeltaTable.forPath(None, root).delete("id % 100 = 3", engine="local", mode="dv")
    many: dict[str, Callable[[], Any]] = {}
    for reader in dv_readers:
        many[f"toDF ({reader}), DVs on 1% of rows in every file"] = with_dv_reader(reader)
        many[f"format('delta') ({reader}), DVs on 1% of rows in every file"] = with_dv_reader(reader, through_format)
    many["toArrow, DVs on 1% of rows in every file"] = through_arrow
    phase(many, tuple(name for name in many if not name.startswith("toArrow")))
    return out


def _same_facts(got: tuple[int, int, float], want: tuple[int, int, float]) -> bool:
    """Count and integer sum exactly; the double sum to 1e-9 relative (summation order differs)."""
    return got[:2] == want[:2] and abs(got[2] - want[2]) <= 1e-9 * max(1.0, abs(want[2]))


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Spark read path: {report['rows']:,} rows in {report['files']} files, {report['repeat']} interleaved rounds, "
        f"{report.get('spark_session', 'dvengine')} session",
        "",
        "Each round runs the plain Parquet scan of the same files (the floor: no DVs applied) and every case",
        "in a shuffled order; 'x parquet scan' is the median of the per-round ratios, with their quartiles.",
        "",
        "| read | median s | min-max s | floor median s | x parquet scan | ratio quartiles |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, case in report["cases"].items():
        quartiles = case.get("x_floor_quartiles")
        spread = "-" if not quartiles else f"{quartiles[0]}-{quartiles[2]}"
        lines.append(
            f"| {name} | {case['median_s']} | {case['min_s']}-{case['max_s']} | {case['floor_median_s']} "
            f"| {case['x_floor']} | {spread} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.read_path", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument(
        "--phase", action="append", choices=PHASES, dest="phases",
        help="table states to measure: no DVs, one 1-row DV, DVs on 1 %% of every file; repeat to combine, default: all",
    )
    parser.add_argument(
        "--dv-reader", action="append", choices=["auto", "jvm", "python"], dest="dv_readers",
        help="how DV'd files are read (dvengine.read.dvReader); repeat to compare, default: auto",
    )
    parser.add_argument(
        "--spark-session", choices=["dvengine", "plain", "connect"], default="dvengine",
        help="dvengine: get_or_create_session; plain: a user's bare builder; connect: a local Spark Connect server",
    )
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dvengine-read-")
    try:
        report = run(
            args.rows, args.files, args.repeat, work, tuple(args.dv_readers or ["auto"]), tuple(args.phases or PHASES),
            args.spark_session,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    markdown = to_markdown(report)
    paths = write_report(args.out, "read_path", report, markdown)
    print(markdown)
    report_uptime = os.getloadavg()
    print(f"load average at the end: {report_uptime[0]:.2f} {report_uptime[1]:.2f} {report_uptime[2]:.2f}")
    print(f"wrote {' and '.join(paths)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
