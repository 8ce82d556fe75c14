"""Benchmark: a Spark append into an identity table vs the same append into a plain table (issue 26).

The frame ends in a shuffle (``repartition``) under AQE, the shape where asking for the partition
count before the write (``df.rdd.getNumPartitions()``) ran the upstream stages a second time.
dvengine now persists the aligned frame, counts its rows per partition in one job and writes from
the persisted rows (``engine/spark/identity_values.py``), so the upstream runs once; what is left is
the persist and the count job. Each round appends ``--rows`` rows to both tables, interleaved; the
first round warms the JVM and is not counted. The script uses only the public API, so the same file
measures an older checkout (``PYTHONPATH=<old tree> python <this file>``).

Run: ``python -m dvengine.bench.identity_append [--rows 1000000] [--repeats 3] [--upstream light|heavy] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import dvengine
from dvengine import DeltaTable, IdentityGenerator


def _frame(spark: Any, rows: int, offset: int, upstream: str) -> Any:
    """``rows`` new rows ending in a shuffle: ``light`` = a range repartitioned (the upstream is
    cheaper to rerun than to persist), ``heavy`` = an aggregation of 4x as many input rows (a
    group-by, the shape where rerunning the upstream costs more than persisting its output)."""
    from pyspark.sql import functions as F

    if upstream == "heavy":
        source = spark.range(offset * 4, (offset + rows) * 4, 1, numPartitions=4)
        return source.groupBy((F.col("id") % rows + offset).alias("id")).agg(F.sum("id").alias("v"))
    light = spark.range(offset, offset + rows, 1, numPartitions=4).select(F.col("id"), (F.col("id") * 7 % 1000).alias("v"))
    return light.repartition(8, "v")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--upstream", choices=("light", "heavy"), default="light")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from dvengine.engine.spark.session import get_or_create_session

    spark = get_or_create_session()
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"plain": [], "identity": []}
    with tempfile.TemporaryDirectory() as scratch:
        plain, identity = os.path.join(scratch, "plain"), os.path.join(scratch, "identity")
        dvengine.write(pa.table({"id": pa.array([0], pa.int64()), "v": pa.array([0], pa.int64())}), plain, mode="append")
        (DeltaTable.create(None).location(identity)
         .addColumn("key", "bigint", generatedAlwaysAs=IdentityGenerator(start=1, step=1))
         .addColumn("id", "bigint").addColumn("v", "bigint").execute())
        for rnd in range(args.repeats + 1):
            pair = (("plain", plain), ("identity", identity))
            for name, path in pair if rnd % 2 == 0 else pair[::-1]:
                frame = _frame(spark, args.rows, rnd * args.rows, args.upstream)
                started = time.perf_counter()
                dvengine.write(frame, path, mode="append")
                if rnd:
                    times[name].append(time.perf_counter() - started)
        keys = [r["key"] for r in DeltaTable.forPath(None, identity).toArrow().select(["key"]).to_pylist()]
        total = (args.repeats + 1) * args.rows
        assert len(set(keys)) == len(keys) == total, "identity values must be unique"
        dense = sorted(keys) == list(range(1, total + 1))
    summary = {
        name: {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)} for name, ts in times.items()
    }
    result = {"rows": args.rows, "repeats": args.repeats, "upstream": args.upstream, "load_before": load_before, "load_after": os.getloadavg(), "seconds": summary,
              "values_dense": dense, "highest_value": max(keys),
              "ratio_identity_to_plain": summary["identity"]["median_s"] / summary["plain"]["median_s"]}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    spark.stop()
    return result


if __name__ == "__main__":
    main()
