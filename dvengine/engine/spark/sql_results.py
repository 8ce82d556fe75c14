"""The DataFrames Delta's SQL statements return, built from dvengine's result dicts.

Column names and types follow delta-spark's commands: DELETE and UPDATE return
``num_affected_rows``; MERGE ``num_affected_rows, num_updated_rows, num_deleted_rows,
num_inserted_rows`` (affected = updated + deleted + inserted); VACUUM one ``path`` column (the
table, or with DRY RUN the files it would delete); DESCRIBE HISTORY the DeltaHistory columns.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

AFFECTED = StructType([StructField("num_affected_rows", LongType())])
MERGE_RESULT = StructType(
    [StructField(name, LongType()) for name in ("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")]
)
VACUUM_RESULT = StructType([StructField("path", StringType())])
_STRING_MAP = MapType(StringType(), StringType())
# DeltaHistory's columns (delta-spark DeltaHistory case class); job and notebook structs are not
# recorded by dvengine and are left out rather than returned as always-null structs.
HISTORY_SCHEMA = StructType(
    [
        StructField("version", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("userId", StringType()),
        StructField("userName", StringType()),
        StructField("operation", StringType()),
        StructField("operationParameters", _STRING_MAP),
        StructField("clusterId", StringType()),
        StructField("readVersion", LongType()),
        StructField("isolationLevel", StringType()),
        StructField("isBlindAppend", BooleanType()),
        StructField("operationMetrics", _STRING_MAP),
        StructField("userMetadata", StringType()),
        StructField("engineInfo", StringType()),
    ]
)


def _count(metrics: Mapping[str, Any], key: str) -> int:
    return int(metrics.get(key) or 0)


def delete_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    return spark.createDataFrame([(_count(metrics, "numDeletedRows"),)], AFFECTED)


def update_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    return spark.createDataFrame([(_count(metrics, "numUpdatedRows"),)], AFFECTED)


def merge_result(spark: SparkSession, metrics: Mapping[str, Any]) -> DataFrame:
    updated = _count(metrics, "numTargetRowsUpdated")
    deleted = _count(metrics, "numTargetRowsDeleted")
    inserted = _count(metrics, "numTargetRowsInserted")
    return spark.createDataFrame([(updated + deleted + inserted, updated, deleted, inserted)], MERGE_RESULT)


def vacuum_result(spark: SparkSession, report: Mapping[str, Any]) -> DataFrame:
    if report.get("dryRun"):
        rows = [(os.path.join(str(report["path"]), f),) for f in report.get("files", [])]
    else:
        rows = [(str(report["path"]),)]
    return spark.createDataFrame(rows, VACUUM_RESULT)


def _string_map(value: object) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): v if isinstance(v, str) else _json_text(v) for k, v in value.items()}


def _json_text(value: object) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def history_result(spark: SparkSession, records: Sequence[Mapping[str, Any]]) -> DataFrame:
    rows = []
    for r in records:
        timestamp = dt.datetime.fromtimestamp(int(r["timestamp"]) / 1000, tz=dt.UTC)
        rows.append(
            (
                int(r["version"]), timestamp, r.get("userId"), r.get("userName"), r.get("operation"),
                _string_map(r.get("operationParameters")), r.get("clusterId"),
                None if r.get("readVersion") is None else int(r["readVersion"]), r.get("isolationLevel"),
                r.get("isBlindAppend"), _string_map(r.get("operationMetrics")), r.get("userMetadata"),
                r.get("engineInfo"),
            )
        )
    return spark.createDataFrame(rows, HISTORY_SCHEMA)


def empty_result(spark: SparkSession) -> DataFrame:
    """What Spark returns for DDL: a DataFrame with no columns and no rows."""
    return spark.createDataFrame([], StructType([]))


__all__ = [
    "delete_result", "empty_result", "history_result", "merge_result", "update_result", "vacuum_result",
]
