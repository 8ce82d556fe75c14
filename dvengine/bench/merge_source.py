"""MERGE with a Spark DataFrame source, in a chosen kind of session, against delta-rs.

    python -m dvengine.bench.merge_source [--rows N] [--files F] [--keys 1000 100000] [--repeat K]
        [--spark-session plain|dvengine|connect] [--out DIR]

An upsert of ``keys`` keys (half matching existing rows, half new) from a Spark DataFrame
(``spark.createDataFrame(arrow).cache()``, materialized before timing, as a user's source would be)
into a ``rows``-row table, with ``whenMatchedUpdateAll().whenNotMatchedInsertAll()``. delta-rs gets
the same rows as the in-memory Arrow table. Each repetition starts from a fresh copy of the same base
table (copied outside the timed region), contenders interleaved. Reported: total seconds, the time to
bring the source to the driver as Arrow (``toArrow``, measured separately on the same frame), and the
ratio to delta-rs per repetition. The merged table's row count and the updated/inserted counts are
checked against the model (and against delta-rs) in every repetition.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.outputs import write_report


def _base(root: str, rows: int, files: int) -> None:
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        data = pa.table({"id": ids, "value": np.random.default_rng(i).random(len(ids)), "cat": (ids % 10).astype(np.int32)})
        dvengine.write(data, root, mode="append" if i else "error")


def _source(rows: int, keys: int) -> pa.Table:
    rng = np.random.default_rng(keys)
    matched = rng.choice(rows, size=keys // 2, replace=False).astype(np.int64)
    new = np.arange(rows, rows + keys - keys // 2, dtype=np.int64)
    ids = np.concatenate([matched, new])
    return pa.table({"id": ids, "value": np.full(len(ids), -1.0), "cat": (ids % 10).astype(np.int32)})


def _merge_dvengine(spark: Any, path: str, source: Any) -> dict[str, Any]:
    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
    return dict(builder.whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())


def _merge_delta_rs(path: str, source: pa.Table) -> dict[str, Any]:
    from deltalake import DeltaTable as RsTable

    merger = RsTable(path).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
    return dict(merger.when_matched_update_all().when_not_matched_insert_all().execute())


def run(rows: int, files: int, keys_list: list[int], repeat: int, work: str, session_kind: str) -> dict[str, Any]:
    from dvengine.engine.spark.session import start_session

    spark = start_session(session_kind)
    base = os.path.join(work, "base")
    _base(base, rows, files)
    out: dict[str, Any] = {"rows": rows, "files": files, "repeat": repeat, "spark_session": session_kind, "cases": {}}
    for keys in keys_list:
        arrow = _source(rows, keys)
        frame = spark.createDataFrame(arrow).cache()
        frame.count()
        expected_rows = rows + (keys - keys // 2)
        times: dict[str, list[float]] = {"dvengine": [], "delta-rs": [], "toArrow": []}
        engines: list[str] = []
        for rep in range(repeat + 1):  # the first round warms up and is not kept
            for name in (["dvengine", "delta-rs"] if rep % 2 else ["delta-rs", "dvengine"]):
                copy = os.path.join(work, f"copy-{name}")
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(base, copy)
                started = time.perf_counter()
                if name == "dvengine":
                    metrics = _merge_dvengine(spark, copy, frame)
                    updated, inserted = metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]
                    engines.append(str(metrics.get("executionEngine")))
                else:
                    metrics = _merge_delta_rs(copy, arrow)
                    updated, inserted = metrics["num_target_rows_updated"], metrics["num_target_rows_inserted"]
                elapsed = time.perf_counter() - started
                count = DeltaTable.forPath(None, copy).toArrow(columns=["id"]).num_rows
                if (updated, inserted, count) != (keys // 2, keys - keys // 2, expected_rows):
                    raise AssertionError(f"{name} merge of {keys} keys: {updated} updated, {inserted} inserted, {count} rows")
                if rep:
                    times[name].append(elapsed)
            started = time.perf_counter()
            frame.toArrow()
            if rep:
                times["toArrow"].append(time.perf_counter() - started)
        frame.unpersist()
        ratios = [a / b for a, b in zip(times["dvengine"], times["delta-rs"], strict=True)]
        out["cases"][f"merge {keys:,} keys"] = {
            "dvengine_median_s": round(statistics.median(times["dvengine"]), 3),
            "dvengine_min_max_s": [round(min(times["dvengine"]), 3), round(max(times["dvengine"]), 3)],
            "delta_rs_median_s": round(statistics.median(times["delta-rs"]), 3),
            "delta_rs_min_max_s": [round(min(times["delta-rs"]), 3), round(max(times["delta-rs"]), 3)],
            "source_toArrow_median_s": round(statistics.median(times["toArrow"]), 3),
            "x_delta_rs": round(statistics.median(ratios), 2),
            "x_delta_rs_min_max": [round(min(ratios), 2), round(max(ratios), 2)],
            "executors": sorted(set(engines)),
        }
    return out


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# MERGE from a Spark DataFrame source: {report['rows']:,} rows / {report['files']} files, "
        f"{report['repeat']} rounds, {report['spark_session']} session",
        "",
        "| case | dvengine median s (min-max) | delta-rs median s (min-max) | source toArrow s | x delta-rs (min-max) | executor |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, c in report["cases"].items():
        lines.append(
            f"| {name} | {c['dvengine_median_s']} ({c['dvengine_min_max_s'][0]}-{c['dvengine_min_max_s'][1]}) "
            f"| {c['delta_rs_median_s']} ({c['delta_rs_min_max_s'][0]}-{c['delta_rs_min_max_s'][1]}) "
            f"| {c['source_toArrow_median_s']} | {c['x_delta_rs']} ({c['x_delta_rs_min_max'][0]}-{c['x_delta_rs_min_max'][1]}) "
            f"| {', '.join(c['executors'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.merge_source", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--keys", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--spark-session", choices=["dvengine", "plain", "connect"], default="plain")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dvengine-merge-source-")
    try:
        report = run(args.rows, args.files, args.keys, args.repeat, work, args.spark_session)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    markdown = to_markdown(report)
    print(markdown)
    print(f"wrote {' and '.join(write_report(args.out, 'merge_source', report, markdown))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
