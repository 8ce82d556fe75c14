"""Delta's ``typeWidening`` table feature: which column type changes a table may take, and how
they are recorded (PROTOCOL.md "Type Widening"; delta-spark ``TypeWidening.scala``,
``TypeWideningMetadata.scala``).

A table *supports* the feature when ``typeWidening`` (or the preview name
``typeWidening-preview``) is in its reader and writer features; it is *enabled* when the property
``delta.enableTypeWidening`` is also ``true``. Only an enabled table may widen a column; every
widening is recorded in the ``delta.typeChanges`` list of the nearest enclosing struct field
(``fieldPath`` ``element`` / ``key`` / ``value`` for arrays and maps) and kept for as long as
older files may still hold the narrower type. Readers cast such files' values up to the table
type on read (the Arrow reader's per-column cast, Spark's Parquet reader).

Two sets of changes, as Delta has them:
- :func:`is_type_change_supported` (the protocol's list; ALTER TABLE ... CHANGE COLUMN TYPE):
  byte -> short -> int -> long, float -> double, byte/short/int -> double, date -> timestamp_ntz,
  decimal(p, s) -> decimal(p + k1, s + k2) with k1 >= k2 >= 0, byte/short/int -> decimal(10 + k1, k2),
  long -> decimal(20 + k1, k2).
- :func:`is_supported_for_schema_evolution` (what ``mergeSchema`` and MERGE schema evolution widen
  to on their own, Delta's ``same_family_type`` default): the integer chain, float -> double,
  decimal -> wider decimal and date -> timestamp_ntz; integer -> double / decimal only by ALTER.

Pure functions: nothing is read or written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dvengine.errors import ProtocolError, SchemaError, UnsupportedFeatureError
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.feature_catalog import with_feature
from dvengine.protocol.features import reader_features, writer_features
from dvengine.protocol.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    parse_data_type,
)

TYPE_WIDENING = "typeWidening"
TYPE_WIDENING_PREVIEW = "typeWidening-preview"
ENABLE_TYPE_WIDENING = "delta.enableTypeWidening"
TYPE_CHANGES_KEY = "delta.typeChanges"

_INTEGRAL_SIZE = {"byte": 1, "short": 2, "integer": 4, "long": 8}
# Digits an integral type needs as a decimal(p, 0): the narrowest decimal it widens to.
_INTEGRAL_DECIMAL_PRECISION = {"byte": 10, "short": 10, "integer": 10, "long": 20}


def is_supported(protocol: Protocol) -> bool:
    """Whether the protocol supports the feature (the stable or the preview name, reader and writer)."""
    return any(
        name in writer_features(protocol) and name in reader_features(protocol)
        for name in (TYPE_WIDENING, TYPE_WIDENING_PREVIEW)
    )


def property_enabled(configuration: Mapping[str, str]) -> bool:
    return configuration.get(ENABLE_TYPE_WIDENING, "false").lower() == "true"


def is_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether columns may be widened: the property on a table supporting the feature.

    The property without the feature is a broken table (Delta raises too): ProtocolError.
    """
    if not property_enabled(metadata.configuration):
        return False
    if not is_supported(protocol):
        raise ProtocolError(
            f"table property {ENABLE_TYPE_WIDENING}=true is set but the protocol does not support the "
            f"{TYPE_WIDENING!r} table feature"
        )
    return True


def protocol_for(protocol: Protocol, configuration: Mapping[str, str]) -> Protocol:
    """``protocol`` with the feature when the configuration enables type widening (as Delta adds it)."""
    if not property_enabled(configuration) or is_supported(protocol):
        return protocol
    return with_feature(protocol, TYPE_WIDENING)


def _decimal_of_integral(name: str) -> DecimalType | None:
    precision = _INTEGRAL_DECIMAL_PRECISION.get(name)
    return None if precision is None else DecimalType(precision, 0)


def _decimal_wider(to: DecimalType, frm: DecimalType) -> bool:
    """Spark's ``DecimalType.isWiderThan``: ``to`` holds every value of ``frm`` exactly."""
    return to.precision - to.scale >= frm.precision - frm.scale and to.scale >= frm.scale


def is_type_change_supported(frm: DataType, to: DataType) -> bool:
    """Whether an atomic type may be widened from ``frm`` to ``to`` (the protocol's list)."""
    if frm == to:
        return True
    if isinstance(frm, DecimalType) and isinstance(to, DecimalType):
        return _decimal_wider(to, frm)
    if isinstance(to, DecimalType):
        integral = _decimal_of_integral(frm.name)
        return integral is not None and _decimal_wider(to, integral)
    if frm.name in _INTEGRAL_SIZE and to.name in _INTEGRAL_SIZE:
        return _INTEGRAL_SIZE[frm.name] <= _INTEGRAL_SIZE[to.name]
    return (frm.name, to.name) in (
        ("float", "double"),
        ("date", "timestamp_ntz"),
        ("byte", "double"),
        ("short", "double"),
        ("integer", "double"),
    )


def is_supported_for_schema_evolution(frm: DataType, to: DataType) -> bool:
    """The subset schema evolution applies by itself (Delta's default ``same_family_type``)."""
    if not is_type_change_supported(frm, to):
        return False
    if isinstance(to, DecimalType):
        return isinstance(frm, DecimalType)
    return not (frm.name in _INTEGRAL_SIZE and to.name == "double")


def _atomic(data_type: DataType) -> bool:
    return not isinstance(data_type, (StructType, ArrayType, MapType))


def widened_type(table: DataType, data: DataType) -> DataType | None:
    """The type an enabled table's atomic column takes when data of type ``data`` is merged in,
    or None when schema evolution does not widen it (equal types, narrower data, other changes)."""
    if _atomic(table) and _atomic(data) and table != data and is_supported_for_schema_evolution(table, data):
        return data
    return None


def _type_changes(old: DataType, new: DataType, path: str) -> list[dict[str, str]]:
    """The atomic changes between ``old`` and ``new`` below one struct field (not inside nested
    structs, whose own fields carry their changes), with their ``fieldPath``."""

    def sub(p: str, name: str) -> str:
        return name if not p else f"{p}.{name}"

    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _type_changes(old.element_type, new.element_type, sub(path, "element"))
    if isinstance(old, MapType) and isinstance(new, MapType):
        return _type_changes(old.key_type, new.key_type, sub(path, "key")) + _type_changes(
            old.value_type, new.value_type, sub(path, "value")
        )
    if not (_atomic(old) and _atomic(new)) or old == new:
        return []
    change = {"fromType": str(old.to_json()), "toType": str(new.to_json())}
    if path:
        change["fieldPath"] = path
    return [change]


def with_type_change(field: StructField, new_type: DataType) -> StructField:
    """``field`` retyped to ``new_type``, its ``delta.typeChanges`` extended by every atomic change
    (existing entries kept, as writers must preserve them)."""
    changes = _type_changes(field.type, new_type, "")
    if not changes:
        return dataclasses.replace(field, type=new_type)
    history = list(field.metadata.get(TYPE_CHANGES_KEY) or [])
    return StructField(field.name, new_type, field.nullable, {**field.metadata, TYPE_CHANGES_KEY: history + changes})


def record_type_changes(old: StructType, new: StructType) -> StructType:
    """``new`` with the widenings from ``old`` recorded in the fields' metadata (matched by name,
    case-insensitively, at every struct level); fields only ``new`` has are left as they are."""
    before = {f.name.lower(): f for f in old.fields}
    fields: list[StructField] = []
    for f in new.fields:
        prior = before.get(f.name.lower())
        if prior is None:
            fields.append(f)
            continue
        nested = _record_nested(prior.type, f.type)
        changes = _type_changes(prior.type, nested, "")
        if changes:
            history = list(f.metadata.get(TYPE_CHANGES_KEY) or [])
            f = StructField(f.name, nested, f.nullable, {**f.metadata, TYPE_CHANGES_KEY: history + changes})
        else:
            f = dataclasses.replace(f, type=nested)
        fields.append(f)
    return StructType(tuple(fields))


def _record_nested(old: DataType, new: DataType) -> DataType:
    if isinstance(old, StructType) and isinstance(new, StructType):
        return record_type_changes(old, new)
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(_record_nested(old.element_type, new.element_type), new.contains_null)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return MapType(
            _record_nested(old.key_type, new.key_type),
            _record_nested(old.value_type, new.value_type),
            new.value_contains_null,
        )
    return new


def all_type_changes(schema: StructType, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every recorded change of the schema as (column path, change), nested fields included."""
    out: list[tuple[str, dict[str, Any]]] = []
    for f in schema.fields:
        path = prefix + f.name
        out.extend((path, dict(change)) for change in f.metadata.get(TYPE_CHANGES_KEY) or [])
        pending: list[DataType] = [f.type]
        while pending:
            node = pending.pop()
            if isinstance(node, StructType):
                out.extend(all_type_changes(node, path + "."))
            elif isinstance(node, ArrayType):
                pending.append(node.element_type)
            elif isinstance(node, MapType):
                pending.extend((node.key_type, node.value_type))
    return out


# Spark DDL names a reader may meet in fromType/toType (Delta parses them with DataType.fromDDL).
_DDL_ALIASES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte", "real": "float"}


def _parse_ddl(raw: Any) -> DataType:
    text = str(raw).strip().lower()
    return parse_data_type(_DDL_ALIASES.get(text, text))


def check_type_changes_readable(schema: StructType) -> None:
    """Reader requirement: every recorded change must be one the protocol allows (else a typed
    error naming the column and both types), so files of the older type can be cast up."""
    for path, change in all_type_changes(schema):
        try:
            frm, to = _parse_ddl(change["fromType"]), _parse_ddl(change["toType"])
        except (KeyError, TypeError, ValueError, SchemaError) as exc:
            raise ProtocolError(f"column {path!r} has an unreadable {TYPE_CHANGES_KEY} entry {change!r}") from exc
        if not is_type_change_supported(frm, to):
            where = path + ("." + change["fieldPath"] if change.get("fieldPath") else "")
            raise UnsupportedFeatureError(
                f"column {where!r} went through the type change {frm.simple_string()} -> {to.simple_string()}, "
                f"which the {TYPE_WIDENING} feature does not allow; dvengine cannot read its older files"
            )
