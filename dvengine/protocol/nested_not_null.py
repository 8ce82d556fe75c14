"""NOT NULL flags Delta cannot enforce: those inside an array element or a map key / value.

Delta enforces a field's ``nullable: false`` with invariants on top-level columns and on struct
fields reached through structs only; a NULL deep inside an array or a map is never checked. So a
schema change that would record such a flag is refused (DELTA_NESTED_NOT_NULL_CONSTRAINT), or,
with ``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled``, committed with the
flags removed. This module is a port of the walk that decides both, delta-io/delta
``SchemaUtils.removeUnenforceableNotNullConstraints`` over ``SchemaMergingUtils.transformColumns``
and ``SchemaUtils.typeAsNullable``, quirks included:

- only a *struct field* whose type is an array or a map is examined (at any depth, also inside
  array elements and map keys / values); its element / key / value type counts when relaxing it
  changes it;
- relaxing (``typeAsNullable``) a struct makes every flag inside it nullable, at any depth
  (Spark's ``asNullable``); an array element that is an array gets ``containsNull`` true, and its
  struct (if that is its element) made nullable; a map element whose key or value is a struct gets
  those relaxed and ``valueContainsNull`` true; a map of non-structs is left as it is;
- so the array's own ``containsNull`` and the map's own ``valueContainsNull`` never count
  (``a array<int>`` with ``containsNull: false`` is accepted), nor does a map of maps of ints with
  ``valueContainsNull: false`` inside, while ``array<array<int>>`` with the inner
  ``containsNull: false`` and ``array<struct<x: int NOT NULL>>`` are refused.

Top-level and struct-only NOT NULL stay allowed: dvengine enforces them when it writes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType

CONF_ALLOW_UNENFORCED_NOT_NULL = "spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled"


@dataclass(frozen=True)
class NestedNotNull:
    """One unenforceable NOT NULL: the ``nest`` ("element", "key" or "value") type of the array /
    map field at ``parent`` (its path, with ``element`` / ``key`` / ``value`` for the steps
    through collections, as Delta names them) declares one; ``nested`` is that type as written."""

    parent: tuple[str, ...]
    nest: str
    nested: DataType

    @property
    def parent_name(self) -> str:
        """The path as Delta prints it (``UnresolvedAttribute(path).name``: parts holding a dot quoted)."""
        return ".".join(f"`{p}`" if "." in p else p for p in self.parent)


def as_nullable(data_type: DataType) -> DataType:
    """Spark's ``DataType.asNullable``: every nullability flag inside ``data_type`` set to true."""
    if isinstance(data_type, StructType):
        return StructType(tuple(dataclasses.replace(f, type=as_nullable(f.type), nullable=True) for f in data_type.fields))
    if isinstance(data_type, ArrayType):
        return ArrayType(as_nullable(data_type.element_type), True)
    if isinstance(data_type, MapType):
        return MapType(as_nullable(data_type.key_type), as_nullable(data_type.value_type), True)
    return data_type


def _type_as_nullable(data_type: DataType) -> DataType:
    """Delta's ``SchemaUtils.typeAsNullable`` (see the module docstring for what it leaves alone)."""
    if isinstance(data_type, StructType):
        return as_nullable(data_type)
    if isinstance(data_type, ArrayType):
        element = data_type.element_type
        return ArrayType(as_nullable(element) if isinstance(element, StructType) else element, True)
    if isinstance(data_type, MapType):
        key, value = data_type.key_type, data_type.value_type
        if not isinstance(key, StructType) and not isinstance(value, StructType):
            return data_type
        return MapType(
            as_nullable(key) if isinstance(key, StructType) else key,
            as_nullable(value) if isinstance(value, StructType) else value,
            True,
        )
    return data_type


def _relax(path: tuple[str, ...], nest: str, nested: DataType, found: list[NestedNotNull]) -> DataType:
    relaxed = _type_as_nullable(nested)
    if relaxed != nested:
        found.append(NestedNotNull(path, nest, nested))
    return relaxed


def _check_field(path: tuple[str, ...], f: StructField, found: list[NestedNotNull]) -> StructField:
    """``checkField`` of ``removeUnenforceableNotNullConstraints``: an array's element type, a
    map's key then value type, relaxed; each change is one unenforceable NOT NULL."""
    here = (*path, f.name)
    if isinstance(f.type, ArrayType):
        element = _relax(here, "element", f.type.element_type, found)
        return dataclasses.replace(f, type=ArrayType(element, f.type.contains_null))
    if isinstance(f.type, MapType):
        key = _relax(here, "key", f.type.key_type, found)
        value = _relax(here, "value", f.type.value_type, found)
        return dataclasses.replace(f, type=MapType(key, value, f.type.value_contains_null))
    return f


def _transform(path: tuple[str, ...], data_type: DataType, found: list[NestedNotNull]) -> DataType:
    """``SchemaMergingUtils.transformColumns``: every struct field, top-down, the field checked
    first and its (checked) type walked after, with ``element`` / ``key`` / ``value`` path steps."""
    if isinstance(data_type, StructType):
        fields = []
        for f in data_type.fields:
            checked = _check_field(path, f, found)
            fields.append(dataclasses.replace(checked, type=_transform((*path, f.name), checked.type, found)))
        return StructType(tuple(fields))
    if isinstance(data_type, ArrayType):
        return ArrayType(_transform((*path, "element"), data_type.element_type, found), data_type.contains_null)
    if isinstance(data_type, MapType):
        return MapType(
            _transform((*path, "key"), data_type.key_type, found),
            _transform((*path, "value"), data_type.value_type, found),
            data_type.value_contains_null,
        )
    return data_type


def remove_unenforceable_not_nulls(schema: StructType) -> tuple[StructType, list[NestedNotNull]]:
    """``schema`` with the unenforceable NOT NULL flags removed, and each one found, in the order
    Delta meets them (the first is the one its error names)."""
    found: list[NestedNotNull] = []
    relaxed = _transform((), schema, found)
    assert isinstance(relaxed, StructType)
    return relaxed, found


def without_unenforceable_not_nulls(schema: StructType) -> StructType:
    """A schema that comes from data (a write that creates a table or overwrites its schema)
    without its unenforceable NOT NULL flags. Delta never meets them there: ``ImplicitMetadataOperation.
    updateMetadata`` takes the data's ``schema.asNullable`` (and ``removeUnenforceableNotNullConstraints``'
    own comment says data nullability "may be inaccurate"), so a DataFrame write is never refused for
    them. dvengine keeps the data's top-level and struct-only flags (it enforces those, as delta-rs
    keeps them) and drops only these."""
    return remove_unenforceable_not_nulls(schema)[0]
