"""Benchmark: what reading row-tracking tables through ``RowTrackingParquetFormat`` costs (issue 26).

Since ``_metadata.row_id`` exists, ``toDF()`` of a row-tracking table is one scan through the JVM
format's row-tracking subclass even when no file has a DV (before, such a table was a plain
Parquet scan). Two pairs, interleaved, on one table of ``--rows`` rows in ``--files`` files with
row tracking enabled and no DVs:

- ``scan``: ``toDF()`` summing a data column, through the format (the default now) vs the plain
  Parquet scan (``dvengine.read.dvReader=python``, which is what the read was before);
- ``row_ids``: summing ``_metadata.row_id`` and ``_metadata.row_commit_version`` from ``toDF()`` vs
  the same from ``read_row_tracking_df`` (the row plans' scan: row index and file path columns and a
  broadcast join of the per-file ids).

The first round warms the JVM and is not counted. Run:
``python -m dvengine.bench.row_id_metadata [--rows 4000000] [--out benchmarks/results/row-id-metadata]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

import dvengine
from dvengine import DeltaTable
from dvengine.bench.paired import Pair, summarize_pairs, time_pairs, write_pair_results
from dvengine.bench.results import machine_facts
from dvengine.commands.options import CONF_DV_READER
from dvengine.log import load_snapshot


def _python_plan(spark: Any, run: Callable[[], Any]) -> Callable[[], Any]:
    def wrapped() -> Any:
        spark.conf.set(CONF_DV_READER, "python")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return run()
        finally:
            spark.conf.unset(CONF_DV_READER)
    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/row-id-metadata")
    args = parser.parse_args()

    from dvengine.engine.spark.row_ids import read_row_tracking_df
    from dvengine.engine.spark.session import get_or_create_session

    spark = get_or_create_session()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "tracked")
        per_file = args.rows // args.files
        for i in range(args.files):
            ids = pa.array(range(i * per_file, (i + 1) * per_file), pa.int64())
            dvengine.write(pa.table({"id": ids, "v": ids}), path, mode="append",
                           configuration={"delta.enableRowTracking": "true"} if i == 0 else None)
        table = DeltaTable.forPath(spark, path)
        snapshot = load_snapshot(path)

        def scan() -> Any:
            return table.toDF().selectExpr("sum(v)").collect()

        def metadata_ids() -> Any:
            return table.toDF().selectExpr("sum(_metadata.row_id)", "sum(_metadata.row_commit_version)").collect()

        def plan_ids() -> Any:
            return read_row_tracking_df(spark, snapshot).selectExpr("sum(row_id)", "sum(row_commit_version)").collect()

        assert metadata_ids() == plan_ids()
        pairs: dict[str, Pair] = {
            "scan": (("parquet", _python_plan(spark, scan)), ("row_tracking_format", scan)),
            "row_ids": (("read_row_tracking_df", plan_ids), ("metadata_row_id", metadata_ids)),
        }
        times, names = time_pairs(lambda rnd: pairs, args.repeats)
    load_after = os.getloadavg()
    result = {"rows": args.rows, "files": args.files, "repeats": args.repeats, "summary": summarize_pairs(times, names),
              "times_s": times, "load_before": load_before, "load_after": load_after, "machine": machine_facts(spark)}
    title = (f"# Row-tracking reads: the JVM format and _metadata.row_id ({args.rows:,} rows, {args.files} files, "
             f"{args.repeats} repeats after a warm-up)")
    print("\n".join(write_pair_results(Path(args.out), result, title, names, "ratio to the first")))
    spark.stop()


if __name__ == "__main__":
    main()
