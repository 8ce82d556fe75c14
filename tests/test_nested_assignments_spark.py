"""Nested struct field assignments on the Spark executor: its row plan evaluates the folded
``named_struct`` in Spark SQL (cast to the column type there), its file tasks with the embedded
evaluator; both must give the rows the model of Delta's rebuild gives (test_nested_assignments.py),
read back by dvengine, delta-rs and DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dml_helpers import spark_dml_strategy
from test_nested_assignments import _assert_readers, _model, _set, _table

from dvengine import DeltaTable


@pytest.mark.parametrize("strategy", ["rows", "files"])
def test_spark_update_nested_fields(spark: Any, tmp_path: Path, strategy: str) -> None:
    from pyspark.sql import functions as F

    path = _table(tmp_path, {"delta.columnMapping.mode": "name"})
    with spark_dml_strategy(spark, strategy):
        metrics = DeltaTable.forPath(spark, path).updateMetrics(
            "id <= 3", {"s.x": F.col("id") * 2, "S.inner.a": "id + 100", "s.y": F.lit(None)}, engine="spark"
        )
    assert (metrics["numUpdatedRows"], metrics["executionEngine"]) == (3, "spark")

    def update(row: dict[str, Any]) -> None:
        _set(row, ("s", "x"), row["id"] * 2)
        _set(row, ("s", "inner", "a"), row["id"] + 100)
        _set(row, ("s", "y"), None)

    _assert_readers(path, _model(update, lambda r: r["id"] <= 3))


@pytest.mark.parametrize("strategy", ["rows", "files"])
def test_spark_merge_nested_fields(spark: Any, tmp_path: Path, strategy: str) -> None:
    path = _table(tmp_path, without_map=True)
    source = spark.createDataFrame([(1, 11), (2, 22), (5, 55)], "key long, v long").alias("src")
    with spark_dml_strategy(spark, strategy):
        metrics = (
            DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = src.key")
            .whenMatchedUpdate(set={"t.s.x": "src.v", "s.inner.b": "'matched'"})
            .whenNotMatchedBySourceUpdate(condition="t.id = 3", set={"S.Inner.a": "t.id * 1000"})
            .withEngine("spark").executeMetrics()
        )
    assert (metrics["executionEngine"], metrics["numTargetRowsUpdated"]) == ("spark", 3)
    source_values = {1: 11, 2: 22}

    def update(row: dict[str, Any]) -> None:
        if row["id"] in source_values:
            _set(row, ("s", "x"), source_values[row["id"]])
            _set(row, ("s", "inner", "b"), "matched")
        else:
            _set(row, ("s", "inner", "a"), row["id"] * 1000)

    _assert_readers(path, _model(update, lambda r: r["id"] in (1, 2, 3)))
