"""Carrying out a nested-value alignment (``commands/struct_cast.py``) on Arrow arrays.

Arrow compute expressions cannot rebuild the structs inside a list or a map element by element,
so the value is computed as it is and then rebuilt here, array by array: structs from their
(flattened) fields in the target's order, lists and maps around their rebuilt children, leaves
cast by the same store-assignment rules as any assigned value (``expressions.arrow_types.store``,
whose refusals :func:`check_alignment` reports before any work as NotLocallyEvaluableError).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.commands.struct_cast import (
    Alignment,
    ArrayAlignment,
    LeafCast,
    MapAlignment,
    StructAlignment,
    leaf_casts,
)
from dvengine.errors import NotLocallyEvaluableError, SchemaViolationError
from dvengine.expressions.arrow import VOID
from dvengine.expressions.arrow_plans import project_table
from dvengine.expressions.arrow_types import Refused, Val, store
from dvengine.protocol.nested_not_null import as_nullable
from dvengine.protocol.schema import DataType, to_arrow_type

_VALUE = "v"


def _loose(target: DataType) -> pa.DataType:
    """The Arrow type values are rebuilt to: the target's, every nullability flag loosened. Arrow
    refuses to cast (even to the same type) an array whose NOT NULL child holds a NULL under a NULL
    struct, which Spark allows; whether the rows break a NOT NULL field is the callers' check
    (``not_null.null_into_not_null``, Delta's rule), which names the field, before the final cast."""
    return to_arrow_type(as_nullable(target))


def _leaf_expression(cast: LeafCast) -> Any:
    if cast.source == VOID:  # an untyped NULL field of a computed struct: NULL of any type, as Spark's cast
        return pc.scalar(pa.scalar(None, to_arrow_type(cast.target)))
    try:
        return store(Val(pc.field(_VALUE), cast.source), cast.target)
    except Refused as exc:
        raise NotLocallyEvaluableError(
            f"storing {cast.source.simple_string()} into {cast.target.simple_string()}: {exc}"
        ) from None


def check_alignment(alignment: Alignment | None) -> None:
    """NotLocallyEvaluableError when some leaf cast of the plan has no exact Arrow form."""
    for cast in leaf_casts(alignment):
        _leaf_expression(cast)


def _compact(values: Any) -> Any:
    """One unsliced array (list and map rebuilding needs offsets that start at 0)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    return values.take(pa.array(np.arange(len(values), dtype=np.int64)))


def align(
    values: Any, alignment: Alignment | None, target: DataType, column: str, current: Any | None = None, operation: str = "MERGE"
) -> pa.Array:
    """``values`` rebuilt to Arrow type ``target`` for column ``column`` (named in errors, with the
    ``operation``); ``current`` is the row's present value of the target column (where the plan
    keeps its fields)."""
    arrow_target = _loose(target)
    values = _compact(values)
    if alignment is None:
        return values.cast(arrow_target)
    if isinstance(alignment, LeafCast):
        try:
            out = project_table(pa.table({_VALUE: values}), [_leaf_expression(alignment)], [_VALUE]).column(0)
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise SchemaViolationError(
                f"{operation} would write a value into column {column!r} that does not fit the nested field's type "
                f"{alignment.target.simple_string()}: {exc}; nothing was written"
            ) from exc
        return _compact(out).cast(arrow_target)
    if isinstance(alignment, StructAlignment):
        return _struct(values, alignment, column, None if current is None else _compact(current), operation)
    if isinstance(alignment, ArrayAlignment):
        element = align(values.values, alignment.element, alignment.target.element_type, column, operation=operation)
        return pa.ListArray.from_arrays(values.offsets, element, type=arrow_target, mask=values.is_null())
    assert isinstance(alignment, MapAlignment)
    keys = align(values.keys, alignment.key, alignment.target.key_type, column, operation=operation)
    items = align(values.items, alignment.value, alignment.target.value_type, column, operation=operation)
    return pa.MapArray.from_arrays(values.offsets, keys, items, type=arrow_target, mask=values.is_null())


def _struct(values: Any, alignment: StructAlignment, column: str, current: Any | None, operation: str) -> pa.Array:
    source_index = {values.type.field(i).name: i for i in range(values.type.num_fields)}
    current_index = {} if current is None else {current.type.field(i).name.lower(): i for i in range(current.type.num_fields)}
    keep = alignment.keep_target_fields and current is not None
    children = []
    for plan in alignment.fields:
        own = current_index.get(plan.target.name.lower()) if keep else None
        own_values = None if own is None else pc.struct_field(current, [own])
        if plan.source_name is not None:
            child = pc.struct_field(values, [source_index[plan.source_name]])  # NULL under a NULL struct
            children.append(align(child, plan.child, plan.target.type, f"{column}.{plan.target.name}", own_values, operation))
        elif own_values is not None:
            children.append(_compact(own_values).cast(_loose(plan.target.type)))
        else:
            children.append(pa.nulls(len(values), _loose(plan.target.type)))
    missing = values.is_null()
    if alignment.null_only_if_target_null and current is not None:
        missing = pc.and_(missing, current.is_null())
    for plan, child in zip(alignment.fields, children):
        if not plan.target.nullable and pc.any(pc.and_(child.is_null(), pc.invert(missing))).as_py():
            raise SchemaViolationError(
                f"{operation} would write NULL into NOT NULL field {column}.{plan.target.name} (Delta's NOT NULL "
                "constraint); nothing was written"
            )
    fields = [pa.field(p.target.name, _loose(p.target.type)) for p in alignment.fields]
    return pa.StructArray.from_arrays(children, fields=fields, mask=missing)
