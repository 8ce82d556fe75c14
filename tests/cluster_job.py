"""Run on a multi-process Spark cluster (local-cluster: separate executor JVMs and Python workers).

Invoked by test_local_cluster.py as ``python tests/cluster_job.py WORKDIR``; prints one JSON line
with what it checked and exits non-zero on the first disagreement. It proves the Spark path does
not rely on driver and executors sharing a process: bitmaps and DV files are built in executor
Python workers, the golden tables are read with DVs applied on executors, and the results are
compared with the Arrow reader (checked against the golden expectations by the main suite), an
in-memory model and delta-rs.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from conftest import GOLDEN_NAMES, GOLDEN_TABLES, load_expected  # noqa: E402
from interop import rows_delta_rs, sort_rows  # noqa: E402
from tracked_tables import changed_tracked_table, stable_id_rows  # noqa: E402


def main(work: str) -> int:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import dvengine
    from dvengine import DeltaTable

    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("dvengine-cluster-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    checked: dict[str, Any] = {"golden_versions": 0, "dml_steps": 0, "executor_pids": 0}
    pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).distinct().collect()
    checked["executor_pids"] = len(pids)
    if os.getpid() in pids or len(pids) < 2:
        raise AssertionError(f"expected Python workers of two executors apart from the driver, got {pids}")

    # Golden reads: every listed version through toDF on the cluster equals the expected rows.
    for name in GOLDEN_NAMES:
        copy = Path(work) / "golden" / name
        shutil.copytree(GOLDEN_TABLES / name, copy)
        for p in [copy, *copy.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        expected = load_expected(name)
        for version in expected["versions"]:
            df = DeltaTable.forPath(spark, copy).toDF(version=int(version))
            got = sort_rows([list(r) for r in df.collect()])
            want = sort_rows(expected["versions"][version]["rows"])
            if got != want:
                raise AssertionError(f"golden {name}@{version}: toDF on the cluster differs from the expected rows")
            checked["golden_versions"] += 1

    # DML on the cluster (engine="spark"), random sequence vs an in-memory model and delta-rs.
    rng = random.Random(11)
    path = str(Path(work) / "dml")
    model = {i: (i, f"n{i % 5}", i % 3) for i in range(600)}
    data = pa.table({"id": np.arange(600, dtype=np.int64), "name": [f"n{i % 5}" for i in range(600)],
                     "grp": np.array([i % 3 for i in range(600)], dtype=np.int32)})
    for k in range(3):
        dvengine.write(data.slice(k * 200, 200), path, mode="append" if k else "error", partitionBy=["grp"])
    t = DeltaTable.forPath(spark, path)
    for step in range(10):
        kind = rng.choice(["delete", "update", "merge"])
        # both strategies of the Spark executor: file tasks (workers read the files themselves) and
        # the row plan (rows cross from the executor JVMs to their Python workers)
        spark.conf.set("dvengine.spark.dmlStrategy", "files" if step % 2 else "rows")
        lo = rng.randrange(0, 600)
        hi = lo + rng.randrange(1, 60)
        mode = rng.choice(["dv", "rewrite", "auto"])
        if kind == "delete":
            t.deleteMetrics(f"id >= {lo} AND id < {hi}", mode=mode, engine="spark")
            model = {i: r for i, r in model.items() if not lo <= i < hi}
        elif kind == "update":
            t.updateMetrics(f"id >= {lo} AND id < {hi}", {"name": "'u'"}, mode=mode, engine="spark")
            model = {i: ((r[0], "u", r[2]) if lo <= i < hi else r) for i, r in model.items()}
        else:
            keys = list(range(lo, hi)) + [1000 + step * 10 + j for j in range(3)]
            source = spark.createDataFrame([(int(x), f"m{step}", int(x) % 3) for x in keys], "id long, name string, grp int")
            (t.alias("t").merge(source.alias("s"), "t.id = s.id").withEngine("spark").withMode(mode)
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())
            for x in keys:
                model[x] = (x, f"m{step}", x % 3)
        expected_rows = sort_rows(list(model.values()))
        spark_rows = sort_rows([tuple(r) for r in t.toDF().collect()])
        arrow_rows = sort_rows([tuple(d.values()) for d in DeltaTable.forPath(None, path).toArrow().to_pylist()])
        rs_rows = rows_delta_rs(path, ["id", "name", "grp"])
        if not (spark_rows == arrow_rows == rs_rows == expected_rows):
            raise AssertionError(f"DML step {step} ({kind}, {mode}): readers disagree with the model")
        engine = t.historyRecords(1)[0]["operationMetrics"].get("executionEngine")
        if engine != "spark":
            raise AssertionError(f"DML step {step} ran on {engine!r}, not on the cluster")
        checked["dml_steps"] += 1
    checked["row_tracking_rows"] = _row_tracking_metadata_on_the_cluster(spark, Path(work) / "tracked")
    spark.stop()
    print(json.dumps(checked))
    return 0


def _row_tracking_metadata_on_the_cluster(spark: Any, root: Path) -> int:
    """``_metadata.row_id`` / ``row_commit_version`` read by executor JVMs (per-file ids travel in the
    format's options, not in driver memory) equal the Arrow reader's stable ids, after a DV DELETE
    and an UPDATE (ids kept, versions advance) on a three-file row-tracking table."""
    from dvengine import DeltaTable

    path = str(root)
    changed_tracked_table(path, files=3, rows_per_file=100, delete="id % 7 = 3", update="id % 11 = 5")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")  # several tasks, so both executors read
    frame = DeltaTable.forPath(spark, path).toDF().select("id", "v", "_metadata.row_id", "_metadata.row_commit_version")
    got = sorted((r["id"], r["v"], r["row_id"], r["row_commit_version"]) for r in frame.collect())
    spark.conf.unset("spark.sql.files.maxPartitionBytes")
    want = stable_id_rows(path)
    model_ids = sorted(i for i in range(300) if i % 7 != 3)
    if [g[0] for g in got] != model_ids or got != want:
        raise AssertionError("_metadata.row_id on the cluster differs from the Arrow reader's stable ids")
    if len({g[2] for g in got}) != len(got):
        raise AssertionError("_metadata.row_id on the cluster is not unique")
    return len(got)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
