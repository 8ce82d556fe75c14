"""SQL statements whose delta-spark API is being built on other branches, dispatched by its names.

DESCRIBE DETAIL, RESTORE, OPTIMIZE, CREATE TABLE and catalog table names call these delta-spark
methods, which dvengine's DeltaTable gains when those branches merge:

- ``DeltaTable.forName(spark, name)`` (catalog names; ``register_table`` / ``lookup_table``)
- ``DeltaTable.detail()`` -> DataFrame
- ``DeltaTable.restoreToVersion(version)`` / ``restoreToTimestamp(timestamp)`` -> DataFrame
- ``DeltaTable.optimize().where(condition).executeCompaction()`` -> DataFrame
- ``DeltaTable.create(spark)`` / ``DeltaTable.createIfNotExists(spark)`` -> builder with
  ``tableName``, ``location``, ``addColumn(name, dataType, nullable=, comment=)``,
  ``partitionedBy(*cols)``, ``property(key, value)``, ``comment(text)``, ``execute()``

Until then the table handle is typed ``Any`` here, so this module type-checks on either side of
the merge; everything else in ``dvengine.sqlcmd`` uses only API that exists on this branch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dvengine.sqlcmd.statements import CreateTableStatement
from dvengine.table import DeltaTable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# The class as the merged API will have it (classmethods forName / create / createIfNotExists).
_API: Any = DeltaTable


def table_for_name(spark: SparkSession, name: str) -> DeltaTable:
    table: DeltaTable = _API.forName(spark, name)
    return table


def source_for_name(spark: SparkSession, name: str) -> DataFrame:
    """A MERGE source by name: a Spark temp view or table first (views shadow tables, as in Spark),
    else a Delta table from dvengine's catalog."""
    if spark.catalog.tableExists(name):
        return spark.table(name)
    return table_for_name(spark, name).toDF()


def describe_detail(table: Any) -> DataFrame:
    result: DataFrame = table.detail()
    return result


def restore(table: Any, version: int | None, timestamp: str | None) -> DataFrame:
    result: DataFrame = table.restoreToVersion(version) if version is not None else table.restoreToTimestamp(timestamp)
    return result


def optimize(table: Any, condition: str | None) -> DataFrame:
    builder = table.optimize()
    if condition is not None:
        builder = builder.where(condition)
    result: DataFrame = builder.executeCompaction()
    return result


def create_table(spark: SparkSession, stmt: CreateTableStatement) -> DeltaTable:
    builder = _API.createIfNotExists(spark) if stmt.if_not_exists else _API.create(spark)
    if stmt.table.name is not None:
        builder = builder.tableName(stmt.table.name)
        if stmt.location is not None:
            builder = builder.location(stmt.location)
    else:
        builder = builder.location(stmt.table.path if stmt.location is None else stmt.location)
    for column in stmt.columns:
        builder = builder.addColumn(column.name, column.data_type, nullable=column.nullable, comment=column.comment)
    if stmt.partitioned_by:
        builder = builder.partitionedBy(*stmt.partitioned_by)
    for key, value in stmt.properties.items():
        builder = builder.property(key, value)
    if stmt.comment is not None:
        builder = builder.comment(stmt.comment)
    table: DeltaTable = builder.execute()
    return table
