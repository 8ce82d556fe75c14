"""Spark's own catalog routes to Delta (``saveAsTable``, ``spark.sql("CREATE TABLE ... USING delta")``)
without Delta's jar: what a user gets (spec_notes/sql-and-delta-format.md, "SQL inside Spark")."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.errors import AnalysisException

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SparkCatalogRouteError


def test_save_as_table_delta_is_a_typed_error_naming_the_dvengine_route(spark: Any) -> None:
    df = spark.createDataFrame([(1,)], "id int")
    for attempt in (lambda: df.write.saveAsTable("sat_t", format="delta"),
                    lambda: df.write.format("delta").mode("append").saveAsTable("sat_t")):
        with pytest.raises(SparkCatalogRouteError, match=r"DeltaTable.createIfNotExists.*dvengine.sql") as info:
            attempt()
        assert isinstance(info.value, AnalysisException)  # what delta-spark scripts catch
    assert not spark.catalog.tableExists("sat_t")
    # the route the message names works
    (DeltaTable.createIfNotExists(spark).tableName("sat_t").addColumns(df.schema).execute())
    location = DeltaTable.forName(spark, "sat_t").detail().first().location
    dvengine.write(df, location, mode="append")
    assert [r.id for r in DeltaTable.forName(spark, "sat_t").toDF().collect()] == [1]
    df.write.format("parquet").saveAsTable("sat_parquet")  # other formats untouched
    assert spark.table("sat_parquet").count() == 1


def test_sql_create_using_delta_inside_spark_has_no_delta_source(spark: Any) -> None:
    """Documented limit: SQL text run by Spark itself never reaches Python; dvengine.sql is the route."""
    with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND"):
        spark.sql("CREATE TABLE sql_t (id INT) USING delta")
    dvengine.sql(spark, "CREATE TABLE sql_t (id INT) USING delta")
    assert DeltaTable.forName(spark, "sql_t").toDF().count() == 0
