"""Spark's own catalog routes to Delta without Delta's jar (spec_notes/sql-and-delta-format.md,
"SQL inside Spark"): ``saveAsTable(..., format="delta")`` and ``spark.table(name)`` are served on
dvengine's catalog; SQL text run by Spark itself is the documented limit (dvengine.sql is the route)."""

from __future__ import annotations

from typing import Any

import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows
from pyspark.errors import AnalysisException

import dvengine
from dvengine import DeltaTable
from dvengine.log import load_snapshot


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sort_rows([tuple(r) for r in df.collect()])


def test_save_as_table_and_table_go_through_dvengine(spark: Any) -> None:
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "id long, g string")
    df.write.saveAsTable("sat_t", format="delta", partitionBy="g")  # default mode: error if it exists
    location = DeltaTable.forName(spark, "sat_t").detail().first().location
    snapshot = load_snapshot(location)
    assert snapshot.partition_columns == ("g",) and snapshot.version == 0
    model = [(1, "a"), (2, "b"), (3, "a")]
    assert _rows(spark.table("sat_t")) == sort_rows(model) == _rows(spark.read.table("default.sat_t"))
    with pytest.raises(AnalysisException, match="already exists"):  # delta-spark's errorifexists, nothing written
        df.write.format("delta").saveAsTable("sat_t")
    assert load_snapshot(location).version == 0
    spark.createDataFrame([(4, "b")], "id long, g string").write.format("delta").mode("append").saveAsTable("sat_t")
    model.append((4, "b"))
    DeltaTable.forName(spark, "sat_t").delete("id = 1", mode="dv")  # spark.table applies the DV
    model.remove((1, "a"))
    assert _rows(spark.table("sat_t")) == sort_rows(model)
    assert rows_delta_rs(location, ["id", "g"]) == sort_rows(model) == rows_duckdb(location, ["id", "g"])
    wider = spark.createDataFrame([(9, "c", 1.5)], "id long, g string, x double")
    wider.write.format("delta").mode("overwrite").option("mergeSchema", "true").saveAsTable("sat_t")
    assert _rows(spark.table("sat_t")) == [(9, "c", 1.5)]
    # names Spark knows still go to Spark
    spark.range(2).createOrReplaceTempView("sat_view")
    assert spark.table("sat_view").count() == 2 == spark.read.table("sat_view").count()


def test_sql_text_inside_spark_still_has_no_delta_source(spark: Any) -> None:
    """Documented limit: SQL run by Spark never passes through Python; dvengine.sql is the route."""
    with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND"):
        spark.sql("CREATE TABLE sql_t (id INT) USING delta")
    dvengine.sql(spark, "CREATE TABLE sql_t (id INT) USING delta")
    assert spark.table("sql_t").count() == 0  # the name is dvengine's: spark.table reads it
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql("SELECT * FROM sql_t").collect()
