"""Column mapping: the logical names users see versus the physical names stored in files.

Under column mapping (``delta.columnMapping.mode`` = ``name`` or ``id``) Parquet columns,
``add.partitionValues`` keys and ``add.stats`` keys all use the *physical* name recorded in the
field metadata (``delta.columnMapping.physicalName``), so that renames never rewrite data.
With mode ``none`` physical == logical even if stale mapping metadata is present.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dvengine.errors import ProtocolError, UnsupportedFeatureError
from dvengine.protocol.actions import Metadata
from dvengine.protocol.schema import ArrayType, DataType, MapType, StructType

MODE_KEY = "delta.columnMapping.mode"
MODES = ("none", "name", "id")


def column_mapping_mode(metadata_or_config: Metadata | Mapping[str, str]) -> str:
    """The table's mapping mode, validated: 'none', 'name' or 'id'."""
    config = metadata_or_config.configuration if isinstance(metadata_or_config, Metadata) else metadata_or_config
    mode = config.get(MODE_KEY, "none").strip().lower()
    if mode not in MODES:
        raise UnsupportedFeatureError(
            f"table property {MODE_KEY}={config.get(MODE_KEY)!r} is not a column mapping mode dvengine knows; "
            f"expected one of {MODES}"
        )
    return mode


def logical_to_physical(schema: StructType, mode: str = "name") -> dict[str, str]:
    """Top-level logical column name -> physical name (identity when mode is 'none')."""
    if mode == "none":
        return {f.name: f.name for f in schema.fields}
    return {f.name: f.physical_name for f in schema.fields}


def physical_to_logical(schema: StructType, mode: str = "name") -> dict[str, str]:
    """Top-level physical column name -> logical name (identity when mode is 'none')."""
    return {physical: logical for logical, physical in logical_to_physical(schema, mode).items()}


def _struct_of(data_type: DataType) -> StructType | None:
    while isinstance(data_type, (ArrayType, MapType)):
        data_type = data_type.element_type if isinstance(data_type, ArrayType) else data_type.value_type
    return data_type if isinstance(data_type, StructType) else None


def physical_column_path(schema: StructType, logical_path: Sequence[str], mode: str = "name") -> tuple[str, ...]:
    """Physical path of a (possibly nested) column, e.g. for stats lookups of ``a.b``.

    Names are resolved case-insensitively like Spark; ProtocolError if a segment is unknown.
    """
    out: list[str] = []
    current: StructType | None = schema
    for segment in logical_path:
        if current is None:
            raise ProtocolError(f"column path {'.'.join(logical_path)!r} goes inside a non-struct column")
        found = current.find(segment)
        if found is None:
            raise ProtocolError(f"column {segment!r} of path {'.'.join(logical_path)!r} is not in the table schema")
        out.append(found.name if mode == "none" else found.physical_name)
        current = _struct_of(found.type)
    return tuple(out)
