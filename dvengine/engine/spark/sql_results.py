"""The DataFrames Delta's SQL statements return, built from dvengine's result dicts.

Column names and types follow delta-spark's commands: DELETE and UPDATE return
``num_affected_rows``; MERGE ``num_affected_rows, num_updated_rows, num_deleted_rows,
num_inserted_rows`` (affected = updated + deleted + inserted); VACUUM one ``path`` column (the
table, or with DRY RUN the files it would delete); DESCRIBE HISTORY the DeltaHistory columns.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StringType, StructField, StructType

from dvengine.commands.merge_metrics import delta_merge_result
from dvengine.engine.spark.results import MERGE_METRIC_COLUMNS, history_dataframe, metrics_dataframe

AFFECTED = StructType([StructField("num_affected_rows", LongType())])
VACUUM_RESULT = StructType([StructField("path", StringType())])


def _count(metrics: Mapping[str, Any], key: str) -> int:
    return int(metrics.get(key) or 0)


def delete_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    return spark.createDataFrame([(_count(metrics, "numDeletedRows"),)], AFFECTED)


def update_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    return spark.createDataFrame([(_count(metrics, "numUpdatedRows"),)], AFFECTED)


def merge_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    """The same four columns ``DeltaMergeBuilder.execute()`` returns."""
    return metrics_dataframe(spark, delta_merge_result(metrics), MERGE_METRIC_COLUMNS, nullable=False)


def vacuum_result(spark: SparkSession, report: Mapping[str, Any]) -> DataFrame:
    if report.get("dryRun"):
        rows = [(os.path.join(str(report["path"]), f),) for f in report.get("files", [])]
    else:
        rows = [(str(report["path"]),)]
    return spark.createDataFrame(rows, VACUUM_RESULT)


def history_result(spark: SparkSession, records: Sequence[Mapping[str, Any]]) -> DataFrame:
    """DESCRIBE HISTORY: the same columns as ``DeltaTable.history()`` (delta-spark's DeltaHistory)."""
    return history_dataframe(spark, records)


def empty_result(spark: SparkSession) -> DataFrame:
    """What Spark returns for DDL: a DataFrame with no columns and no rows."""
    return spark.createDataFrame([], StructType([]))


__all__ = [
    "delete_result", "empty_result", "history_result", "merge_result", "update_result", "vacuum_result",
]
