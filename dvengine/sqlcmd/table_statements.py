"""SQL statements that map one to one onto DeltaTable calls: catalog names, DESCRIBE DETAIL,
RESTORE, OPTIMIZE, CREATE TABLE, ALTER TABLE ... SET/UNSET TBLPROPERTIES and ADD/DROP CONSTRAINT.

Each goes through the same DeltaTable method a DataFrame-API user would call (``forName``,
``detail``, ``restoreToVersion``/``restoreToTimestamp``, ``optimize().where().executeCompaction()``,
the ``create``/``createIfNotExists`` builder), so SQL and API results cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from dvengine.api.table import DeltaTable
from dvengine.api.table_builder import DeltaTableBuilder, IdentityGenerator
from dvengine.commands.options import ConfLookup, session_conf
from dvengine.log import load_snapshot
from dvengine.maintenance.clustering import check_optimize_full, clustering_columns
from dvengine.maintenance.constraints import add_constraint, drop_constraint
from dvengine.maintenance.properties import set_table_properties, unset_table_properties
from dvengine.protocol.ddl import parse_ddl_type
from dvengine.protocol.schema import StructField
from dvengine.sqlcmd.statements import (
    AlterConstraintStatement,
    AlterPropertiesStatement,
    ColumnDefinition,
    CreateTableStatement,
)
from dvengine.writing.defaults import CURRENT_DEFAULT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

def table_for_name(spark: SparkSession | None, name: str) -> DeltaTable:
    return DeltaTable.forName(spark, name)


def source_for_name(spark: SparkSession, name: str) -> DataFrame:
    """A MERGE source by name: a Spark temp view or table first (views shadow tables, as in Spark),
    else a Delta table from dvengine's catalog."""
    if spark.catalog.tableExists(name):
        return spark.table(name)
    return table_for_name(spark, name).toDF()


def describe_detail(table: DeltaTable) -> DataFrame:
    result: Any = table.detail()  # a DataFrame: SQL always runs with a session
    return cast("DataFrame", result)


def restore(table: DeltaTable, version: int | None, timestamp: str | None) -> DataFrame:
    if version is not None:
        return cast("DataFrame", table.restoreToVersion(version))
    assert timestamp is not None  # the parser gives one of the two
    return cast("DataFrame", table.restoreToTimestamp(timestamp))


def optimize(table: DeltaTable, condition: str | None, zorder_by: tuple[str, ...] = (), full: bool = False) -> DataFrame:
    builder = table.optimize()
    if condition is not None:
        builder = builder.where(condition)
    if full:
        # Delta's refusals in its order, FULL ZORDER BY included (always refused, by one rule or the other)
        snapshot = load_snapshot(table.path)
        check_optimize_full(snapshot, clustering_columns(snapshot), condition, zorder_by)
        return cast("DataFrame", builder.executeCompaction(full=True))
    if zorder_by:
        return cast("DataFrame", builder.executeZOrderBy(*zorder_by))
    return cast("DataFrame", builder.executeCompaction())


def alter_properties(table: DeltaTable, stmt: AlterPropertiesStatement, conf: ConfLookup) -> None:
    """SET / UNSET TBLPROPERTIES; ``conf``: the session's, which the commit reads."""
    if stmt.set_properties is not None:
        set_table_properties(table.path, stmt.set_properties, conf)
    else:
        unset_table_properties(table.path, stmt.unset_keys, stmt.if_exists, conf)


def alter_constraint(spark: SparkSession | None, table: DeltaTable, stmt: AlterConstraintStatement) -> None:
    """ADD checks existing rows in-process when Arrow can evaluate the expression, else with Spark."""
    if stmt.expression is None:
        drop_constraint(table.path, stmt.name, stmt.if_exists, session_conf(spark))
        return
    counter = None
    if spark is not None:
        from dvengine.engine.spark.constraints import violation_counter

        counter = violation_counter(spark)
    add_constraint(table.path, stmt.name, stmt.expression, counter, session_conf(spark))


def _add_column(builder: DeltaTableBuilder, column: ColumnDefinition) -> DeltaTableBuilder:
    """One column through the builder's own arguments; a DEFAULT (which delta-spark's addColumn has no
    argument for) as a field carrying ``CURRENT_DEFAULT``, the metadata Delta writes for it."""
    if column.default is not None:
        metadata: dict[str, Any] = {CURRENT_DEFAULT: column.default}
        if column.comment is not None:
            metadata["comment"] = column.comment
        return builder.addColumns([StructField(column.name, parse_ddl_type(column.data_type), column.nullable, metadata)])
    if column.identity is not None:
        generator = IdentityGenerator(column.identity.start, column.identity.step)
        if column.identity.always:
            return builder.addColumn(column.name, column.data_type, nullable=column.nullable,
                                     generatedAlwaysAs=generator, comment=column.comment)
        return builder.addColumn(column.name, column.data_type, nullable=column.nullable,
                                 generatedByDefaultAs=generator, comment=column.comment)
    return builder.addColumn(column.name, column.data_type, nullable=column.nullable,
                             generatedAlwaysAs=column.generated_as, comment=column.comment)


def create_table(spark: SparkSession | None, stmt: CreateTableStatement) -> DeltaTable:
    if stmt.replace_only:
        builder = DeltaTable.replace(spark)
    elif stmt.or_replace:
        builder = DeltaTable.createOrReplace(spark)
    else:
        builder = DeltaTable.createIfNotExists(spark) if stmt.if_not_exists else DeltaTable.create(spark)
    if stmt.table.name is not None:
        builder = builder.tableName(stmt.table.name)
        if stmt.location is not None:
            builder = builder.location(stmt.location)
    else:  # CREATE TABLE delta.`/path`: a TableRef holds a name or a path
        location = stmt.table.path if stmt.location is None else stmt.location
        assert location is not None
        builder = builder.location(location)
    for column in stmt.columns:
        builder = _add_column(builder, column)
    if stmt.partitioned_by:
        builder = builder.partitionedBy(*stmt.partitioned_by)
    if stmt.cluster_by:
        builder = builder.clusterBy(*stmt.cluster_by)
    for key, value in stmt.properties.items():
        builder = builder.property(key, value)
    if stmt.comment is not None:
        builder = builder.comment(stmt.comment)
    return builder.execute()
