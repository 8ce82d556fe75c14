"""Run parsed statements through the same DeltaTable calls the DataFrame API uses.

Each statement is one API call on a :class:`DeltaTable`, so SQL and DataFrame API share binding,
checks, commits, metrics and clean-up; only the returned DataFrame's shape is SQL's. Statements
whose delta-spark API lives in colleagues' branches (DESCRIBE DETAIL, RESTORE, OPTIMIZE,
CREATE TABLE, catalog names) are dispatched in :mod:`dvengine.sqlcmd.table_statements`.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, overload

import pyarrow as pa

from dvengine.api.table import DeltaTable
from dvengine.api.table_support import vacuum_type
from dvengine.commands.options import session_conf
from dvengine.errors import TableNotFoundError, UnsupportedFeatureError
from dvengine.maintenance.clustering import alter_clustering
from dvengine.maintenance.column_type import change_column_type
from dvengine.maintenance.history import history
from dvengine.maintenance.vacuum import vacuum
from dvengine.sqlcmd import table_statements
from dvengine.sqlcmd.column_statements import COLUMN_STATEMENTS, run_column_statement
from dvengine.sqlcmd.ctas import create_table_as_select
from dvengine.sqlcmd.insert_run import insert
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.path_tables import PathTable, find_path_tables, substitute
from dvengine.sqlcmd.statements import (
    AlterClusterByStatement,
    AlterColumnTypeStatement,
    AlterConstraintStatement,
    AlterPropertiesStatement,
    CreateTableAsSelectStatement,
    CreateTableStatement,
    DeleteStatement,
    DetailStatement,
    HistoryStatement,
    InsertStatement,
    MergeSource,
    MergeStatement,
    OptimizeStatement,
    OtherAlterTable,
    PassThrough,
    ReplaceColumnsStatement,
    RestoreStatement,
    Statement,
    TableRef,
    UpdateStatement,
    VacuumStatement,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dvengine.api.merge_builder import DeltaMergeBuilder

# Delta's switch for VACUUM RETAIN below the table's deletedFileRetentionDuration (SQL has no
# enforceRetention argument, so delta-spark reads this conf; dvengine does the same).
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"


def resolve_table(spark: SparkSession | None, ref: TableRef) -> DeltaTable:
    if ref.path is not None:
        return DeltaTable.forPath(spark, ref.path)
    return table_statements.table_for_name(spark, str(ref.name))


def path_view(spark: SparkSession, table: PathTable) -> str:
    """A temp view of ``delta.`path``` (at its version / timestamp) read by dvengine, re-created for
    every statement so it shows the table as of that statement. Its name is fixed per (path, time
    travel), so views the user defines on top of it keep resolving and no views pile up."""
    root = DeltaTable.forPath(spark, table.path).path
    key = hashlib.sha1(f"{root}|{table.version}|{table.timestamp}".encode()).hexdigest()[:16]
    name = f"__dvengine_delta_{key}"
    from dvengine.engine.spark.delta_format import session_timestamp

    timestamp = None if table.timestamp is None else session_timestamp(spark, table.timestamp)
    DeltaTable.forPath(spark, root).toDF(version=table.version, timestamp=timestamp).createOrReplaceTempView(name)
    return name


def spark_sql(spark: SparkSession, text: str) -> DataFrame:
    """``spark.sql(text)``, with ``FROM/JOIN delta.`path``` served by dvengine's reader."""
    tables = find_path_tables(text)
    if not tables:
        return spark.sql(text)
    return spark.sql(substitute(text, tables, [path_view(spark, t) for t in tables]))


def merge_source_frame(spark: SparkSession, source: MergeSource) -> DataFrame:
    """The MERGE source as a DataFrame: a subquery or view through spark.sql, a Delta path through dvengine."""
    if source.query is not None:
        return spark_sql(spark, source.query)
    assert source.table is not None
    if source.table.path is not None:
        return DeltaTable.forPath(spark, source.table.path).toDF()
    return table_statements.source_for_name(spark, str(source.table.name))


def _merge(spark: SparkSession, stmt: MergeStatement) -> dict[str, Any]:
    target = resolve_table(spark, stmt.table)
    if stmt.target_alias is not None:
        target = target.alias(stmt.target_alias)
    source = merge_source_frame(spark, stmt.source).alias(stmt.source.alias)
    builder: DeltaMergeBuilder = target.merge(source, stmt.condition)
    for when in stmt.clauses:
        builder = _add_clause(builder, when.kind, when.action, when.condition, when.assignments)
    return builder.executeMetrics()


def _add_clause(
    builder: DeltaMergeBuilder, kind: str, action: str, condition: str | None, assignments: dict[str, str] | None
) -> DeltaMergeBuilder:
    if kind == "matched":
        if action == "delete":
            return builder.whenMatchedDelete(condition)
        if assignments is None:
            return builder.whenMatchedUpdateAll(condition)
        return builder.whenMatchedUpdate(condition, assignments)
    if kind == "not_matched":
        if assignments is None:
            return builder.whenNotMatchedInsertAll(condition)
        return builder.whenNotMatchedInsert(condition, assignments)
    if action == "delete":
        return builder.whenNotMatchedBySourceDelete(condition)
    return builder.whenNotMatchedBySourceUpdate(condition, assignments)


def insert_target(spark: SparkSession | None, ref: TableRef) -> tuple[str, str] | None:
    """(table root, label) of an INSERT target; None for a name dvengine's catalog does not hold
    (a Spark table or view: the statement goes to Spark unchanged)."""
    if ref.path is not None:
        return DeltaTable.forPath(spark, ref.path).path, ref.describe()
    try:
        return table_statements.table_for_name(spark, str(ref.name)).path, ref.describe()
    except TableNotFoundError:
        if spark is None:
            raise
        return None


def runs_without_spark(stmt: Statement) -> bool:
    """CREATE TABLE, the ALTER TABLE column statements, ALTER TABLE ... CLUSTER BY and INSERT ... VALUES
    need no SparkSession
    (their work is in-process). ``ALTER COLUMN c TYPE t`` is one of the column statements (a
    metadata-only commit, :func:`change_column_type`): without a session it used to start
    dvengine's default Spark session (a JVM) for nothing."""
    return (
        isinstance(stmt, (CreateTableStatement, AlterClusterByStatement, AlterColumnTypeStatement, *COLUMN_STATEMENTS))
        or (isinstance(stmt, InsertStatement) and stmt.rows is not None)
        or (isinstance(stmt, OtherAlterTable) and stmt.table.path is not None)  # refused, no Spark needed
    )


def run_local(stmt: Statement) -> pa.Table:
    """One statement of :func:`runs_without_spark` without a session; an empty Arrow table, as Spark
    returns no rows for DDL and INSERT."""
    if isinstance(stmt, CreateTableStatement):
        table_statements.create_table(None, stmt)
    elif isinstance(stmt, COLUMN_STATEMENTS):
        run_column_statement(resolve_table(None, stmt.table).path, stmt, session_conf(None))
    elif isinstance(stmt, AlterClusterByStatement):
        alter_clustering(resolve_table(None, stmt.table).path, stmt.columns, session_conf(None))
    elif isinstance(stmt, AlterColumnTypeStatement):
        change_column_type(resolve_table(None, stmt.table).path, stmt.column, stmt.data_type, session_conf(None))
    elif isinstance(stmt, OtherAlterTable):
        resolve_table(None, stmt.table)  # a path that holds no table: TableNotFoundError first
        raise _unsupported_alter(stmt)
    else:
        assert isinstance(stmt, InsertStatement)
        # A catalog name resolves where CREATE TABLE put it (api.table_support.warehouse_of: the
        # active session's warehouse, else the environment's); the rows stay in-process.
        target = insert_target(None, stmt.table)
        assert target is not None
        insert(None, stmt, target[0], target[1], None)
    return pa.table({})


def _unsupported_alter(stmt: OtherAlterTable) -> UnsupportedFeatureError:
    form = stmt.form or "(nothing after the table name)"
    return UnsupportedFeatureError(
        f"ALTER TABLE {stmt.table.describe()} {form}: dvengine does not run this ALTER TABLE form on Delta tables "
        "(it runs ADD/DROP/RENAME/ALTER/CHANGE COLUMN, REPLACE COLUMNS, ALTER COLUMN TYPE/DEFAULT/NULL/SYNC IDENTITY, SET/UNSET "
        "TBLPROPERTIES, ADD/DROP CONSTRAINT and CLUSTER BY); nothing was changed"
    )


def run_statement(spark: SparkSession, stmt: Statement) -> DataFrame:
    from dvengine.engine.spark import sql_results as results

    if isinstance(stmt, PassThrough):
        return spark_sql(spark, stmt.text)
    if isinstance(stmt, OtherAlterTable):
        if insert_target(spark, stmt.table) is None:  # not a Delta table dvengine knows: Spark's
            return spark_sql(spark, stmt.text)
        raise _unsupported_alter(stmt)
    if isinstance(stmt, DeleteStatement):
        return results.delete_result(spark, resolve_table(spark, stmt.table).deleteMetrics(stmt.condition))
    if isinstance(stmt, UpdateStatement):
        table = resolve_table(spark, stmt.table)
        return results.update_result(spark, table.updateMetrics(stmt.condition, dict(stmt.assignments)))
    if isinstance(stmt, MergeStatement):
        return results.merge_result(spark, _merge(spark, stmt))
    if isinstance(stmt, HistoryStatement):
        return results.history_result(spark, history(resolve_table(spark, stmt.table).path, stmt.limit))
    if isinstance(stmt, VacuumStatement):
        root = resolve_table(spark, stmt.table).path
        enforce = str(spark.conf.get(RETENTION_CHECK_CONF, "true")).lower() != "false"
        conf = session_conf(spark)
        kind = vacuum_type(conf, stmt.vacuum_type)  # no LITE/FULL: Delta's conf decides
        report = vacuum(  # no RETAIN: the table's retention, as Delta (retention_hours None)
            root, retention_hours=stmt.retention_hours, dry_run=stmt.dry_run, enforce_retention=enforce,
            vacuum_type=kind, conf=conf,
        )
        return results.vacuum_result(spark, report)
    if isinstance(stmt, DetailStatement):
        return table_statements.describe_detail(resolve_table(spark, stmt.table))
    if isinstance(stmt, RestoreStatement):
        return table_statements.restore(resolve_table(spark, stmt.table), stmt.version, stmt.timestamp)
    if isinstance(stmt, OptimizeStatement):
        return table_statements.optimize(resolve_table(spark, stmt.table), stmt.condition, stmt.zorder_by, stmt.full)
    if isinstance(stmt, AlterConstraintStatement):
        table_statements.alter_constraint(spark, resolve_table(spark, stmt.table), stmt)
        return results.empty_result(spark)
    if isinstance(stmt, AlterColumnTypeStatement):
        change_column_type(resolve_table(spark, stmt.table).path, stmt.column, stmt.data_type, session_conf(spark))
        return results.empty_result(spark)
    if isinstance(stmt, AlterPropertiesStatement):
        table_statements.alter_properties(resolve_table(spark, stmt.table), stmt, session_conf(spark))
        return results.empty_result(spark)
    if isinstance(stmt, ReplaceColumnsStatement) and insert_target(spark, stmt.table) is None:
        return spark_sql(spark, stmt.text)  # a Spark table: Spark's own REPLACE COLUMNS
    if isinstance(stmt, COLUMN_STATEMENTS):
        run_column_statement(resolve_table(spark, stmt.table).path, stmt, session_conf(spark))
        return results.empty_result(spark)
    if isinstance(stmt, AlterClusterByStatement):
        alter_clustering(resolve_table(spark, stmt.table).path, stmt.columns, session_conf(spark))
        return results.empty_result(spark)
    if isinstance(stmt, CreateTableStatement):
        table_statements.create_table(spark, stmt)
        return results.empty_result(spark)
    if isinstance(stmt, CreateTableAsSelectStatement):
        create_table_as_select(spark, stmt, lambda query: spark_sql(spark, query))
        return results.empty_result(spark)
    if isinstance(stmt, InsertStatement):
        target = insert_target(spark, stmt.table)
        if target is None:
            return spark_sql(spark, stmt.text)
        insert(spark, stmt, target[0], target[1], lambda query: spark_sql(spark, query))
        return results.empty_result(spark)
    raise AssertionError(f"unhandled statement {stmt!r}")


@overload
def run_sql(spark: SparkSession, text: str) -> DataFrame: ...


@overload
def run_sql(spark: None, text: str) -> DataFrame | pa.Table: ...


def run_sql(spark: SparkSession | None, text: str) -> DataFrame | pa.Table:
    """Parse all statements first (a syntax error anywhere runs nothing), then run them in order;
    returns the last statement's result. Without a session, statements that need none (CREATE
    TABLE, INSERT ... VALUES) run in-process and return an empty Arrow table; any other statement
    makes the whole text run on dvengine's default session."""
    statements = parse_sql(text)
    if spark is None and all(runs_without_spark(s) for s in statements):
        local: pa.Table | None = None
        for stmt in statements:
            local = run_local(stmt)
        assert local is not None
        return local
    if spark is None:
        from dvengine.engine.spark.session import get_or_create_session

        spark = get_or_create_session()
    result: DataFrame | None = None
    for stmt in statements:
        result = run_statement(spark, stmt)
    assert result is not None
    return result
