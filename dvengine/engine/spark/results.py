"""Command results as the Spark DataFrames delta-spark returns, with delta-spark's schemas.

dvengine computes every result as plain Python data (usable without a JVM); a DeltaTable opened
with a SparkSession hands them to the caller in delta-spark's shape instead, so a script written
for delta-spark (``dt.history().select("operationParameters.mode")``,
``merge(...).execute().collect()[0].num_affected_rows``) runs unchanged. The schemas follow
delta-spark: ``CommitInfo`` for history, ``TableDetail`` for detail, non-nullable longs for
the MERGE metrics, nullable longs for RESTORE's, one ``path`` column for VACUUM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dvengine.maintenance.history import parameter_text

MERGE_METRIC_COLUMNS = ("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")

_JOB = StructType(
    [
        StructField("jobId", StringType()),
        StructField("jobName", StringType()),
        StructField("jobRunId", StringType()),
        StructField("runId", StringType()),
        StructField("jobOwnerId", StringType()),
        StructField("triggerType", StringType()),
    ]
)
HISTORY_SCHEMA = StructType(
    [
        StructField("version", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("userId", StringType()),
        StructField("userName", StringType()),
        StructField("operation", StringType()),
        StructField("operationParameters", MapType(StringType(), StringType())),
        StructField("job", _JOB),
        StructField("notebook", StructType([StructField("notebookId", StringType())])),
        StructField("clusterId", StringType()),
        StructField("readVersion", LongType()),
        StructField("isolationLevel", StringType()),
        StructField("isBlindAppend", BooleanType()),
        StructField("operationMetrics", MapType(StringType(), StringType())),
        StructField("userMetadata", StringType()),
        StructField("engineInfo", StringType()),
    ]
)
DETAIL_SCHEMA = StructType(
    [
        StructField("format", StringType()),
        StructField("id", StringType()),
        StructField("name", StringType()),
        StructField("description", StringType()),
        StructField("location", StringType()),
        StructField("createdAt", TimestampType()),
        StructField("lastModified", TimestampType()),
        StructField("partitionColumns", ArrayType(StringType())),
        StructField("clusteringColumns", ArrayType(StringType())),
        StructField("numFiles", LongType()),
        StructField("sizeInBytes", LongType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("minReaderVersion", IntegerType()),
        StructField("minWriterVersion", IntegerType()),
        StructField("tableFeatures", ArrayType(StringType())),
    ]
)


def _text(value: Any) -> str | None:
    """A value as the string delta-spark's history shows (JSON text for non-strings, null kept)."""
    return parameter_text(value)


def _string_map(value: Any) -> dict[str, str | None] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): _text(v) for k, v in value.items()}


def _struct(value: Any, fields: Sequence[str]) -> tuple[str | None, ...] | None:
    if not isinstance(value, Mapping):
        return None
    return tuple(_text(value.get(f)) for f in fields)


def history_dataframe(spark: SparkSession, records: Sequence[Mapping[str, Any]]) -> DataFrame:
    """``history()`` records (epoch-ms timestamps) as delta-spark's history DataFrame."""
    import datetime as dt

    rows = []
    for r in records:
        ts = r.get("timestamp")
        rows.append(
            (
                r.get("version"),
                None if ts is None else dt.datetime.fromtimestamp(int(ts) / 1000, tz=dt.UTC),
                _text(r.get("userId")),
                _text(r.get("userName")),
                _text(r.get("operation")),
                _string_map(r.get("operationParameters")),
                _struct(r.get("job"), _JOB.fieldNames()),
                _struct(r.get("notebook"), ["notebookId"]),
                _text(r.get("clusterId")),
                r.get("readVersion"),
                _text(r.get("isolationLevel")),
                r.get("isBlindAppend"),
                _string_map(r.get("operationMetrics")),
                _text(r.get("userMetadata")),
                _text(r.get("engineInfo")),
            )
        )
    return spark.createDataFrame(rows, HISTORY_SCHEMA)


def detail_dataframe(spark: SparkSession, record: Mapping[str, Any]) -> DataFrame:
    """The DESCRIBE DETAIL record as a one-row DataFrame."""
    return spark.createDataFrame([tuple(record[f] for f in DETAIL_SCHEMA.fieldNames())], DETAIL_SCHEMA)


def metrics_dataframe(spark: SparkSession, metrics: Mapping[str, Any], columns: Sequence[str], nullable: bool) -> DataFrame:
    """One row of long metrics, in ``columns`` order (MERGE: not nullable; RESTORE: nullable)."""
    schema = StructType([StructField(c, LongType(), nullable) for c in columns])
    return spark.createDataFrame([tuple(int(metrics.get(c) or 0) for c in columns)], schema)


def vacuum_dataframe(spark: SparkSession, table_root: str) -> DataFrame:
    """What delta-spark's ``vacuum()`` returns: one row with the table path."""
    return spark.createDataFrame([(table_root,)], StructType([StructField("path", StringType())]))
