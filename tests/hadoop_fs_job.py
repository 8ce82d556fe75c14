"""Spark on a table reached only through a Hadoop FileSystem, on ``local-cluster[2,1,1024]``.

Invoked by test_spark_hadoop_fs.py as ``python tests/hadoop_fs_job.py WORKDIR MAIN_JAR TEST_JAR``.
The session serves local tables to Spark under the test-only ``dvtest:`` scheme
(``io.dvengine.spark.test.RecordingFileSystem``, jvm/src/test), which records every open, create,
delete, listing and rename in every JVM and refuses rename; the driver's log and commits use
dvengine's storage layer on the same local folder (``dvengine.spark.localFileScheme=dvtest``).
Prints one JSON line: the steps checked and the FileSystem's record, for the test to assert on.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from interop import rows_delta_rs, sort_rows  # noqa: E402


def main(work: str, main_jar: str, test_jar: str) -> int:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import dvengine
    from dvengine import DeltaTable

    record_dir = str(Path(work) / "fs-record")
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("dvengine-hadoop-fs-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.jars", f"{main_jar},{test_jar}")
        .config("spark.hadoop.fs.dvtest.impl", "io.dvengine.spark.test.RecordingFileSystem")
        .config("spark.hadoop.fs.dvtest.impl.disable.cache", "true")
        .config("spark.hadoop.fs.dvtest.record.dir", record_dir)
        .config("spark.executorEnv.PYTHONPATH", os.pathsep.join(sys.path))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("dvengine.spark.localFileScheme", "dvtest")
    checked: dict[str, Any] = {"steps": [], "executor_pids": 0}
    pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).distinct().collect()
    checked["executor_pids"] = len(pids)

    path = str(Path(work) / "t")
    model = {i: (i, f"n{i % 5}", i % 3) for i in range(600)}
    data = pa.table({"id": np.arange(600, dtype=np.int64), "name": [f"n{i % 5}" for i in range(600)],
                     "grp": np.array([i % 3 for i in range(600)], dtype=np.int32)})
    for k in range(3):  # written in-process (no session): the driver's storage layer
        dvengine.write(data.slice(k * 200, 200), path, mode="append" if k else "error", partitionBy=["grp"])
    t = DeltaTable.forPath(spark, path)

    def check(step: str) -> None:
        want = sort_rows(list(model.values()))
        got_spark = sort_rows([tuple(r) for r in t.toDF().collect()])
        got_arrow = sort_rows([tuple(d.values()) for d in DeltaTable.forPath(None, path).toArrow().to_pylist()])
        got_rs = rows_delta_rs(path, ["id", "name", "grp"])
        if not (got_spark == got_arrow == got_rs == want):
            raise AssertionError(f"{step}: readers disagree with the model")
        checked["steps"].append(step)

    # DELETE on the row plan (DV files built in executor workers, written by the JVM), small DVs in files
    spark.conf.set("dvengine.spark.dmlStrategy", "auto")
    spark.conf.set("dvengine.dv.inlineMaxBytes", "0")
    t.deleteMetrics("id % 7 = 0", mode="dv", engine="spark")
    model = {i: r for i, r in model.items() if i % 7 != 0}
    check("delete-dv")
    # UPDATE: the old DVs come from the driver, new rows are written through the JVM
    t.updateMetrics("id < 100", {"name": "'u'"}, mode="dv", engine="spark")
    model = {i: ((r[0], "u", r[2]) if i < 100 else r) for i, r in model.items()}
    check("update-dv")
    # copy-on-write DELETE: survivors rewritten by Spark's writer with the direct commit protocol
    t.deleteMetrics("id >= 500 AND id < 520", mode="rewrite", engine="spark")
    model = {i: r for i, r in model.items() if not 500 <= i < 520}
    check("delete-rewrite")
    keys = [*range(150, 170), 1000, 1001, 1002]
    source = spark.createDataFrame([(int(x), "m", int(x) % 3) for x in keys], "id long, name string, grp int")
    (t.alias("t").merge(source.alias("s"), "t.id = s.id").withEngine("spark").withMode("dv")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())
    for x in keys:
        model[x] = (x, "m", x % 3)
    check("merge")
    engines = [h["operationMetrics"].get("executionEngine") for h in t.historyRecords(4)]
    if engines != ["spark"] * 4:
        raise AssertionError(f"the DML steps ran on {engines}, not all on the cluster")
    t.optimize().executeCompaction()
    check("optimize")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    t.vacuum(0.0)
    check("vacuum")

    records: list[list[str]] = []
    for log in sorted(Path(record_dir).glob("*.log")):
        records.extend(line.split("\t", 1) for line in log.read_text().splitlines())
    checked["records"] = records
    checked["table_files"] = sorted(
        str(p) for p in Path(path).rglob("*") if p.is_file() and "_delta_log" not in p.parts
    )
    spark.stop()
    print(json.dumps(checked))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
