"""Empty frames for analysis-time checks are built once per session and schema."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from dvengine.engine.spark import empty_frames
from dvengine.engine.spark.empty_frames import empty_frame


def test_one_frame_per_schema(spark: Any) -> None:
    a = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("s", T.StringType())])
    b = T.StructType([T.StructField("id", T.IntegerType(), False)])
    first = empty_frame(spark, a)
    assert empty_frame(spark, T.StructType.fromJson(a.jsonValue())) is first  # equal schema, same frame
    assert empty_frame(spark, b) is not first
    assert first.schema == a and first.count() == 0
    assert empty_frame(spark, b).schema == b


def test_the_cache_is_bounded(spark: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(empty_frames, "_MAX_FRAMES", 3)
    schemas = [T.StructType([T.StructField(f"c{i}", T.LongType())]) for i in range(5)]
    frames = [empty_frame(spark, s) for s in schemas]
    assert len(empty_frames._FRAMES) <= 3
    assert empty_frame(spark, schemas[-1]) is frames[-1]  # recent ones stay
    assert empty_frame(spark, schemas[0]) is not frames[0]  # the oldest was dropped and is rebuilt
