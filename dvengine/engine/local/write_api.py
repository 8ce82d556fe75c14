"""``dvengine.write`` for Arrow data (pyarrow Table, RecordBatch, pandas DataFrame) without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dvengine.commands.write import finish_write, plan_write
from dvengine.engine.local.writer import write_data_files
from dvengine.errors import SchemaViolationError
from dvengine.protocol.schema import from_arrow_schema, to_arrow_schema


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
) -> int:
    """Create, append to or overwrite the table at ``table_root`` with ``table``; the committed version."""
    table = normalize_arrow_types(table)
    plan = plan_write(table_root, mode, from_arrow_schema(table.schema), partition_by, configuration)
    target = to_arrow_schema(plan.schema)
    columns = []
    for (data_name, table_name), f in zip(plan.column_pairs, target):
        column = table.column(data_name)
        if column.null_count and not f.nullable:
            raise SchemaViolationError(f"NOT NULL column {table_name!r} would receive null values; nothing was written")
        columns.append(column.cast(f.type))
    aligned = pa.Table.from_arrays(columns, names=[name for _, name in plan.column_pairs])
    adds = write_data_files(aligned, plan.table_root, plan.schema, plan.partition_columns, plan.num_indexed_cols)
    return finish_write(plan, adds)  # deletes the files again if the commit does not happen
