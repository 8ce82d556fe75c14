"""A SparkSession tuned for short, frequent jobs on a local machine.

A cold local session costs ~10 s; most of that is JIT and GC settings and the UI. These
defaults keep start-up and per-job overhead low without changing results. Any existing
session (a user's cluster) is reused untouched.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}


def get_or_create_session(master: str | None = None, app_name: str = "dvengine") -> SparkSession:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master or os.environ.get("DVENGINE_SPARK_MASTER", "local[*]"))
    for key, value in LOCAL_DEFAULTS.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
