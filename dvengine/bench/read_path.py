"""Spark reads of a table with deletion vectors against the plain Parquet scan of the same files.

    python -m dvengine.bench.read_path [--rows N] [--files F] [--repeat K] [--out DIR] [--dv-reader R ...]

Measures ``count + sum(id) + sum(value)`` (every row and two columns touched) through:
``spark.read.parquet`` of the data files (no DVs applied: the floor), ``DeltaTable.toDF()``
with no DVs, after a 1-row DELETE (one file carries a DV), after DVs on 1 % of the rows of every
file; plus ``toArrow()`` and ``spark.read.format("delta")`` (the same plan as ``toDF()``, reached
through the registered format: the difference is the cost of resolving the format). The DV'd
cases run once per ``--dv-reader`` (``jvm``: the JVM format applying DVs inside the Parquet scan;
``python``: the join/filter plan), in the same session. Medians of ``--repeat`` runs, ratios
against the floor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.bench.outputs import write_report
from dvengine.storage import resolve_data_path
from dvengine.table import DeltaTable


def _build(root: str, rows: int, files: int) -> None:
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        values = np.random.default_rng(i).random(len(ids))
        dvengine.write(pa.table({"id": ids, "value": values}), root, mode="append" if i else "error")


def _time(run: Callable[[], Any], repeat: int) -> tuple[float, float, float, Any]:
    seconds = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), min(seconds), max(seconds), result


def run(rows: int, files: int, repeat: int, work: str, dv_readers: tuple[str, ...] = ("auto",)) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from dvengine.commands.options import CONF_DV_READER
    from dvengine.engine.spark.session import get_or_create_session

    spark = get_or_create_session()
    root = os.path.join(work, "t")
    _build(root, rows, files)
    paths = [resolve_data_path(root, a.path) for a in DeltaTable.forPath(None, root).snapshot().files]

    def facts(df: Any) -> tuple[int, int, float]:
        row = df.agg(F.count(F.lit(1)), F.sum("id"), F.sum("value")).collect()[0]
        return int(row[0]), int(row[1]), round(float(row[2]), 3)

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

    def through_arrow() -> Any:
        t = DeltaTable.forPath(None, root).toArrow()
        return t.num_rows

    out: dict[str, Any] = {"rows": rows, "files": files, "repeat": repeat, "cases": {}}
    plain() and through_dvengine()  # warm-up: JIT and caches, not timed

    def record(name: str, fn: Callable[[], Any]) -> None:
        median, low, high, result = _time(fn, repeat)
        out["cases"][name] = {"median_s": round(median, 3), "min_s": round(low, 3), "max_s": round(high, 3), "result": str(result)}

    record("parquet scan (floor)", plain)
    record("toDF, no DVs", through_dvengine)
    record("format('delta'), no DVs", through_format)
    DeltaTable.forPath(None, root).delete("id = 7", engine="local")
    for reader in dv_readers:
        record(f"toDF ({reader}), 1 file with a 1-row DV", with_dv_reader(reader))
    DeltaTable.forPath(None, root).delete("id % 100 = 3", engine="local", mode="dv")
    for reader in dv_readers:
        with_dv_reader(reader)()  # warm-up of this plan shape, not timed
        record(f"toDF ({reader}), DVs on 1% of rows in every file", with_dv_reader(reader))
        record(f"format('delta') ({reader}), DVs on 1% of rows in every file", with_dv_reader(reader, through_format))
    record("parquet scan (floor), again after the DV'd cases", plain)
    record("toArrow, DVs on 1% of rows in every file", through_arrow)
    floor = out["cases"]["parquet scan (floor)"]["median_s"]
    for case in out["cases"].values():
        case["x_floor"] = round(case["median_s"] / floor, 2) if floor else None
    return out


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Spark read path: {report['rows']:,} rows in {report['files']} files, medians of {report['repeat']}",
        "",
        "| read | median s | min-max s | x parquet scan |",
        "|---|---:|---:|---:|",
    ]
    for name, case in report["cases"].items():
        lines.append(f"| {name} | {case['median_s']} | {case['min_s']}-{case['max_s']} | {case['x_floor']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.read_path", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument(
        "--dv-reader", action="append", choices=["auto", "jvm", "python"], dest="dv_readers",
        help="how DV'd files are read (dvengine.read.dvReader); repeat to compare, default: auto",
    )
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dvengine-read-")
    try:
        report = run(args.rows, args.files, args.repeat, work, tuple(args.dv_readers or ["auto"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    markdown = to_markdown(report)
    paths = write_report(args.out, "read_path", report, markdown)
    print(markdown)
    print(f"wrote {' and '.join(paths)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
