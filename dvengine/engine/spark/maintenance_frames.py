"""Results of maintenance commands as the Spark DataFrames delta-spark returns.

delta-spark's ``executeCompaction()`` returns one row ``(path: string, metrics: struct)`` whose
struct is the encoder of its ``OptimizeMetrics`` case class. The schema below follows that class
field by field, except the clustering and auto-compaction parallelism sub-structs, which dvengine
does not fill and leaves out. ``zOrderStats`` (``ZOrderStats``) is there, null after a compaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

_FILE_SIZE_METRICS = StructType(
    [
        StructField("min", LongType(), True),
        StructField("max", LongType(), True),
        StructField("avg", DoubleType(), False),
        StructField("totalFiles", LongType(), False),
        StructField("totalSize", LongType(), False),
    ]
)
_DV_STATS = StructType(
    [
        StructField("numDeletionVectorsRemoved", LongType(), False),
        StructField("numDeletionVectorRowsRemoved", LongType(), False),
    ]
)
_ZORDER_FILE_STATS = StructType([StructField("num", LongType(), False), StructField("size", LongType(), False)])
_ZORDER_STATS = StructType(
    [
        StructField("strategyName", StringType(), True),
        StructField("inputCubeFiles", _ZORDER_FILE_STATS, True),
        StructField("inputOtherFiles", _ZORDER_FILE_STATS, True),
        StructField("inputNumCubes", LongType(), False),
        StructField("mergedFiles", _ZORDER_FILE_STATS, True),
        StructField("numOutputCubes", LongType(), False),
        StructField("mergedNumCubes", LongType(), True),
    ]
)
_LONGS_BEFORE = ("numFilesAdded", "numFilesRemoved")
OPTIMIZE_METRICS = StructType(
    [
        *(StructField(n, LongType(), False) for n in _LONGS_BEFORE),
        StructField("filesAdded", _FILE_SIZE_METRICS, True),
        StructField("filesRemoved", _FILE_SIZE_METRICS, True),
        StructField("partitionsOptimized", LongType(), False),
        StructField("zOrderStats", _ZORDER_STATS, True),
        *(StructField(n, LongType(), False) for n in ("numBins", "numBatches", "totalConsideredFiles", "totalFilesSkipped")),
        StructField("preserveInsertionOrder", BooleanType(), False),
        *(
            StructField(n, LongType(), False)
            for n in (
                "numFilesSkippedToReduceWriteAmplification",
                "numBytesSkippedToReduceWriteAmplification",
                "startTimeMs",
                "endTimeMs",
                "totalClusterParallelism",
                "totalScheduledTasks",
            )
        ),
        StructField("deletionVectorStats", _DV_STATS, True),
        StructField("numTableColumns", LongType(), False),
        StructField("numTableColumnsWithStats", LongType(), False),
    ]
)
OPTIMIZE_RESULT = StructType([StructField("path", StringType(), True), StructField("metrics", OPTIMIZE_METRICS, True)])


def _shaped(value: Any, data_type: Any) -> Any:
    if value is None or not isinstance(data_type, StructType):
        return value
    return tuple(_shaped(value.get(f.name), f.dataType) for f in data_type.fields)


def optimize_result_frame(spark: SparkSession, table_root: str, metrics: Mapping[str, Any]) -> DataFrame:
    """One-row DataFrame ``(path, metrics)`` as delta-spark's OPTIMIZE returns it."""
    return spark.createDataFrame([(table_root, _shaped(metrics, OPTIMIZE_METRICS))], OPTIMIZE_RESULT)
