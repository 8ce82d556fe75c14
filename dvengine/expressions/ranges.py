"""Abstract values for skipping: what a column (or literal) may hold across the rows of a file.

A :class:`Range` over-approximates a set of SQL values: an inclusive interval ``[lo, hi]`` (None
meaning unbounded) plus whether NULL and non-NULL values may occur. Soundness rests on one rule:
every real value must lie inside the range; a range may be wider than the truth, never narrower.

Values are compared in a per-Kind domain: numbers as int/float/Decimal, strings as str (Python
code-point order equals Spark's UTF-8 byte order), dates as ``dt.date``, timestamps as integer
microseconds (UTC instants for TIMESTAMP, wall clock for TIMESTAMP_NTZ), booleans as bool.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass
from typing import Any

from dvengine.expressions.kinds import Kind
from dvengine.expressions.literals import Lit, TimestampText, parse_date_text, parse_number_text, parse_timestamp_text

# Spark accepts zone offsets up to +-18:00; a timestamp text without a zone is read in the
# (unknown to us) session time zone, so it stands for any instant within this margin.
ZONE_MARGIN_MICROS = 18 * 3600 * 1_000_000
_TRUE_STRINGS = frozenset({"true", "t", "yes", "y", "1"})
_FALSE_STRINGS = frozenset({"false", "f", "no", "n", "0"})
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Range:
    kind: Kind
    lo: Any = None
    hi: Any = None
    may_null: bool = True
    may_value: bool = True
    integral: bool = False

    @property
    def is_point(self) -> bool:
        return self.may_value and self.lo is not None and self.hi is not None and self.lo == self.hi


TOP = Range(Kind.UNKNOWN)
NULL_ONLY = Range(Kind.NULL, may_null=True, may_value=False)


def point(kind: Kind, value: Any, integral: bool = False) -> Range:
    if isinstance(value, float) and math.isnan(value):
        return Range(kind, may_null=False, integral=integral)  # NaN sorts above everything: no bounds
    return Range(kind, value, value, may_null=False, integral=integral)


def datetime_micros(value: dt.datetime) -> int:
    """Aware datetimes become UTC instants; naive ones wall-clock microseconds."""
    delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def date_micros(value: dt.date) -> int:
    return (value - dt.date(1970, 1, 1)).days * 86_400 * 1_000_000


def typed_point(kind: Kind, value: object, integral: bool = False) -> Range:
    """A Range for one typed Python value (a partition value) in the domain of ``kind``."""
    if value is None:
        return NULL_ONLY
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ) and isinstance(value, dt.datetime):
        if kind == Kind.TIMESTAMP_NTZ and value.tzinfo is not None:
            value = value.replace(tzinfo=None)
        return point(kind, datetime_micros(value))
    if kind == Kind.DATE and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return point(kind, value)
    if kind == Kind.NUMERIC and isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
        return point(kind, value, integral)
    if kind == Kind.STRING and isinstance(value, str):
        return point(kind, value)
    if kind == Kind.BOOLEAN and isinstance(value, bool):
        return point(kind, value)
    return Range(kind, may_null=False)


def _timestamp_range(ts: TimestampText, target: Kind, exact_without_zone: bool) -> Range:
    if target == Kind.TIMESTAMP:
        utc = ts.utc_micros()
        if utc is not None:
            return point(target, utc)
        return Range(target, ts.wall_micros - ZONE_MARGIN_MICROS, ts.wall_micros + ZONE_MARGIN_MICROS, False)
    if ts.offset_seconds is None and exact_without_zone:
        return point(target, ts.wall_micros)
    return Range(target, ts.wall_micros - ZONE_MARGIN_MICROS, ts.wall_micros + ZONE_MARGIN_MICROS, False)


def coerce_literal(lit: Lit, target: Range) -> Range | None:
    """The range a literal denotes when Spark compares it with a value of ``target``'s kind.

    None means "no confident interpretation": the caller must assume any outcome.
    """
    value = lit.value
    if value is None:
        return NULL_ONLY
    kind = target.kind
    if kind == Kind.NUMERIC:
        number: Any = value if lit.kind == Kind.NUMERIC else None
        if lit.kind == Kind.STRING:
            number = parse_number_text(str(value))
        if number is None or isinstance(number, bool):
            return None
        if target.integral and not isinstance(number, int):
            # Spark 3 casts the string to the integral type (truncating), Spark 4 may compare as
            # decimal: cover both.
            if isinstance(number, float) and not math.isfinite(number):
                return None
            return Range(kind, math.floor(number), math.ceil(number), False, True, True)
        return point(kind, number)
    if kind == Kind.STRING:
        return point(kind, value) if lit.kind == Kind.STRING else None
    if kind == Kind.BOOLEAN:
        if lit.kind == Kind.BOOLEAN:
            return point(kind, bool(value))
        if lit.kind == Kind.STRING:
            text = str(value).strip().lower()
            if text in _TRUE_STRINGS or text in _FALSE_STRINGS:
                return point(kind, text in _TRUE_STRINGS)
        return None
    if kind == Kind.DATE:
        if lit.kind == Kind.DATE and isinstance(value, dt.date):
            return point(kind, value)
        if lit.kind == Kind.STRING:
            parsed = parse_date_text(str(value))
            return None if parsed is None else point(kind, parsed)
        return None
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ):
        if isinstance(value, TimestampText):
            return _timestamp_range(value, kind, exact_without_zone=lit.kind == Kind.TIMESTAMP_NTZ)
        if lit.kind == Kind.STRING:
            ts = parse_timestamp_text(str(value))
            return None if ts is None else _timestamp_range(ts, kind, exact_without_zone=True)
        if lit.kind == Kind.DATE and isinstance(value, dt.date):
            return _timestamp_range(TimestampText(date_micros(value), None), kind, exact_without_zone=True)
        return None
    return None


def literal_range(lit: Lit) -> Range | None:
    """A literal compared with another literal: only same-kind simple values are confident."""
    if lit.value is None:
        return NULL_ONLY
    if lit.kind in (Kind.NUMERIC, Kind.STRING, Kind.BOOLEAN, Kind.DATE):
        return point(lit.kind, lit.value)
    return None
