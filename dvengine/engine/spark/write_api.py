"""``write()``: create, append to, or overwrite a Delta table from a DataFrame or an Arrow table.

The order of work is what keeps failures clean: every check that can reject the write (mode,
schema, partitioning, table features, NOT NULL) runs before any file is written; data files are
then written and only a successful commit makes them part of the table. If the commit fails
(a conflict, a concurrent create) the new files are deleted again and the error propagates.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from dvengine.commands.options import session_conf
from dvengine.commands.write import (
    finish_write,
    normalize_write_mode,
    plan_write,
    record_identity_marks,
    replace_where_mismatch,
)
from dvengine.commands.write_options import resolve_write_options
from dvengine.engine.spark.constraints import check_frame_constraints
from dvengine.engine.spark.executor import SparkExecutor
from dvengine.engine.spark.identifiers import quote, quote_path
from dvengine.engine.spark.identity_values import with_appended_identity_values
from dvengine.engine.spark.reader import castable_spark_type, logical_spark_type
from dvengine.engine.spark.writer import write_parquet_files
from dvengine.errors import (
    InvalidArgumentError,
    SchemaError,
    SchemaViolationError,
    UnsupportedFeatureError,
)
from dvengine.protocol.schema import DataType, DecimalType, PrimitiveType, StructField, StructType, from_arrow_schema
from dvengine.storage.logstore import normalize_table_path
from dvengine.writing.constraints import table_constraints
from dvengine.writing.defaults import CURRENT_DEFAULT
from dvengine.writing.generated import GENERATION_EXPRESSION
from dvengine.writing.identity import IdentitySpec, identity_columns
from dvengine.writing.schema_checks import (
    check_distinct_column_names,
    not_null_paths,
    type_signature,
)


def dataframe_schema(df: DataFrame) -> StructType:
    """The Delta schema of a DataFrame, via Arrow (the one conversion path the project trusts)."""
    return from_arrow_schema(to_arrow_schema(df.schema, timezone="UTC"))


def _field_column(path: tuple[str, ...]) -> Column:
    return F.col(quote_path(path))


def check_not_null(df: DataFrame, schema: StructType) -> None:
    """Fail before writing if a NOT NULL field would receive a null (one Spark scan, only if needed).

    A nested field under a NULL struct is NULL (Spark's field access of a NULL struct), which is
    Delta's rule too: ``DeltaInvariantCheckerExec`` reads ``s.x`` with ``GetStructField`` and refuses
    a NULL parent of a NOT NULL field (engine/local/not_null.py has the sources)."""
    paths = not_null_paths(schema)
    if not paths:
        return
    conditions = [F.when(_field_column(path).isNull(), 1).otherwise(0).alias(".".join(path)) for path in paths]
    counts = df.select(*conditions).agg(*[F.sum(F.col(quote(".".join(p)))).alias(str(i)) for i, p in enumerate(paths)])
    row = counts.collect()[0]
    bad = [".".join(p) for i, p in enumerate(paths) if (row[str(i)] or 0) > 0]
    if bad:
        raise SchemaViolationError(f"NOT NULL column(s) {bad} would receive null values; nothing was written")


ACCEPTED_DATA = "a Spark DataFrame, a pyarrow Table or a pandas DataFrame"


def to_writable(data: object) -> DataFrame | pa.Table:
    """``data`` as a Spark DataFrame or pyarrow Table; TypeError naming the accepted types otherwise.

    pandas frames go through Arrow (no index), the same conversion Spark would do. Checked before
    anything else so that a list or dict fails with a clear message instead of an AttributeError
    deep inside Spark.
    """
    if isinstance(data, (DataFrame, pa.Table)):
        return data
    pandas = sys.modules.get("pandas")  # only a loaded pandas can have made a pandas DataFrame
    if pandas is not None and isinstance(data, pandas.DataFrame):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaError(f"cannot convert the pandas DataFrame to Arrow: {exc}") from exc
    raise TypeError(f"write() needs {ACCEPTED_DATA} as data, got {type(data).__module__}.{type(data).__qualname__}")


def _session_for(data: DataFrame | pa.Table) -> SparkSession:
    """The session to write ``data`` with when none was given: the DataFrame's own, else the active one.

    Arrow data reaches this writer without a session only from callers that chose Spark on purpose
    (``dvengine.write`` writes it in-process when no session is given), so none is started here.
    """
    if isinstance(data, DataFrame):
        return data.sparkSession
    active = SparkSession.getActiveSession()
    if active is None:
        raise InvalidArgumentError("writing Arrow data through Spark needs a SparkSession: pass spark=...")
    return active


def write(
    data: DataFrame | pa.Table | Any,
    path: str,
    mode: str = "error",
    partitionBy: Sequence[str] | None = None,  # PySpark's spelling, on purpose
    configuration: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    mergeSchema: bool | str | None = None,  # named as the DataFrameWriter options
    overwriteSchema: bool | str | None = None,
    replaceWhere: str | None = None,
    txnAppId: str | None = None,
    txnVersion: int | str | None = None,
    partitionOverwriteMode: str | None = None,
    userMetadata: str | None = None,
    dataChange: bool | str | None = None,
) -> int:
    """Write ``data`` to the Delta table at ``path``; return the committed version.

    Modes: ``error`` (fail if a table exists), ``append`` (schema must match), ``overwrite``
    (replace all rows in one commit, keeping the table's identity). A missing table is created.
    ``configuration`` applies to new tables only and is merged over
    ``{"delta.enableDeletionVectors": "true"}``; its values are validated on every write.
    ``data`` may also be a pandas DataFrame; anything else raises TypeError.
    ``mergeSchema`` (default: Spark conf ``spark.databricks.delta.schema.autoMerge.enabled``),
    ``overwriteSchema`` and ``replaceWhere`` act as the DataFrameWriter options of Delta, as do
    ``txnAppId`` / ``txnVersion`` (an idempotent write: a repeat commits nothing and returns the
    current version; see ``dvengine.commands.app_txn``), ``userMetadata`` (the commit's
    ``commitInfo.userMetadata``, over the session conf) and ``dataChange`` (false: a rearrange-only
    write, see ``dvengine.commands.write.plan_write``). ``partitionOverwriteMode="dynamic"`` (default:
    the session conf ``spark.sql.sources.partitionOverwriteMode``) makes an overwrite of a
    partitioned table replace only the partitions the data writes into.
    """
    mode = normalize_write_mode(mode)
    if isinstance(partitionBy, str):
        partitionBy = [partitionBy]
    data = to_writable(data)
    root = normalize_table_path(path)
    if isinstance(data, pa.Table):
        check_distinct_column_names(from_arrow_schema(data.schema))
    session = spark if spark is not None else _session_for(data)
    options = resolve_write_options(
        mergeSchema, overwriteSchema, replaceWhere, conf=session_conf(session),
        txnAppId=txnAppId, txnVersion=txnVersion, partitionOverwriteMode=partitionOverwriteMode,
        userMetadata=userMetadata, dataChange=dataChange,
    )
    df = session.createDataFrame(data) if isinstance(data, pa.Table) else data
    data_schema = dataframe_schema(df)
    check_distinct_column_names(data_schema)
    plan = plan_write(root, mode, data_schema, partitionBy, configuration, options)
    if plan.repeat:  # this (txnAppId, txnVersion) is already in the table: nothing to write
        return finish_write(plan, [])
    identities = {
        t: spec for d, t in plan.column_pairs if d is None and (spec := identity_columns(plan.schema).get(t)) is not None
    }
    persisted: list[DataFrame] = []  # the frame identity values are drawn over; unpersisted when done
    try:
        marks: dict[str, int] = {}
        if plan.transaction.read_snapshot is not None:  # an existing table: align columns, check NOT NULL
            df = df.select(*[
                F.lit(None).cast("bigint").alias(table_name) if table_name in identities else
                _aligned_column(data_name, None if data_name is None else data_schema.get(data_name), plan.schema.get(table_name))
                for data_name, table_name in plan.column_pairs
            ])
            if identities:
                df, marks = _with_identity_values(df, identities, persisted)
            check_not_null(df, plan.schema)
            check_frame_constraints(df, table_constraints(plan.configuration, plan.schema), "the write")
        if plan.replace is not None:
            assert plan.replace.predicate is not None
            check_replace_where(df, plan.replace.predicate.sql)
        executor = None
        if plan.replace is not None:
            executor = SparkExecutor(session)  # before any file is written: it checks the Python workers
        if marks:  # before any file is written: the new metadata is checked when it is recorded
            record_identity_marks(plan, marks)
        adds = write_parquet_files(df, plan.table_root, plan.schema, plan.partition_columns, plan.num_indexed_cols)
        return finish_write(plan, adds, executor)
    finally:
        for frame in persisted:
            frame.unpersist()


def _with_identity_values(
    df: DataFrame, identities: Mapping[str, IdentitySpec], persisted: list[DataFrame]
) -> tuple[DataFrame, dict[str, int]]:
    """``df`` (identity columns NULL) with new identity values in every row, and the new marks.

    Dense values ``mark + step``, ``mark + 2*step`` ... as the in-process append gives, spread over
    the frame's partitions (``identity_values.with_appended_identity_values``): the frame is
    persisted, one job counts its rows per partition, and the write reads the persisted rows. So
    the frame's upstream (a shuffle, under AQE too) runs once, which asking the partition count
    first (``df.rdd.getNumPartitions()``, what this replaced) did not guarantee: under AQE that
    runs the upstream stages, and the write then ran them again. The mark is exact (the last value
    handed out), with no need for the column's statistics in the written files."""
    return with_appended_identity_values(df, identities, persisted, "the write")


def _aligned_column(data_name: str | None, data_field: StructField | None, field: StructField) -> Column:
    """A data column under its table name and type, or for a column the data lacks: its generation
    expression (generated columns, evaluated by Spark over the data's columns), else NULL of the
    table's type (``mergeSchema``, nullable columns)."""
    if data_name is None or data_field is None:
        for key in (GENERATION_EXPRESSION, CURRENT_DEFAULT):  # a generated column; a column with a DEFAULT
            if key in field.metadata:
                return F.expr(str(field.metadata[key])).cast(logical_spark_type(field)).alias(field.name)
        return F.lit(None).cast(logical_spark_type(field)).alias(field.name)
    return _conform(F.col(quote(data_name)), data_field.type, field).alias(field.name)


def _conform(column: Column, data_type: DataType, field: StructField) -> Column:
    """``column`` as ``field``'s type. Spark casts structs by position, so a struct whose fields
    differ (a merged schema: other order, added fields) is rebuilt field by field, by name."""
    target = field.type
    if isinstance(target, StructType) and isinstance(data_type, StructType) and type_signature(target) != type_signature(
        data_type
    ):
        children = []
        for child in target.fields:
            found = data_type.find(child.name)
            value = F.lit(None).cast(logical_spark_type(child)) if found is None else _conform(
                column.getField(found.name), found.type, child
            )
            children.append(value.alias(child.name))
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*children))
    if type_signature(target) != type_signature(data_type) and not isinstance(target, (PrimitiveType, DecimalType)):
        raise UnsupportedFeatureError(
            f"column {field.name!r}: writing {data_type.simple_string()} data into {target.simple_string()} "
            "(a merged array/map element type) is not implemented on Spark"
        )
    return column.cast(castable_spark_type(field))  # NOT NULL fields: check_not_null, on the values


def check_replace_where(df: DataFrame, predicate_sql: str) -> None:
    """Delta's replaceWhere constraint: every written row satisfies the predicate (NULL fails too); one Spark job."""
    bad = df.filter(~F.coalesce(F.expr(predicate_sql), F.lit(False))).count()
    if bad:
        raise SchemaViolationError(replace_where_mismatch(predicate_sql, bad))


__all__ = ["ACCEPTED_DATA", "dataframe_schema", "to_writable", "write"]
