"""Which NOT NULL fields a batch of new rows would fill with NULL, nested struct fields included.

Delta's rule, followed on every write path: a NOT NULL field reached through structs is NULL for a
row wherever the field is NULL *or any struct above it is NULL*. ``Invariants.getFromSchema`` makes
a ``Constraints.NotNull(parents :+ name)`` of every non-nullable field reached through structs
(``filterRecursively(schema, checkComplexTypes = false)``: whether the parents are nullable does not
matter); ``DeltaInvariantCheckerExec.buildExtractor`` reads it with nested ``GetStructField``s, which
are NULL under a NULL struct, and ``CheckDeltaInvariant`` throws
``DeltaInvariantViolationException`` (DELTA_NOT_NULL_CONSTRAINT_VIOLATED) for a NULL. Delta's own
``InvariantEnforcementSuite`` ("reject non-nullable nested column") refuses ``Row(null)`` for a
nullable ``top`` with a NOT NULL ``top.key``. So a NULL parent of a NOT NULL field is refused.

A nested UPDATE / MERGE assignment always builds a non-NULL struct, so ``SET s.x = 1`` on a row
whose ``s`` is NULL leaves ``s.y`` NULL, which a NOT NULL ``s.y`` refuses, as in Delta.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.errors import SchemaViolationError
from dvengine.protocol.schema import StructField, StructType
from dvengine.writing.schema_checks import not_null_paths


def _child(values: pa.ChunkedArray | pa.Array, name: str) -> pa.ChunkedArray | pa.Array | None:
    """The field ``name`` of the struct ``values`` (exact name first, then case-insensitive, as
    Delta's resolver); None when the data's struct has no such field (its cast reports that)."""
    struct_type = values.type
    names = [struct_type.field(i).name for i in range(struct_type.num_fields)]
    index = names.index(name) if name in names else next((i for i, n in enumerate(names) if n.lower() == name.lower()), None)
    return None if index is None else pc.struct_field(values, [index])


def _null_at(values: pa.ChunkedArray | pa.Array, path: tuple[str, ...]) -> pa.ChunkedArray | pa.Array | None:
    """Per row: is ``path`` (below the column ``values``) NULL, counting a NULL struct on the way
    as NULL, as Delta's nested ``GetStructField`` does. None when the data lacks a field of it."""
    nulls = pc.is_null(values)
    for name in path:
        child = _child(values, name)
        if child is None:
            return None
        values = child
        nulls = pc.or_(nulls, pc.is_null(values))
    return nulls


def null_into_not_null(table: pa.Table, schema: StructType) -> list[str]:
    """Dotted paths of the NOT NULL fields of ``schema`` that are NULL in ``table`` (columns by
    logical name), a NULL parent struct counting as NULL (Delta's rule: see the module doc)."""
    bad: list[str] = []
    for path in not_null_paths(schema):
        nulls = _null_at(table.column(path[0]), path[1:])
        if nulls is not None and pc.any(nulls).as_py():
            bad.append(".".join(path))
    return bad


def check_column_not_null(column: pa.ChunkedArray | pa.Array, field: StructField) -> None:
    """Refuse a column headed for the table's ``field`` in which a NOT NULL field below it (a
    struct's, reached through structs) is NULL or under a NULL struct: SchemaViolationError naming
    the column path, the same refusal as a NULL in a NOT NULL column."""
    for path in not_null_paths(StructType((field,))):
        if len(path) == 1:
            continue  # the column's own flag: the caller's top-level check
        nulls = _null_at(column, path[1:])
        if nulls is not None and pc.any(nulls).as_py():
            raise SchemaViolationError(
                f"NOT NULL column {'.'.join(path)!r} would receive null values (a NULL struct above a NOT NULL "
                "field counts as NULL, as in Delta); nothing was written"
            )
