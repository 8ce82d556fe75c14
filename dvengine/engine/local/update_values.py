"""UPDATE's (and MERGE's) assigned values in Arrow, with struct values stored into their column by field *name*.

Delta's UPDATE casts a value into a struct-holding column by name at every depth (structs in
structs, in array elements and map values: ``castIfNeeded`` with
``resolveMergeUpdateStructsByName``), where a plain cast, Spark's or Arrow's, goes by position. So a
value for such a column is computed as it is (``to_pyarrow_typed``, which also gives its type), the
engine-neutral plan (``commands.struct_cast.update_alignment``, which refuses other field sets with
SchemaMismatchError) says how to rebuild it, and after the projection ``struct_align.align`` rebuilds
the computed arrays (Arrow compute expressions cannot rebuild structs inside lists and maps).

A value the typed evaluator cannot compute is tried as any other value (``to_pyarrow_value``, which
takes a struct only when it already has the column's fields in order, so it cannot mismatch
fields); failing that the command is not local and runs on Spark, which plans the same alignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.commands.struct_cast import Alignment, update_alignment
from dvengine.engine.local.struct_align import align, check_alignment
from dvengine.errors import InvalidPredicateError, SchemaViolationError
from dvengine.expressions import BoundExpression, to_pyarrow_typed, to_pyarrow_value
from dvengine.expressions.arrow_plans import project_table
from dvengine.protocol.schema import DataType, StructField, holds_struct


@dataclass(frozen=True)
class AssignedValue:
    """The Arrow expression of one assignment; when ``rebuild``, its result is the value as it is,
    to be rebuilt into the column's type by ``alignment`` after the projection."""

    expression: Any
    alignment: Alignment | None
    rebuild: bool


def assigned_value(
    value: BoundExpression,
    target: StructField,
    rename: Mapping[str, str] | None = None,
    plan: Callable[[DataType], Alignment | None] | None = None,
) -> AssignedValue:
    """How the local executor computes ``value`` for column ``target`` (``rename``: the columns'
    names in the Arrow table, as ``to_pyarrow_value``). ``plan`` makes the alignment from the
    value's type: UPDATE's (``update_alignment``) by default; MERGE passes its own (schema evolution
    fills fields, ``commands.struct_cast.assignment_alignment``). SchemaMismatchError when Delta
    would refuse the value's struct fields; InvalidPredicateError when it cannot be computed
    exactly here."""
    if holds_struct(target.type):
        try:
            typed = to_pyarrow_typed(value, rename)
            if typed.data_type is not None:  # an untyped NULL is stored as any NULL
                alignment = update_alignment(typed.data_type, target) if plan is None else plan(typed.data_type)
                check_alignment(alignment)
                return AssignedValue(typed.expr, alignment, True)
        except InvalidPredicateError:
            pass  # perhaps a value the column-typed evaluator stores exactly (a decimal literal field, ...)
    return AssignedValue(to_pyarrow_value(value, target.type, rename), None, False)


def project_assignments(
    rows: pa.Table, fields: Sequence[StructField], assignments: Mapping[str, BoundExpression]
) -> pa.Table:
    """``rows`` projected to ``fields``: assigned ones computed (and rebuilt), the others kept.
    Arrow's errors (a value that does not fit) propagate; the caller names the column."""
    planned = {f.name: assigned_value(assignments[f.name], f) for f in fields if f.name in assignments}
    expressions = [planned[f.name].expression if f.name in planned else pc.field(f.name) for f in fields]
    projected = project_table(rows, expressions, [f.name for f in fields])
    for index, f in enumerate(fields):
        plan = planned.get(f.name)
        if plan is not None and plan.rebuild and plan.alignment is not None:  # else already the column's shape
            try:
                rebuilt = align(projected.column(index), plan.alignment, f.type, f.name, operation="UPDATE")
            except SchemaViolationError as exc:
                cause = exc.__cause__
                if isinstance(cause, (pa.ArrowInvalid, ArithmeticError)):
                    raise cause from None  # a field value that does not fit: named by the caller, as any value
                raise
            projected = projected.set_column(index, pa.field(f.name, rebuilt.type), rebuilt)
    return projected
