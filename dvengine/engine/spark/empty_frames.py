"""Empty DataFrames of a schema, for analysis-time checks, cached per session and schema.

Conditions and values given as pyspark Columns, and UPDATE/MERGE values, are type-checked by
Spark's analyzer against an empty DataFrame of the table's schema. ``createDataFrame([], schema)``
costs ~30 ms of py4j traffic here (the schema crosses as JSON, then a local relation is built),
on every command; the frame never changes for a schema, so it is built once per SparkContext.
"""

from __future__ import annotations

from collections import OrderedDict

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType as SparkStructType

_MAX_FRAMES = 32
# (applicationId, schema JSON) -> the empty frame; least recently used first.
_FRAMES: OrderedDict[tuple[str, str], DataFrame] = OrderedDict()


def empty_frame(spark: SparkSession, schema: SparkStructType) -> DataFrame:
    """An empty DataFrame with ``schema`` on ``spark`` (the same object for the same session and
    schema; a Spark Connect session, which has no SparkContext here, gets a new one each time)."""
    if getattr(spark, "_jsc", None) is None:
        return spark.createDataFrame([], schema)
    key = (str(spark.sparkContext.applicationId), schema.json())
    frame = _FRAMES.get(key)
    if frame is not None and frame.sparkSession is spark:
        _FRAMES.move_to_end(key)
        return frame
    frame = spark.createDataFrame([], schema)
    _FRAMES[key] = frame
    _FRAMES.move_to_end(key)
    while len(_FRAMES) > _MAX_FRAMES:
        _FRAMES.popitem(last=False)
    return frame


__all__ = ["empty_frame"]
