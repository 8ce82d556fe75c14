"""Spark's types for values computed in Arrow: literal typing, common types, CAST and store assignment.

The Arrow evaluator may only compute a value when its result equals what Spark (4.x, ANSI mode,
session time zone UTC, as dvengine's sessions run) gives for every row, or fails where Spark
fails. Types decide much of that: ``year(ts)`` is an INT, ``floor(x)`` a BIGINT, ``a / b`` a
DOUBLE, ``coalesce(int_col, 0L)`` a BIGINT. This module holds those rules; each conversion Spark
performs differently from Arrow (float to string, decimals) is refused here with the reason, and
the command then runs on Spark. Strings are parsed by ``arrow_casts`` (an explicit CAST only: Spark's
store assignment rejects a string into a number column at analysis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.protocol.schema import DataType, PrimitiveType, to_arrow_type

INTEGRAL = ("byte", "short", "integer", "long")
FLOATING = ("float", "double")
NUMERIC_ORDER = (*INTEGRAL, *FLOATING)  # Spark's numeric precedence (decimals are not handled)
TEMPORAL = ("date", "timestamp", "timestamp_ntz")


class Refused(Exception):
    """A construct whose Spark result the Arrow evaluator cannot reproduce; the message says why."""


@dataclass(frozen=True, slots=True)
class Val:
    """An Arrow expression and the Spark type of its value (None: an untyped NULL literal)."""

    expr: Any
    data_type: DataType | None

    @property
    def name(self) -> str:
        return "" if self.data_type is None else self.data_type.name


def prim(name: str) -> PrimitiveType:
    return PrimitiveType(name)


def null_of(data_type: DataType) -> Any:
    return pc.scalar(pa.scalar(None, to_arrow_type(data_type)))


def common_type(values: list[Val], what: str) -> DataType | None:
    """The type Spark gives ``coalesce`` / ``if`` / ``CASE`` branches: equal types, NULLs adapt,
    numbers widen by precedence (INT and DOUBLE give DOUBLE). Other mixes are refused (Spark may
    cast strings or dates there in ways the evaluator does not model)."""
    found: DataType | None = None
    for v in values:
        if v.data_type is None:
            continue
        if found is None or found == v.data_type:
            found = v.data_type
            continue
        a, b = found.name, v.data_type.name
        if a in NUMERIC_ORDER and b in NUMERIC_ORDER:
            found = prim(max(a, b, key=NUMERIC_ORDER.index))
            continue
        raise Refused(f"{what} mixes {a} and {b}")
    return found


def coerce(v: Val, target: DataType | None) -> Any:
    """``v`` as ``target`` where Spark widens implicitly (numbers by precedence, NULL to anything)."""
    if target is None:
        return v.expr
    if v.data_type is None:
        return null_of(target)
    if v.data_type == target:
        return v.expr
    if v.name in NUMERIC_ORDER and target.name in NUMERIC_ORDER:
        return v.expr.cast(to_arrow_type(target), safe=v.name in INTEGRAL and target.name in INTEGRAL)
    raise Refused(f"implicit conversion of {v.name} to {target.name}")


def cast(v: Val, target: DataType) -> Any:
    """Spark's ANSI ``CAST(v AS target)`` where Arrow's cast gives the same value or fails where
    Spark fails (overflow), else Refused."""
    source, to = v.name, target.name
    arrow_target = to_arrow_type(target)
    if v.data_type is None:
        return null_of(target)
    if v.data_type == target:
        return v.expr
    if source in INTEGRAL and to in INTEGRAL:
        return v.expr.cast(arrow_target, safe=True)  # narrowing overflow fails (CAST_OVERFLOW)
    if source in INTEGRAL and to in FLOATING:
        return v.expr.cast(arrow_target, safe=False)  # rounds to nearest, as the JVM does
    if source == "float" and to == "double":
        return v.expr.cast(arrow_target)
    if source == "double" and to == "float":
        return v.expr.cast(arrow_target, safe=False)  # out of range becomes +-Infinity in Spark too
    if source in FLOATING and to in INTEGRAL:
        # ANSI: truncate toward zero; NaN, infinities and out-of-range values fail (Arrow's safe cast
        # fails on exactly those once the fraction is gone)
        return pc.Expression._call("trunc", [v.expr]).cast(arrow_target, safe=True)
    if source == "boolean" and (to in INTEGRAL or to in FLOATING):
        return v.expr.cast(arrow_target)
    if source in NUMERIC_ORDER and to == "boolean":
        return v.expr.cast(arrow_target)  # non-zero is true (NaN too, in both)
    if to == "string" and (source in INTEGRAL or source in ("boolean", "date", "string")):
        # integers, true/false and yyyy-MM-dd print the same in both (years 0-9999)
        return v.expr.cast(arrow_target)
    if source in ("timestamp", "timestamp_ntz") and to == "date":
        return v.expr.cast(arrow_target)  # the UTC (session) calendar date; pre-1970 floors correctly
    if source == "date" and to in ("timestamp", "timestamp_ntz"):
        return v.expr.cast(arrow_target)  # midnight (UTC for TIMESTAMP)
    if {source, to} == {"timestamp", "timestamp_ntz"}:
        return v.expr.cast(arrow_target)  # same micros: the session time zone is UTC
    raise Refused(f"CAST from {source or 'NULL'} to {to} is not evaluated in Arrow (Spark's conversion differs)")


def store(v: Val, target: DataType) -> Any:
    """``v`` stored into a column of type ``target`` under Spark's ANSI store assignment: numbers
    widen or narrow with an overflow check, dates and timestamps convert, any handled type becomes
    a string; floating point into an integer column and strings into other types are refused (Spark
    rejects the latter at analysis)."""
    if v.data_type is None or v.data_type == target:
        return cast(v, target)
    source, to = v.name, target.name
    if source in FLOATING and to in INTEGRAL:
        raise Refused(f"storing a {source} value into a {to} column")
    if source == "string" and to != "string":
        raise Refused(f"storing a string value into a {to} column")
    if source == "boolean" and to != "string":
        raise Refused(f"storing a boolean value into a {to} column")
    return cast(v, target)
