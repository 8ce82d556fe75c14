"""UPDATE with deletion vectors: retire the matched rows in place, write only their new versions.

In DV mode the matched rows of each touched file get a DV and their updated copies go to new
files, so nothing unchanged is copied (``numCopiedRows`` = 0). Files the rewrite threshold
sends to copy-on-write are rewritten whole with ``CASE WHEN condition THEN new ELSE old``.
Values are cast to the column types with Spark's store-assignment rules, and NOT NULL columns
are checked before any file is written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dvengine.commit.transaction import Transaction
from dvengine.engine.spark.columns import value_column_to_sql
from dvengine.engine.spark.dml_common import (
    prepare_dml,
    retire_rows,
    spark_error_class,
    write_rows,
)
from dvengine.engine.spark.paths import spark_file_uri
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, logical_spark_type, scan_logical, spark_schema
from dvengine.engine.spark.write_api import check_not_null
from dvengine.errors import InvalidArgumentError, InvalidPredicateError, SchemaViolationError
from dvengine.expressions import parse_value_expression
from dvengine.log import Snapshot
from dvengine.storage import resolve_data_path

# Spark error classes that mean "this value does not fit the column".
_CAST_ERRORS = ("CAST_INVALID_INPUT", "CAST_OVERFLOW", "NUMERIC_VALUE_OUT_OF_RANGE", "DATATYPE_MISMATCH", "INCOMPATIBLE_DATA")


def bind_assignments(
    spark: SparkSession, snapshot: Snapshot, assignments: Mapping[str, str | Column]
) -> dict[str, str]:
    """Validate ``set`` and return {schema column name: SQL of its new value}."""
    if not assignments:
        raise InvalidArgumentError("update needs at least one assignment in set={column: expression}")
    empty = spark.createDataFrame([], spark_schema(snapshot.schema))
    bound: dict[str, str] = {}
    for name, value in assignments.items():
        field = snapshot.schema.find(name)
        if field is None:
            raise InvalidPredicateError(
                f"cannot update column {name!r}: it is not in the table; columns are {snapshot.schema.field_names}"
            )
        if field.name in bound:
            raise InvalidArgumentError(f"column {field.name!r} is assigned more than once")
        text = value if isinstance(value, str) else value_column_to_sql(value, empty)
        sql = parse_value_expression(text, snapshot.schema).sql
        try:  # analysis-time check that the value can be stored in the column
            empty.select(F.expr(sql).cast(logical_spark_type(field)).alias("v")).schema  # noqa: B018
        except PySparkException as exc:
            raise SchemaViolationError(
                f"value {text!r} cannot be stored in column {field.name!r} of type {field.type.simple_string()}: {exc}"
            ) from exc
        bound[field.name] = sql
    return bound


def updated_projection(snapshot: Snapshot, assignments: Mapping[str, str], matched: Column | None) -> list[Column]:
    """Columns of the new row: assigned values where ``matched`` holds (always when None), else the old value."""
    out = []
    for field in snapshot.schema.fields:
        target = logical_spark_type(field)
        old = F.col(f"`{field.name}`")
        if field.name not in assignments:
            out.append(old)
            continue
        new = F.expr(assignments[field.name]).cast(target)
        out.append((new if matched is None else F.when(matched, new).otherwise(old)).alias(field.name))
    return out


def execute_update(
    spark: SparkSession,
    table_root: str,
    condition: str | Column | None,
    assignments: Mapping[str, str | Column],
    mode: str | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    setup = prepare_dml(spark, table_root, "UPDATE", condition, mode)
    snapshot, plan, predicate, txn, now_ms = setup.snapshot, setup.plan, setup.predicate, setup.transaction, setup.now_ms
    bound = bind_assignments(spark, snapshot, assignments)
    metrics: dict[str, Any] = {
        "numUpdatedRows": 0,
        "numCopiedRows": 0,
        "numAddedFiles": 0,
        "numRemovedFiles": 0,
        "numDeletionVectorsAdded": 0,
        "numDeletionVectorsRemoved": 0,
        "numDeletionVectorsUpdated": 0,
        "numAddedBytes": 0,
        "numRemovedBytes": 0,
        "numAddedChangeFiles": 0,
        "scanTimeMs": 0,
        "rewriteTimeMs": 0,
        **plan.metrics(),
        "numFilesVerified": len(plan.candidates),
    }
    if plan.candidates:
        condition_col = F.lit(True) if predicate is None else F.coalesce(F.expr(predicate.sql), F.lit(False))
        matched = scan_logical(spark, snapshot, plan.candidates, keep_row_ids=True).where(condition_col)
        matched = matched.persist()
        try:
            validate_new_values(matched, snapshot, bound)
            retired = retire_rows(spark, snapshot, plan.candidates, matched, setup.options, setup.dv_supported, now_ms)
            if retired.rows_retired:
                new_rows = _new_rows(spark, snapshot, matched, retired.files_to_rewrite, bound, condition_col)
                _write_checked(new_rows, snapshot, txn, metrics)
                txn.add_actions(retired.actions)
                metrics.update(
                    retired.delta_metrics(),
                    numUpdatedRows=retired.rows_retired,
                    numCopiedRows=metrics["numCopiedRows"] - retired.rows_retired,
                )
        finally:
            matched.unpersist()
    metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
    if metrics["numUpdatedRows"] == 0:
        metrics["version"] = None
        return metrics
    metrics["version"] = txn.commit({k: v for k, v in metrics.items() if k != "version"})
    return metrics


def _new_rows(
    spark: SparkSession,
    snapshot: Snapshot,
    matched: DataFrame,
    rewrite_files: list[Any],
    assignments: Mapping[str, str],
    condition_col: Column,
) -> DataFrame:
    """Updated copies of matched rows outside rewritten files, plus whole rewritten files."""
    rewrite_uris = [spark_file_uri(resolve_data_path(snapshot.table_root, a.path)) for a in rewrite_files]
    outside = matched.where(~F.col(FILE_PATH_COL).isin(rewrite_uris)) if rewrite_uris else matched
    rows = outside.drop(FILE_PATH_COL, ROW_INDEX_COL).select(*updated_projection(snapshot, assignments, None))
    if rewrite_files:
        whole = scan_logical(spark, snapshot, rewrite_files).select(
            *updated_projection(snapshot, assignments, condition_col)
        )
        rows = rows.unionByName(whole)
    return rows


def _raise_if_cast_error(exc: PySparkException) -> None:
    error_class = spark_error_class(exc) or ""
    if error_class.startswith(_CAST_ERRORS):
        raise SchemaViolationError(f"an updated value does not fit its column ({error_class}); nothing was written") from exc


def validate_new_values(matched: DataFrame, snapshot: Snapshot, assignments: Mapping[str, str]) -> None:
    """Evaluate every assigned value of every matched row once, before anything is written.

    Under ANSI casting an unfit value fails this job; a null headed for a NOT NULL column is
    counted. Either way the table folder is still untouched when the error is raised.
    """
    new_values = matched.select(*updated_projection(snapshot, assignments, None))
    try:
        check_not_null(new_values, snapshot.schema)
        nulls = new_values.agg(*[F.count_if(F.col(f"`{name}`").isNull()).alias(f"c{i}") for i, name in enumerate(assignments)])
        nulls.collect()
    except PySparkException as exc:
        _raise_if_cast_error(exc)
        raise


def _write_checked(rows: DataFrame, snapshot: Snapshot, txn: Transaction, metrics: dict[str, Any]) -> None:
    """Write the new rows; cast failures surface as SchemaViolationError."""
    try:
        written = write_rows(rows, snapshot)
    except PySparkException as exc:
        _raise_if_cast_error(exc)
        raise
    txn.add_actions(written.files)
    metrics.update(
        numAddedFiles=len(written.files),
        numAddedBytes=written.bytes,
        numCopiedRows=written.rows,
        rewriteTimeMs=written.elapsed_ms,
    )
