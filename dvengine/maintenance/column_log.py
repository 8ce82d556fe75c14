"""How Delta's column operations (ADD / DROP / RENAME / CHANGE COLUMN) describe a column in
``operationParameters``, shared by every ALTER TABLE path that commits one of them.

Delta (``DeltaOperations.scala``) names a column by ``UnresolvedAttribute(path).name`` (the parts
joined by dots, a part holding a dot in backquotes) and describes a field with
``structFieldToMap``: ``{"name": <that full path>, "type": dataType.typeName, "nullable",
"metadata"}``, which the operation then encodes with ``JsonUtils.toJson``. ``ChangeColumn`` logs
``"column" -> JsonUtils.toJson(structFieldToMap(columnPath, newColumn))`` plus ``position`` when the
statement moved the column; the field is the table's (DeltaCatalog takes it from the snapshot's
schema, metadata included) with the statement's change applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.protocol.schema import DataType, StructField


def column_path_name(path: Sequence[str]) -> str:
    """A column path as Spark's ``UnresolvedAttribute.name`` shows it: a name holding a dot in backquotes."""
    return ".".join(f"`{name}`" if "." in name else name for name in path)


def type_name(data_type: DataType) -> str:
    """Spark's ``DataType.typeName``: the JSON name of an atomic type (``decimal(10,2)`` included),
    ``struct`` / ``array`` / ``map`` otherwise."""
    raw = data_type.to_json()
    return raw if isinstance(raw, str) else data_type.name


def field_description(path: Sequence[str], field: StructField) -> dict[str, Any]:
    """Delta's ``structFieldToMap(colPath, field)``; ``path`` ends with the field's own name."""
    return {
        "name": column_path_name(path),
        "type": type_name(field.type),
        "nullable": field.nullable,
        "metadata": dict(field.metadata),
    }


def change_column_parameters(path: Sequence[str], field: StructField, position: str | None = None) -> dict[str, ParameterValue]:
    """operationParameters of Delta's ``ChangeColumn`` (operation ``CHANGE COLUMN``): ``column`` is the
    compact JSON of :func:`field_description`; ``position`` (``FIRST`` / ``AFTER c``) only when given."""
    params: dict[str, ParameterValue] = {"column": delta_json(field_description(path, field))}
    if position is not None:
        params["position"] = position
    return params
