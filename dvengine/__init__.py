"""dvengine: row-level DELETE, UPDATE and MERGE on Delta Lake tables with deletion vectors, on Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from dvengine.api.table import DeltaTable
from dvengine.api.table_builder import DeltaTableBuilder, IdentityGenerator
from dvengine.log.background_checkpoints import wait_for_checkpoints

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__version__ = "0.1.0"


def write(
    data: Any,
    path: str,
    mode: str = "error",
    partitionBy: Sequence[str] | None = None,
    configuration: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    mergeSchema: bool | str | None = None,  # named as Delta's DataFrameWriter options
    overwriteSchema: bool | str | None = None,
    replaceWhere: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    txnAppId: str | None = None,
    txnVersion: int | str | None = None,
    partitionOverwriteMode: str | None = None,
    userMetadata: str | None = None,
    dataChange: bool | str | None = None,
) -> int:
    """Create, append to or overwrite a table; returns the committed version.

    ``data``: a Spark DataFrame, or Arrow data (pyarrow Table / RecordBatch, pandas DataFrame).
    Arrow data is written in-process without a JVM unless a ``spark`` session is given.
    ``mode``: "error" (the default: fail if a table exists), "append" or "overwrite". New tables get
    deletion vectors enabled unless ``configuration`` sets ``delta.enableDeletionVectors`` to "false".
    Schema options, as Delta's DataFrameWriter options (bool or "true"/"false"):
    ``mergeSchema`` (append/overwrite add the data's new columns; default from the conf
    ``spark.databricks.delta.schema.autoMerge.enabled``, or env ``SPARK_DATABRICKS_DELTA_SCHEMA_AUTOMERGE_ENABLED``
    without Spark), ``overwriteSchema`` (an overwrite replaces schema and partitioning) and
    ``replaceWhere`` (an overwrite replaces only the rows matching this SQL predicate; every
    written row must match it). See spec_notes/schema-evolution.md.
    ``storage_options``: object-store settings named as delta-rs names them (``AWS_ENDPOINT_URL``,
    ``AWS_ALLOW_HTTP``, ...) for ``s3://`` / ``gs://`` / ``az://`` paths; the standard environment
    variables work without them (spec_notes/storage.md). Arrow data goes to an object store
    in-process even when ``spark`` is given; Spark DataFrames cannot be written there yet.
    ``txnAppId`` / ``txnVersion`` (both or neither) make the write idempotent, as Delta's options:
    the commit records them in a ``txn`` action, and a write whose version is <= the one recorded
    for its appId commits nothing and returns the table's current version.
    ``partitionOverwriteMode``: "static" or "dynamic" (any case), as Delta's option; default from the
    conf ``spark.sql.sources.partitionOverwriteMode`` (env ``SPARK_SQL_SOURCES_PARTITIONOVERWRITEMODE``
    without Spark), else static. A dynamic overwrite of a partitioned table replaces only the
    partitions the data has rows in: their files are removed whole (with their deletion vectors),
    every other partition is untouched, and empty data replaces nothing. An unpartitioned table is
    overwritten whole. Refused with ``replaceWhere`` or ``overwriteSchema`` (InvalidArgumentError,
    Delta's error classes); spec_notes/schema-evolution.md.
    ``userMetadata``: text logged as the commit's ``commitInfo.userMetadata`` (DESCRIBE HISTORY's
    ``userMetadata`` column); without it the conf ``spark.databricks.delta.commitInfo.userMetadata``
    (env ``SPARK_DATABRICKS_DELTA_COMMITINFO_USERMETADATA`` without Spark) is logged, as Delta does for
    every commit. ``dataChange=False`` (or "false"): the write only rearranges rows already in the
    table (e.g. rewriting a partition with ``replaceWhere`` into fewer files): every add and remove
    logs ``dataChange=false``, so streaming and change data feed readers see no change. As in
    Delta it is refused (``DataChangeFalseError``) for a write that creates the table or changes
    its schema or partitioning, and for a ``replaceWhere`` on data columns; a value other than
    true/false raises ``InvalidArgumentError``. See spec_notes/sql-and-delta-format.md.
    """
    from dvengine.commands.options import no_conf, session_conf
    from dvengine.commands.write_options import resolve_write_options
    from dvengine.engine.local.auto_compaction import after_commit
    from dvengine.engine.local.write_api import as_arrow_table, write_arrow
    from dvengine.storage import is_object_uri, normalize_table_path

    arrow = as_arrow_table(data)
    root = normalize_table_path(path, storage_options)
    if arrow is not None and (spark is None or is_object_uri(root)):
        parts = [partitionBy] if isinstance(partitionBy, str) else partitionBy
        options = resolve_write_options(
            mergeSchema, overwriteSchema, replaceWhere, txnAppId=txnAppId, txnVersion=txnVersion,
            partitionOverwriteMode=partitionOverwriteMode,
            userMetadata=userMetadata, dataChange=dataChange,
        )
        version = write_arrow(arrow, root, mode, parts, configuration, options)
        after_commit(no_conf, root, version)
        return version
    from dvengine.engine.spark.write_api import write as write_table

    version = write_table(
        data, path, mode=mode, partitionBy=partitionBy, configuration=configuration, spark=spark,
        mergeSchema=mergeSchema, overwriteSchema=overwriteSchema, replaceWhere=replaceWhere,
        txnAppId=txnAppId, txnVersion=txnVersion, partitionOverwriteMode=partitionOverwriteMode,
        userMetadata=userMetadata, dataChange=dataChange,
    )
    session = spark
    after_commit(session_conf(session), normalize_table_path(path), version)
    return version


def jar_path() -> str | None:
    """The JVM deletion-vector reader's jar (inside an installed wheel, or ``jvm/build/`` of a
    checkout, or ``$DVENGINE_SPARK_JAR``), for ``spark.jars`` / ``--jars``; None when there is none."""
    from dvengine.engine.spark.jar import jar_path as find_jar

    return find_jar()


def configure_spark_with_dvengine(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Add dvengine's JVM reader jar (``spark.jars``) and settings to a SparkSession builder, as
    delta-spark's ``configure_spark_with_delta_pip`` does; returns the builder."""
    from dvengine.engine.spark.session import configure_spark_with_dvengine as configure

    return configure(builder)


def register(spark: SparkSession) -> None:
    """Serve ``spark.read.format("delta")`` and ``df.write.format("delta")`` of ``spark`` with dvengine.

    Sessions made by ``dvengine.engine.spark.session.get_or_create_session`` are registered already.
    """
    from dvengine.engine.spark.session import register as register_format

    register_format(spark)


@overload
def sql(spark: SparkSession, text: str) -> DataFrame: ...


@overload
def sql(spark: None, text: str) -> DataFrame | pa.Table: ...


def sql(spark: SparkSession | None, text: str) -> DataFrame | pa.Table:
    """Run SQL text (one statement, or several separated by ``;``, all parsed before any runs).

    Delta's DML and utility statements run on dvengine, through the same DeltaTable calls as the
    DataFrame API; anything else runs on ``spark.sql``. Returns the last statement's result, a
    Spark DataFrame shaped as Delta's SQL returns it (metrics, history rows, ...). ``spark`` None:
    when every statement is CREATE TABLE or INSERT ... VALUES they run in-process, no JVM, and an
    empty pyarrow Table is returned; otherwise dvengine's default local session runs them.
    """
    from dvengine.sqlcmd import run_sql

    if spark is not None:
        return run_sql(spark, text)
    return run_sql(None, text)


__all__ = [
    "DeltaTable",
    "DeltaTableBuilder",
    "IdentityGenerator",
    "__version__",
    "configure_spark_with_dvengine",
    "jar_path",
    "register",
    "sql",
    "wait_for_checkpoints",
    "write",
]
