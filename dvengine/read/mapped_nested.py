"""Nested struct fields of a column-mapped file, matched to the table schema by physical name.

PROTOCOL.md "Column Mapping": a reader finds every field, nested ones included, by its physical
name (mode ``name``) or id. Matching nested fields by position (what
:func:`dvengine.read.arrow_reader.relabel_by_position` does) is right only while the file's struct
has the schema's fields in the schema's order; ``ALTER TABLE ADD COLUMNS (s.z ...)``, ``DROP COLUMN
s.x`` or a nested schema evolution break that, and every field of the struct then read as NULL
(or, worse, another field's values). Here each schema field takes the file's child of its physical
name, a child the file lacks reads as NULL, and a child the schema no longer has is skipped.
A file whose struct has none of the physical names (written by a writer that labelled nested
fields otherwise) keeps the positional match, as before.
"""

from __future__ import annotations

import pyarrow as pa

from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType, holds_struct, to_arrow_type


def to_logical(column: pa.ChunkedArray, field: StructField, target: pa.DataType) -> pa.ChunkedArray | None:
    """``column`` as ``target`` with nested fields matched by physical name; None when the
    positional match applies (no struct inside, or no physical name found in the file)."""
    if not holds_struct(field.type) or column.type == target:
        return None
    try:
        chunks = [_array(chunk, field.type) for chunk in column.chunks]
    except _Positional:
        return None
    return pa.chunked_array(chunks, type=target)


class _Positional(Exception):
    """The file's struct does not use the schema's physical names: fall back to positions."""




def _array(array: pa.Array, data_type: DataType) -> pa.Array:
    target = to_arrow_type(data_type)
    if isinstance(data_type, StructType) and pa.types.is_struct(array.type):
        present = {array.type.field(i).name: i for i in range(array.type.num_fields)}
        if not any(f.physical_name in present for f in data_type.fields):
            raise _Positional
        children = [
            _array(array.field(present[f.physical_name]), f.type) if f.physical_name in present
            else pa.nulls(len(array), to_arrow_type(f.type))
            for f in data_type.fields
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if isinstance(data_type, ArrayType) and (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        values = _array(array.values, data_type.element_type)
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=array.is_null())
    if isinstance(data_type, MapType) and pa.types.is_map(array.type):
        keys = _array(array.keys, data_type.key_type)
        items = _array(array.items, data_type.value_type)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=array.is_null())
    return array.cast(target)
