"""How a nested value (struct, or structs inside arrays and maps) is stored into a column of
another nested type, as Delta's MERGE and UPDATE do it (``UpdateExpressionsSupport.castIfNeeded``,
for UPDATE without schema evolution: :func:`update_alignment`).

Spark's own CAST matches struct fields by position; Delta's MERGE matches them by name
(``resolveMergeUpdateStructsByName``, on by default), case-insensitively, at every level, through
array elements and map keys / values. Every field of the value must exist in the target type
(else ``SchemaMismatchError``: Delta's DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION). Without schema
evolution the two structs must also have as many fields; with it a target field the value lacks
is filled:

- with NULL (INSERT, and an explicit assignment ``set={"s": "s.s"}``: Delta's ``NULLIFY``);
- by ``UPDATE SET *`` with the row's current value of that field (Delta's ``PRESERVE``, on by
  default since Delta 4.1: ``merge.preserveNullSourceStructs.updateStar``). Only directly
  nested structs keep values: inside arrays and maps target-only fields are NULL, as in Delta.

A NULL struct stays NULL (``merge.preserveNullSourceStructs``, on by default); under PRESERVE,
when the target has fields the value lacks, the result is NULL only when the row's current
struct is NULL too (otherwise its own fields survive), as Delta's ``maybeWrapWithNullPreservation``.

This module only decides (pure, engine-neutral); each executor carries the plan out on its data
(``engine/local/struct_align.py``, ``engine/spark/struct_align.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from dvengine.commands.merge_clauses import BoundClause, ClauseAction
from dvengine.errors import SchemaMismatchError
from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType, holds_struct


@dataclass(frozen=True)
class LeafCast:
    """A non-nested value (or a value of another kind) cast to the target type as any assignment is."""

    source: DataType
    target: DataType


@dataclass(frozen=True)
class StructFieldPlan:
    """One target field: taken from the value's field ``source_name`` (aligned by ``child``, None
    when the types agree), or, when ``source_name`` is None, filled (NULL, or the row's own value)."""

    target: StructField
    source_name: str | None
    child: Alignment | None


@dataclass(frozen=True)
class StructAlignment:
    """A struct rebuilt in the target's field order. ``keep_target_fields``: fields the value
    lacks come from the row's current struct (PRESERVE); ``null_only_if_target_null``: a NULL
    value gives NULL only when the row's current struct is NULL too."""

    target: StructType
    fields: tuple[StructFieldPlan, ...]
    keep_target_fields: bool
    null_only_if_target_null: bool


@dataclass(frozen=True)
class ArrayAlignment:
    target: ArrayType
    element: Alignment


@dataclass(frozen=True)
class MapAlignment:
    target: MapType
    key: Alignment | None
    value: Alignment | None


Alignment: TypeAlias = LeafCast | StructAlignment | ArrayAlignment | MapAlignment


def same_shape(a: DataType, b: DataType) -> bool:
    """Equal types, field names spelled alike, ignoring nullability and field metadata."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and same_shape(x.type, y.type) for x, y in zip(a.fields, b.fields)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return same_shape(a.element_type, b.element_type)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return same_shape(a.key_type, b.key_type) and same_shape(a.value_type, b.value_type)
    if isinstance(a, (StructType, ArrayType, MapType)) or isinstance(b, (StructType, ArrayType, MapType)):
        return False
    return a == b


def _has_target_only_fields(source: StructType, target: StructType) -> bool:
    """Delta's ``hasExtraStructFieldsToPreserveValue``: the target has a field the source lacks,
    at this level or in a directly nested struct (not inside arrays or maps)."""
    for t in target.fields:
        s = source.find(t.name)
        if s is None:
            return True
        if isinstance(s.type, StructType) and isinstance(t.type, StructType) and _has_target_only_fields(s.type, t.type):
            return True
    return False


def plan_alignment(
    source: DataType, target: DataType, column: str, allow_missing: bool, preserve: bool = False
) -> Alignment | None:
    """How a value of type ``source`` goes into ``target`` (None: it already has the target's shape).

    ``column`` names the target column in errors; ``allow_missing`` is schema evolution (target
    fields the value lacks are filled); ``preserve`` is UPDATE SET * (fill from the row's value).
    """
    if same_shape(source, target):
        return None
    if isinstance(source, StructType) and isinstance(target, StructType):
        return _plan_struct(source, target, column, allow_missing, preserve)
    if isinstance(source, ArrayType) and isinstance(target, ArrayType) and holds_struct(target.element_type):
        element = plan_alignment(source.element_type, target.element_type, column, allow_missing)
        return None if element is None else ArrayAlignment(target, element)
    if isinstance(source, MapType) and isinstance(target, MapType) and holds_struct(target):
        key = plan_alignment(source.key_type, target.key_type, column, allow_missing)
        value = plan_alignment(source.value_type, target.value_type, column, allow_missing)
        return MapAlignment(target, key, value)
    return LeafCast(source, target)


def _plan_struct(source: StructType, target: StructType, column: str, allow_missing: bool, preserve: bool) -> StructAlignment:
    unknown = [f.name for f in source.fields if target.find(f.name) is None]
    lacking = [f.name for f in target.fields if source.find(f.name) is None]  # also catches a duplicated name
    if unknown or ((lacking or len(source.fields) != len(target.fields)) and not allow_missing):
        raise SchemaMismatchError(
            f"cannot write {source.simple_string()} into column {column!r} of type {target.simple_string()}: struct "
            f"fields are matched by field name and all nested fields must match (Delta's "
            f"DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION)"
            + (f"; the target has no field {unknown}" if unknown else "")
            + (f"; the value has no field {lacking}" if lacking and not unknown else "")
            + ("" if unknown or allow_missing else "; enable schema evolution (MERGE only) to add or NULL fields")
            + "; nothing was written"
        )
    fields = []
    for t in target.fields:
        s = source.find(t.name)
        child = None if s is None else plan_alignment(s.type, t.type, column, allow_missing, preserve)
        fields.append(StructFieldPlan(t, None if s is None else s.name, child))
    return StructAlignment(
        target, tuple(fields), preserve, preserve and _has_target_only_fields(source, target)
    )


def value_alignment(
    value_type: DataType | None, column: StructField, allow_missing: bool = False, preserve: bool = False
) -> Alignment | None:
    """How a value of ``value_type`` (its type as the executor bound or analyzed it, whatever the
    expression: a column, ``named_struct``, ``IF`` / ``CASE``, ``array``, ``map``...; None for an
    untyped NULL) is stored into ``column``: by field name at every depth, as Delta's
    ``castIfNeeded`` under ``resolveMergeUpdateStructsByName`` (on by default). ``allow_missing``
    and ``preserve`` as in :func:`plan_alignment`. A value whose struct fields differ from the
    column's by more than order (and, with ``allow_missing``, by more than fields it lacks) raises
    SchemaMismatchError naming the column. None: nothing to rebuild (not a struct-holding column,
    or already its shape)."""
    if value_type is None or not holds_struct(column.type):
        return None
    return plan_alignment(value_type, column.type, column.name, allow_missing, preserve)


def update_alignment(value_type: DataType | None, column: StructField) -> Alignment | None:
    """How UPDATE stores a value of ``value_type`` into ``column`` (:func:`value_alignment`).
    UPDATE has no schema evolution: fields must match by name, in any order."""
    return value_alignment(value_type, column)


def leaf_casts(alignment: Alignment | None) -> list[LeafCast]:
    """Every leaf cast inside a plan, so an executor can check up front that it can do them all."""
    if alignment is None:
        return []
    if isinstance(alignment, LeafCast):
        return [alignment]
    if isinstance(alignment, StructAlignment):
        return [c for f in alignment.fields for c in leaf_casts(f.child)]
    if isinstance(alignment, ArrayAlignment):
        return leaf_casts(alignment.element)
    return leaf_casts(alignment.key) + leaf_casts(alignment.value)


def keeps_target_fields(clause: BoundClause, evolution: bool) -> bool:
    """UPDATE SET * under schema evolution: Delta's PRESERVE (fields the source lacks keep the row's values)."""
    return evolution and clause.star and clause.action is ClauseAction.UPDATE


def assignment_alignment(
    clause: BoundClause, target: StructField, evolution: bool, value_type: DataType | None
) -> Alignment | None:
    """How a MERGE clause's value of ``value_type`` (as the executor typed it; any expression, not
    only a plain column) goes into the column ``target`` (:func:`value_alignment`): as UPDATE's,
    except that under schema evolution target fields the value lacks are filled (NULL, or under
    UPDATE SET * the row's own values: :func:`keeps_target_fields`). SchemaMismatchError naming
    the column when Delta would refuse the value."""
    return value_alignment(value_type, target, evolution, keeps_target_fields(clause, evolution))
