"""Carrying out a nested-value alignment (``commands/struct_cast.py``) as Spark Columns.

Spark's CAST matches struct fields by position, so a struct value whose fields differ from the
target column's (order, case, fields missing or added by schema evolution) is rebuilt by name
first: ``named_struct`` of its fields in the target's order, ``transform`` over array elements,
``transform_keys`` / ``transform_values`` over maps. Leaf type differences are left to the command's
usual cast of the whole value to the column type (MERGE's and UPDATE's), which after this matches
fields by position correctly.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from dvengine.commands.struct_cast import Alignment, ArrayAlignment, LeafCast, MapAlignment, StructAlignment
from dvengine.engine.spark.reader import logical_spark_type


def align_column(value: Column, alignment: Alignment | None, current: Column | None = None) -> Column:
    """``value`` rebuilt by ``alignment``; ``current`` is the row's present value of the target
    column (fields the plan keeps come from it)."""
    if alignment is None or isinstance(alignment, LeafCast):
        return value
    if isinstance(alignment, StructAlignment):
        return _struct(value, alignment, current)
    if isinstance(alignment, ArrayAlignment):
        element = alignment.element
        return F.transform(value, lambda e: align_column(e, element))
    assert isinstance(alignment, MapAlignment)
    out = value
    key, item = alignment.key, alignment.value
    if key is not None:
        out = F.transform_keys(out, lambda k, _: align_column(k, key))
    if item is not None:
        out = F.transform_values(out, lambda _, v: align_column(v, item))
    return out


def _struct(value: Column, alignment: StructAlignment, current: Column | None) -> Column:
    keep = alignment.keep_target_fields and current is not None
    missing = value.isNull()
    if alignment.null_only_if_target_null and current is not None:
        missing = missing & current.isNull()
    parts = []
    for plan in alignment.fields:
        own = current.getField(plan.target.name) if keep and current is not None else None
        if plan.source_name is not None:
            part = align_column(value.getField(plan.source_name), plan.child, own)
        elif own is not None:
            part = own
        else:
            part = F.lit(None).cast(logical_spark_type(plan.target))
        if not plan.target.nullable:  # Delta's NOT NULL check on struct fields, as the task fails
            message = f"a struct value would write NULL into NOT NULL field {plan.target.name!r}; nothing was written"
            part = F.when(~missing & part.isNull(), F.raise_error(F.lit(message))).otherwise(part)
        parts.append(part.alias(plan.target.name))
    return F.when(missing, F.lit(None)).otherwise(F.struct(*parts))
