"""Schema evolution: Delta's rules for merging a table's schema with the schema of new data.

This follows delta-spark's ``SchemaMergingUtils.mergeSchemas``: table fields keep their order,
name, nullability and metadata; fields only the data has are appended (nullable, since files
written before have no values for them), recursively inside structs, arrays and maps; names match
case-insensitively. A column whose type differs is widened to the data's type only when the
table has type widening enabled and the change is one schema evolution may apply
(:mod:`dvengine.protocol.type_widening`; the change is recorded in ``delta.typeChanges``);
otherwise it is refused with a :class:`SchemaMismatchError` naming the column and both types.
Pure functions: nothing is read or written.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from dvengine.errors import SchemaMismatchError, UnsupportedFeatureError
from dvengine.protocol.actions import Protocol
from dvengine.protocol.features import TIMESTAMP_NTZ, reader_features, writer_features
from dvengine.protocol.schema import (
    FIELD_ID_KEY,
    PHYSICAL_NAME_KEY,
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
)
from dvengine.protocol.type_widening import widened_type, with_type_change
from dvengine.writing.schema_checks import type_signature, uses_timestamp_ntz

MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
MAPPING_MODE_KEY = "delta.columnMapping.mode"
# Parquet stores byte, short and int alike (INT32); Delta lets data of a narrower of these types
# go into a wider table column without changing the table (the other direction would change it).
_INT32_RANK = {"byte": 0, "short": 1, "integer": 2}


def _refuse(path: str, table: DataType, data: DataType, why: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"cannot merge column {path!r}: the table has type {table.simple_string()} and the data "
        f"{data.simple_string()} ({why}); nothing was written"
    )


def merge_types(
    table: DataType, data: DataType, path: str, implicit_casts: bool = False, widen: bool = False
) -> DataType:
    """The merged type of one column, or SchemaMismatchError naming it and both types.

    ``implicit_casts`` (MERGE's mode): an existing column keeps its type whenever the data's
    differs only in a way the statement casts anyway (values are cast to the target type).
    ``widen`` (the table has type widening enabled): a wider data type the protocol lets schema
    evolution apply replaces the table's, before implicit casts are considered (as in Delta).
    """
    if isinstance(table, StructType) and isinstance(data, StructType):
        return merge_struct(table, data, path + ".", implicit_casts, widen)
    if isinstance(table, ArrayType) and isinstance(data, ArrayType):
        element = merge_types(table.element_type, data.element_type, path + ".element", implicit_casts, widen)
        return ArrayType(element, table.contains_null)
    if isinstance(table, MapType) and isinstance(data, MapType):
        key = merge_types(table.key_type, data.key_type, path + ".key", implicit_casts, widen)
        value = merge_types(table.value_type, data.value_type, path + ".value", implicit_casts, widen)
        return MapType(key, value, table.value_contains_null)
    if type_signature(table) == type_signature(data):
        return table
    widened = widened_type(table, data) if widen else None
    if widened is not None:
        return widened
    if isinstance(table, DecimalType) and isinstance(data, DecimalType) and not implicit_casts:
        raise _refuse(path, table, data, "Delta's DELTA_MERGE_INCOMPATIBLE_DECIMAL_TYPE: precision and scale must match")
    table_rank, data_rank = _INT32_RANK.get(table.name), _INT32_RANK.get(data.name)
    if table_rank is not None and data_rank is not None and data_rank < table_rank:
        return table
    if implicit_casts and not isinstance(table, (StructType, ArrayType, MapType)) and not isinstance(
        data, (StructType, ArrayType, MapType)
    ):
        return table
    raise _refuse(
        path, table, data,
        "not a widening the typeWidening feature applies by schema evolution"
        if widen
        else "changing a column's type needs the typeWidening table feature enabled (delta.enableTypeWidening=true)",
    )


def merge_struct(
    table: StructType, data: StructType, prefix: str = "", implicit_casts: bool = False, widen: bool = False
) -> StructType:
    """Table fields (merged) in table order, then the data's new fields, nullable; a widened
    field records its change in ``delta.typeChanges``."""
    data_by_name = {f.name.lower(): f for f in data.fields}
    merged: list[StructField] = []
    for f in table.fields:
        other = data_by_name.get(f.name.lower())
        if other is None:
            merged.append(f)
        else:
            merged.append(with_type_change(f, merge_types(f.type, other.type, prefix + f.name, implicit_casts, widen)))
    known = {f.name.lower() for f in table.fields}
    merged.extend(_as_new(f) for f in data.fields if f.name.lower() not in known)
    return StructType(tuple(merged))


def _as_new(f: StructField) -> StructField:
    """A field added by evolution: nullable at every level, no metadata carried over from the data."""
    return StructField(f.name, _nullable_type(f.type), True, {})


def _nullable_type(data_type: DataType) -> DataType:
    if isinstance(data_type, StructType):
        return StructType(tuple(_as_new(f) for f in data_type.fields))
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable_type(data_type.element_type), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable_type(data_type.key_type), _nullable_type(data_type.value_type), True)
    return data_type


def assign_column_mapping(
    schema: StructType, configuration: Mapping[str, str]
) -> tuple[StructType, dict[str, str]]:
    """Give every field lacking one a column id and physical name, as the protocol requires.

    Under ``delta.columnMapping.mode`` ``name`` or ``id`` each field at every nesting level
    carries ``delta.columnMapping.id`` (above ``delta.columnMapping.maxColumnId``, which is
    raised) and ``delta.columnMapping.physicalName`` (``col-<uuid>``, as Delta names them).
    Without column mapping the schema and configuration are returned unchanged.
    """
    config = dict(configuration)
    mode = config.get(MAPPING_MODE_KEY, "none").strip().lower()
    if mode == "none":
        return schema, config
    if mode not in ("name", "id"):
        raise UnsupportedFeatureError(f"cannot add columns under {MAPPING_MODE_KEY}={mode!r}")
    raw = config.get(MAX_COLUMN_ID_KEY)
    if raw is None:
        raise UnsupportedFeatureError(
            f"the column-mapped table has no {MAX_COLUMN_ID_KEY} property, so new column ids cannot be assigned safely"
        )
    counter = [int(raw)]

    def field_of(f: StructField) -> StructField:
        metadata = dict(f.metadata)
        if FIELD_ID_KEY not in metadata:
            counter[0] += 1
            metadata[FIELD_ID_KEY] = counter[0]
            metadata[PHYSICAL_NAME_KEY] = f"col-{uuid.uuid4()}"
        return StructField(f.name, map_nested_fields(f.type, field_of), f.nullable, metadata)

    mapped = StructType(tuple(field_of(f) for f in schema.fields))
    config[MAX_COLUMN_ID_KEY] = str(counter[0])
    return mapped, config


def strip_column_mapping(schema: StructType) -> StructType:
    """The schema without column-mapping metadata (data schemas carry none; a replaced schema gets fresh ids)."""

    def field_of(f: StructField) -> StructField:
        metadata = {k: v for k, v in f.metadata.items() if k not in (FIELD_ID_KEY, PHYSICAL_NAME_KEY)}
        return StructField(f.name, map_nested_fields(f.type, field_of), f.nullable, metadata)

    return StructType(tuple(field_of(f) for f in schema.fields))


def map_nested_fields(data_type: DataType, field_of: Callable[[StructField], StructField]) -> DataType:
    """``data_type`` with ``field_of`` applied to each struct field inside it, through arrays and
    maps (``field_of`` recurses into its field's own type with this function)."""
    if isinstance(data_type, StructType):
        return StructType(tuple(field_of(f) for f in data_type.fields))
    if isinstance(data_type, ArrayType):
        return ArrayType(map_nested_fields(data_type.element_type, field_of), data_type.contains_null)
    if isinstance(data_type, MapType):
        return MapType(
            map_nested_fields(data_type.key_type, field_of),
            map_nested_fields(data_type.value_type, field_of),
            data_type.value_contains_null,
        )
    return data_type


def protocol_for_schema(protocol: Protocol, schema: StructType) -> Protocol | None:
    """The upgraded protocol a new schema needs, or None when the table's suffices.

    A TIMESTAMP_NTZ column needs the ``timestampNtz`` reader/writer feature; Delta enables it
    automatically when a schema change adds one. The upgrade goes to reader 3 / writer 7 and
    keeps every feature the old (possibly legacy) versions implied.
    """
    if not uses_timestamp_ntz(schema) or (
        TIMESTAMP_NTZ in reader_features(protocol) and TIMESTAMP_NTZ in writer_features(protocol)
    ):
        return None
    readers = set(reader_features(protocol)) | {TIMESTAMP_NTZ}
    writers = set(writer_features(protocol)) | {TIMESTAMP_NTZ}
    return Protocol(3, 7, tuple(sorted(readers)), tuple(sorted(writers)))
