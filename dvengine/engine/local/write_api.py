"""``dvengine.write`` for Arrow data (pyarrow Table, RecordBatch, pandas DataFrame) without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dvengine.commands.write import WritePlan, finish_write, plan_write, replace_where_mismatch
from dvengine.commands.write_options import SchemaWriteOptions
from dvengine.engine.local.constraints import check_constraints
from dvengine.engine.local.executor import LocalExecutor
from dvengine.engine.local.writer import write_data_files
from dvengine.errors import InvalidPredicateError, NotLocallyEvaluableError, SchemaMismatchError, SchemaViolationError
from dvengine.expressions import BoundPredicate, to_pyarrow_expression
from dvengine.protocol.schema import from_arrow_schema, to_arrow_schema
from dvengine.writing.constraints import table_constraints


def as_arrow_table(data: Any) -> pa.Table | None:
    """``data`` as a pyarrow Table when it is Arrow or pandas data, else None."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if type(data).__module__.startswith("pandas") and type(data).__name__ == "DataFrame":
        return pa.Table.from_pandas(data, preserve_index=False)
    return None


def normalize_arrow_types(table: pa.Table) -> pa.Table:
    """Large/view strings and binaries as plain ones, and timestamps in microseconds (Delta's unit)."""
    fields = []
    for f in table.schema:
        t = f.type
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        elif pa.types.is_timestamp(t) and t.unit != "us":
            t = pa.timestamp("us", tz="UTC" if t.tz is not None else None)
        elif pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
            t = pa.timestamp("us", tz="UTC")
        fields.append(pa.field(f.name, t, f.nullable))
    return table.cast(pa.schema(fields))


def write_arrow(
    table: pa.Table,
    table_root: str,
    mode: str,
    partition_by: Sequence[str] | None,
    configuration: Mapping[str, str] | None,
    options: SchemaWriteOptions | None = None,
) -> int:
    """Create, append to or overwrite the table at ``table_root`` with ``table``; the committed version.

    ``options``: ``mergeSchema`` / ``overwriteSchema`` / ``replaceWhere`` (see ``plan_write``).
    """
    table = normalize_arrow_types(table)
    plan = plan_write(table_root, mode, from_arrow_schema(table.schema), partition_by, configuration, options)
    aligned = align_to_table(table, plan)
    if plan.replace is not None:
        assert plan.replace.predicate is not None
        check_replace_where(aligned, plan.replace.predicate)
    check_constraints(aligned, table_constraints(plan.configuration, plan.schema))
    adds = write_data_files(aligned, plan.table_root, plan.schema, plan.partition_columns, plan.num_indexed_cols)
    executor = LocalExecutor() if plan.replace is not None else None
    return finish_write(plan, adds, executor)  # deletes the files again if the commit does not happen


def align_to_table(table: pa.Table, plan: WritePlan) -> pa.Table:
    """The data's columns in table order under table names and types; columns the data lacks
    (``mergeSchema``) as nulls. NOT NULL and type problems raise before anything is written."""
    target = to_arrow_schema(plan.schema)
    columns = []
    for (data_name, table_name), f in zip(plan.column_pairs, target):
        column = pa.chunked_array([pa.nulls(table.num_rows, f.type)]) if data_name is None else table.column(data_name)
        if column.null_count and not f.nullable:
            raise SchemaViolationError(f"NOT NULL column {table_name!r} would receive null values; nothing was written")
        try:
            columns.append(column.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatchError(
                f"column {table_name!r}: the data's {column.type} cannot be written as the table's {f.type} ({exc}); "
                "nothing was written"
            ) from exc
    return pa.Table.from_arrays(columns, names=[name for _, name in plan.column_pairs])


def check_replace_where(data: pa.Table, predicate: BoundPredicate) -> None:
    """Delta's replaceWhere constraint: every written row must satisfy the predicate (NULL fails too)."""
    try:
        passing = data.filter(to_pyarrow_expression(predicate)).num_rows
    except InvalidPredicateError as exc:
        raise NotLocallyEvaluableError(
            f"replaceWhere {predicate.sql!r} cannot be checked without Spark ({exc}); pass spark= to write()"
        ) from exc
    if passing != data.num_rows:
        raise SchemaViolationError(replace_where_mismatch(predicate.sql, data.num_rows - passing))
