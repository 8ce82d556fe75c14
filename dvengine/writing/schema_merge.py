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
from dvengine.protocol.mapping_modes import MAX_COLUMN_ID_KEY, MODE_KEY, max_column_id, requested_mode
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

MAPPING_MODE_KEY = MODE_KEY
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
    schema: StructType, configuration: Mapping[str, str], reuse_logical_names: bool = False
) -> tuple[StructType, dict[str, str]]:
    """Give every field lacking one a column id and physical name, as the protocol requires.

    Under ``delta.columnMapping.mode`` ``name`` or ``id`` each field at every nesting level
    carries ``delta.columnMapping.id`` (above ``delta.columnMapping.maxColumnId``, which is
    raised) and ``delta.columnMapping.physicalName`` (``col-<uuid>``, as Delta names them; with
    ``reuse_logical_names`` the field's own name, as Delta's upgrade from mode ``none`` does so
    that files already written keep matching). Without column mapping the schema and
    configuration are returned unchanged.
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
        if PHYSICAL_NAME_KEY not in metadata:
            metadata[PHYSICAL_NAME_KEY] = f.name if reuse_logical_names else f"col-{uuid.uuid4()}"
        return StructField(f.name, map_nested_fields(f.type, field_of), f.nullable, metadata)

    mapped = StructType(tuple(field_of(f) for f in schema.fields))
    config[MAX_COLUMN_ID_KEY] = str(counter[0])
    return mapped, config


def new_table_column_mapping(
    schema: StructType, configuration: Mapping[str, str], previous_max_id: int = 0
) -> tuple[StructType, dict[str, str]]:
    """The schema and configuration a new (or replaced) table is created with.

    Under mode ``name`` or ``id`` every field gets a fresh id and ``col-<uuid>`` physical name
    (any mapping metadata the given schema carries is dropped first: it belongs to another
    table), ids counting up from the configured ``maxColumnId`` or ``previous_max_id`` (a
    replaced table's), whichever is higher, as Delta's ``assignColumnIdAndPhysicalName``; the
    configuration records the new ``maxColumnId``. Mode ``none``: both unchanged.
    """
    if requested_mode(configuration) == "none":
        return schema, dict(configuration)
    start = max(max_column_id(configuration), previous_max_id)
    return assign_column_mapping(strip_column_mapping(schema), {**configuration, MAX_COLUMN_ID_KEY: str(start)})


def has_column_mapping_metadata(schema: StructType) -> bool:
    """Whether any field at any nesting level carries a column id or physical name."""
    found = [False]

    def field_of(f: StructField) -> StructField:
        if FIELD_ID_KEY in f.metadata or PHYSICAL_NAME_KEY in f.metadata:
            found[0] = True
        return StructField(f.name, map_nested_fields(f.type, field_of), f.nullable, f.metadata)

    map_nested_fields(schema, field_of)
    return found[0]


def upgrade_to_name_mapping(
    schema: StructType, configuration: Mapping[str, str], table: str
) -> tuple[StructType, dict[str, str]]:
    """An existing unmapped table's schema and configuration once mode ``name`` is set on it:
    each field (every nesting level) gets an id and its logical name as physical name, so the
    files already written need no rewrite (Delta's upgrade in ``assignColumnIdAndPhysicalName``).

    A schema already carrying mapping metadata is refused, as Delta refuses it
    (DELTA_ENABLING_COLUMN_MAPPING_DISALLOWED_WHEN_COLUMN_MAPPING_METADATA_ALREADY_EXISTS): the
    stale ids or names would not describe the files.
    """
    if has_column_mapping_metadata(schema):
        raise UnsupportedFeatureError(
            "Enabling column mapping when column mapping metadata is already present in schema is not supported "
            "(DELTA_ENABLING_COLUMN_MAPPING_DISALLOWED_WHEN_COLUMN_MAPPING_METADATA_ALREADY_EXISTS); to use column "
            f"mapping, create a new table and reload the data into it. Table {table} was not changed"
        )
    config = {**configuration, MAPPING_MODE_KEY: "name", MAX_COLUMN_ID_KEY: str(max_column_id(configuration))}
    return assign_column_mapping(schema, config, reuse_logical_names=True)


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
