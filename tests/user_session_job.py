"""A user's own SparkSession reading a DV table, in a process of its own (argv: mode, work dir).

Run by tests/test_user_sessions.py and tests/test_wheel.py (the latter from a venv outside the
repository with dvengine installed from the built wheel). Modes:

- ``configured``: ``configure_spark_with_dvengine(SparkSession.builder...)``, the documented way;
- ``plain``: a bare ``SparkSession.builder.master(...).getOrCreate()``: dvengine adds the jar at
  the first read;
- ``nojar``: as ``plain`` with no jar anywhere (``DVENGINE_SPARK_JAR`` points at nothing): reads
  use the Python plan and dvengine warns once.

Prints one JSON line of facts; the calling test judges them. Expected rows come from an
in-memory model of the table, not from dvengine.
"""

from __future__ import annotations

import json
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa

JVM_CLASS = "DeletionVectorParquetFormat"


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def main() -> None:
    mode, workdir = sys.argv[1], Path(sys.argv[2])
    master = sys.argv[3] if len(sys.argv) > 3 else "local[2]"
    from pyspark.sql import SparkSession

    import dvengine
    from dvengine import DeltaTable
    from dvengine.engine.spark.jvm_reader import JvmReaderWarning

    path = str(workdir / "table")
    ids = list(range(30_000))
    for part in range(3):  # three files
        chunk = ids[part * 10_000:(part + 1) * 10_000]
        data = pa.table({"id": pa.array(chunk, pa.int64()), "v": pa.array([i * 3 for i in chunk], pa.int64())})
        dvengine.write(data, path, mode="append" if part else "error")
    DeltaTable.forPath(None, path).delete("id % 7 = 0", mode="dv", engine="local")
    expected = sorted((i, i * 3) for i in ids if i % 7)

    builder = SparkSession.builder.master(master).config("spark.ui.enabled", "false")
    if mode == "configured":
        builder = dvengine.configure_spark_with_dvengine(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    facts: dict[str, Any] = {
        "dvengine_file": dvengine.__file__,
        "jar": dvengine.jar_path(),
        "spark_jars": spark.conf.get("spark.jars", ""),
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = DeltaTable.forPath(spark, path).toDF()
        facts["rows_ok"] = _rows(df) == expected
        facts["jvm_reader"] = JVM_CLASS in df._jdf.queryExecution().executedPlan().toString()
        other: dict[str, Any] = {}

        def read_in_another_thread() -> None:  # py4j pins another JVM thread to it
            frame = DeltaTable.forPath(spark, path).toDF()
            other["rows_ok"] = _rows(frame) == expected
            other["jvm_reader"] = JVM_CLASS in frame._jdf.queryExecution().executedPlan().toString()

        thread = threading.Thread(target=read_in_another_thread)
        thread.start()
        thread.join()
        facts["other_thread"] = other
    facts["warnings"] = [str(w.message) for w in caught if issubclass(w.category, JvmReaderWarning)]
    if mode == "configured":
        facts["format_delta_ok"] = _rows(spark.read.format("delta").load(path)) == expected
    print(json.dumps(facts))
    spark.stop()


if __name__ == "__main__":
    main()
