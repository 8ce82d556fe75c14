"""Run a Spark read under one DV reader (``dvengine.read.dvReader``): the JVM format or the Python plan."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dvengine.commands.options import CONF_DV_READER

DV_READERS = ["jvm", "python"]
JVM_CLASS = "io.dvengine.spark.DeletionVectorParquetFormat"


@contextmanager
def dv_reader(spark: Any, mode: str) -> Iterator[None]:
    spark.conf.set(CONF_DV_READER, mode)
    try:
        yield
    finally:
        spark.conf.unset(CONF_DV_READER)


def executed_plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())
