"""Which NOT NULL fields a batch of new rows would fill with NULL, nested struct fields included.

A nested field is checked where its parent structs are non-NULL: a NULL struct leaves its fields
NULL legitimately (dvengine's rule on every write path; Delta's invariant checker is stricter and
also refuses a NULL parent of a NOT NULL field). A nested UPDATE / MERGE assignment always builds a
non-NULL struct, so ``SET s.x = 1`` on a row whose ``s`` is NULL leaves ``s.y`` NULL, which a NOT
NULL ``s.y`` refuses, as in Delta.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.protocol.schema import StructType
from dvengine.writing.schema_checks import not_null_paths


def null_into_not_null(table: pa.Table, schema: StructType) -> list[str]:
    """Dotted paths of the NOT NULL fields of ``schema`` that hold a NULL in ``table`` (columns by logical name)."""
    bad: list[str] = []
    for path in not_null_paths(schema):
        values: pa.ChunkedArray | pa.Array = table.column(path[0])
        parents_valid = None
        for name in path[1:]:
            valid = pc.is_valid(values)
            parents_valid = valid if parents_valid is None else pc.and_(parents_valid, valid)
            values = pc.struct_field(values, name)
        nulls = pc.is_null(values) if parents_valid is None else pc.and_(parents_valid, pc.is_null(values))
        if pc.any(nulls).as_py():
            bad.append(".".join(path))
    return bad
