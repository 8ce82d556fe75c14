"""``dvengine.write`` for Arrow data (pyarrow Table, RecordBatch, pandas DataFrame) without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dvengine.commands.write import WritePlan, finish_write, plan_write, record_identity_marks, replace_where_mismatch
from dvengine.commands.write_options import SchemaWriteOptions
from dvengine.engine.local.constraints import check_constraints
from dvengine.engine.local.executor import LocalExecutor
from dvengine.engine.local.not_null import check_column_not_null
from dvengine.engine.local.writer import write_data_files
from dvengine.errors import (
    EvaluationError,
    InvalidPredicateError,
    NotLocallyEvaluableError,
    SchemaMismatchError,
    SchemaViolationError,
)
from dvengine.expressions import BoundPredicate, parse_value_expression, to_pyarrow_expression, to_pyarrow_value
from dvengine.expressions.arrow_plans import filter_table, project_table
from dvengine.protocol.schema import StructField, conform_table, from_arrow_schema, to_arrow_schema
from dvengine.writing.constraints import table_constraints
from dvengine.writing.defaults import column_defaults
from dvengine.writing.generated import generation_expressions
from dvengine.writing.identity import identity_columns


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
    return conform_table(table, pa.schema(fields))


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
    if plan.repeat:  # this (txnAppId, txnVersion) is already in the table: nothing to write
        return finish_write(plan, [])
    aligned = align_to_table(table, plan)
    aligned = _with_identity_values(aligned, plan)
    if plan.replace is not None:
        assert plan.replace.predicate is not None
        check_replace_where(aligned, plan.replace.predicate)
    check_constraints(aligned, table_constraints(plan.configuration, plan.schema))
    adds = write_data_files(aligned, plan.table_root, plan.schema, plan.partition_columns, plan.num_indexed_cols)
    executor = LocalExecutor() if plan.replace is not None else None
    return finish_write(plan, adds, executor)  # deletes the files again if the commit does not happen


def align_to_table(table: pa.Table, plan: WritePlan) -> pa.Table:
    """The data's columns in table order under table names and types; columns the data lacks
    (``mergeSchema``, nullable columns) as nulls, generated columns it lacks computed from the
    others. NOT NULL and type problems raise before anything is written."""
    target = to_arrow_schema(plan.schema)
    defaults = column_defaults(plan.schema)
    generated = {**{t: defaults[t] for d, t in plan.column_pairs if d is None and t in defaults},
                 **generation_expressions(plan.schema)}  # computed from the other columns: defaults, generated
    later = {t for d, t in plan.column_pairs if d is None and t in generated}
    identity = identity_columns(plan.schema)
    columns: dict[str, pa.ChunkedArray] = {}
    for (data_name, table_name), f in zip(plan.column_pairs, target):
        if table_name in later:
            continue
        if data_name is None and table_name in identity:  # filled by _with_identity_values
            columns[table_name] = pa.chunked_array([pa.array([0] * table.num_rows, pa.int64())])
            continue
        column = pa.chunked_array([pa.nulls(table.num_rows, f.type)]) if data_name is None else table.column(data_name)
        columns[table_name] = _conform(column, f, table_name, plan.schema.get(table_name))
    if later:
        known = pa.Table.from_pydict(columns) if columns else pa.table({"__rows": pa.nulls(table.num_rows)})
        for name in sorted(later):
            field = target.field(name)
            columns[name] = _conform(_generated_values(known, plan, name, generated[name]), field, name, plan.schema.get(name))
    return pa.Table.from_arrays([columns[name] for _, name in plan.column_pairs], names=[n for _, n in plan.column_pairs])


def _with_identity_values(aligned: pa.Table, plan: WritePlan) -> pa.Table:
    """Identity columns the data lacks get dense new values beyond the high-water mark; the new
    marks go into the commit (``record_identity_marks``)."""
    specs = identity_columns(plan.schema)
    missing = [t for d, t in plan.column_pairs if d is None and t in specs]
    if not missing or plan.transaction.read_snapshot is None:
        return aligned
    marks: dict[str, int | None] = {}
    for name in missing:
        values = specs[name].values(aligned.num_rows)
        aligned = aligned.set_column(aligned.schema.get_field_index(name), name, pa.array(values, pa.int64()))
        marks[name] = specs[name].mark_after(values)
    record_identity_marks(plan, marks)
    return aligned


def _conform(column: pa.ChunkedArray, f: pa.Field, table_name: str, field: StructField) -> pa.ChunkedArray:
    """``column`` cast to the table's type, after the NOT NULL checks: the column's own flag, then
    the NOT NULL fields of its structs (a NULL struct above one counts as NULL, as in Delta), both
    SchemaViolationError naming the column path; a value that does not cast is SchemaMismatchError."""
    if column.null_count and not f.nullable:
        raise SchemaViolationError(f"NOT NULL column {table_name!r} would receive null values; nothing was written")
    check_column_not_null(column, field)
    try:
        return column.cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(
            f"column {table_name!r}: the data's {column.type} cannot be written as the table's {f.type} ({exc}); "
            "nothing was written"
        ) from exc


def _generated_values(rows: pa.Table, plan: WritePlan, name: str, text: str) -> pa.ChunkedArray:
    """Values of generated (or defaulted) column ``name`` for ``rows`` (the other columns, under table names)."""
    value = parse_value_expression(text, plan.schema)
    try:
        expression = to_pyarrow_value(value, plan.schema.get(name).type)
    except InvalidPredicateError as exc:
        raise NotLocallyEvaluableError(
            f"column {name!r} ({text}) cannot be computed without Spark ({exc}); pass spark= to write() "
            "or provide the column's values"
        ) from exc
    try:
        return project_table(rows, [expression], [name]).column(0)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError) as exc:
        raise EvaluationError(f"column {name!r} ({text}) failed while evaluating rows: {exc}") from exc


def check_replace_where(data: pa.Table, predicate: BoundPredicate) -> None:
    """Delta's replaceWhere constraint: every written row must satisfy the predicate (NULL fails too)."""
    try:
        passing = filter_table(data, to_pyarrow_expression(predicate)).num_rows
    except InvalidPredicateError as exc:
        raise NotLocallyEvaluableError(
            f"replaceWhere {predicate.sql!r} cannot be checked without Spark ({exc}); pass spark= to write()"
        ) from exc
    if passing != data.num_rows:
        raise SchemaViolationError(replace_where_mismatch(predicate.sql, data.num_rows - passing))
