"""Benchmark: what row tracking and identity columns cost the Spark executor's row plan (issue 26).

The row plan carries stable row ids on row-tracking tables (a broadcast join of the per-file
``baseRowId`` / ``defaultRowCommitVersion`` table and two materialized columns read and written)
and gives MERGE inserts into identity tables dense values (a persisted join, one count job, one
Arrow pass). Each pair runs the same command on two tables that differ only in the feature,
interleaved, on ``dvengine.spark.dmlStrategy=rows`` with MERGE sources above
``localMaxSourceRows``:

- ``update``: UPDATE of 1 % of the rows (DVs), plain table vs row tracking;
- ``update_rewrite``: the same, copy-on-write (Spark's writer copies the files' other rows);
- ``merge``: a MERGE upsert (half updates, half inserts) of ``--source`` rows, plain vs row tracking;
- ``merge_insert``: an insert-only MERGE of ``--source`` new rows, plain vs an identity column.

The first round warms the JVM and is not counted. Run:
``python -m dvengine.bench.row_plan_features [--rows 2000000] [--out benchmarks/results/row-plan-features]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

import dvengine
from dvengine import DeltaTable, IdentityGenerator
from dvengine.bench.paired import Pair, summarize_pairs, time_pairs, write_pair_results
from dvengine.bench.results import machine_facts


def _tables(root: Path, rows: int) -> dict[str, str]:
    data = pa.table({"id": pa.array(range(rows), pa.int64()), "v": pa.array(range(rows), pa.int64())})
    paths = {name: str(root / name) for name in ("plain", "tracked", "plain_insert", "identity")}
    dvengine.write(data, paths["plain"], mode="append")
    dvengine.write(data, paths["tracked"], mode="append", configuration={"delta.enableRowTracking": "true"})
    dvengine.write(data, paths["plain_insert"], mode="append")
    (DeltaTable.create(None).location(paths["identity"])
     .addColumn("key", "bigint", generatedAlwaysAs=IdentityGenerator(start=1, step=1)).addColumn("id", "bigint")
     .addColumn("v", "bigint").execute())
    dvengine.write(data, paths["identity"], mode="append")
    return paths


def _update(spark: Any, path: str, rnd: int, mode: str = "dv") -> Callable[[], Any]:
    """UPDATE of the 1 % of rows with ``id % 100 = rnd`` (other rows each round)."""
    return lambda: DeltaTable.forPath(spark, path).updateMetrics(f"id % 100 = {rnd}", {"v": "v + 1"}, mode=mode, engine="spark")


def _merge(spark: Any, path: str, source: Any, insert_only: bool) -> Callable[[], Any]:
    """A MERGE of ``source`` on ``id``: update the matched rows (unless ``insert_only``), insert the rest
    (an identity column the values leave out gets new values)."""
    def run() -> Any:
        builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
        if not insert_only:
            builder = builder.whenMatchedUpdate(set={"v": "s.v"})
        return builder.whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"}).withEngine("spark").executeMetrics()
    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--source", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="benchmarks/results/row-plan-features")
    args = parser.parse_args()

    from dvengine.engine.spark.session import get_or_create_session

    spark = get_or_create_session()
    spark.conf.set("dvengine.spark.dmlStrategy", "rows")
    spark.conf.set("dvengine.execution.localMaxSourceRows", "0")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        paths = _tables(Path(folder), args.rows)
        rows = args.rows

        def pairs_of_round(rnd: int) -> dict[str, Pair]:
            fresh = rows + rnd * args.source  # keys no earlier round inserted
            upsert = spark.range(rows - args.source // 2, rows + args.source // 2).selectExpr(
                f"IF(id < {rows}, id, id + {fresh}) AS id", "id AS v")
            inserts = spark.range(fresh + rows, fresh + rows + args.source).selectExpr("id", "id AS v")
            return {
                "update": (("plain", _update(spark, paths["plain"], rnd)), ("tracked", _update(spark, paths["tracked"], rnd))),
                "update_rewrite": (("plain", _update(spark, paths["plain"], rnd, "rewrite")),
                                   ("tracked", _update(spark, paths["tracked"], rnd, "rewrite"))),
                "merge": (("plain", _merge(spark, paths["plain"], upsert, False)),
                          ("tracked", _merge(spark, paths["tracked"], upsert, False))),
                "merge_insert": (("plain", _merge(spark, paths["plain_insert"], inserts, True)),
                                 ("identity", _merge(spark, paths["identity"], inserts, True))),
            }

        times, names = time_pairs(pairs_of_round, args.repeats)
    load_after = os.getloadavg()
    result = {"rows": args.rows, "source_rows": args.source, "repeats": args.repeats,
              "summary": summarize_pairs(times, names), "times_s": times, "load_before": load_before,
              "load_after": load_after, "machine": machine_facts(spark)}
    title = (f"# Row plan: row tracking and identity overheads ({args.rows:,} rows, source {args.source:,}, "
             f"{args.repeats} repeats after a warm-up)")
    print("\n".join(write_pair_results(Path(args.out), result, title, names, "ratio to plain")))
    spark.stop()


if __name__ == "__main__":
    main()
