"""Literal values in a sqlglot tree, and Spark's rules for reading strings as other types.

Every consumer (type checker, partition pruning, stats skipping, Arrow translation) must agree
on what a literal means, e.g. that ``1.5`` is an exact decimal, ``1.5e3`` a double, ``1L`` a
long, and that ``'2024-01-01'`` may stand for a date. Those rules live here only.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass

from sqlglot import exp

from dvengine.errors import InvalidPredicateError
from dvengine.expressions.kinds import Kind

_INT_RE = re.compile(r"^[+-]?\d+$")
_NUMBER_RE = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_SPECIAL_FLOATS = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})
_DATE_RE = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*$")
_DATE_PREFIX_RE = re.compile(r"^\s*\d{4}(-\d{1,2}){0,2}")
_TIMESTAMP_RE = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{2}:?\d{2})?\s*$"
)
_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class TimestampText:
    """A parsed timestamp string: wall-clock microseconds since 1970-01-01 and its zone offset.

    ``offset_seconds`` is None when the text names no zone; Spark then reads it in the session
    time zone, which the core does not know, so consumers must treat it as a range of instants.
    """

    wall_micros: int
    offset_seconds: int | None

    def utc_micros(self) -> int | None:
        return None if self.offset_seconds is None else self.wall_micros - self.offset_seconds * 1_000_000


@dataclass(frozen=True, slots=True)
class Lit:
    """A literal: its family and Python value (None for SQL NULL).

    Values: int / float / Decimal for numbers, str, bool, dt.date, TimestampText for timestamps,
    bytes for binary.
    """

    kind: Kind
    value: object


def parse_number_text(text: str) -> int | float | decimal.Decimal | None:
    """A string Spark could cast to a number, or None when it could not."""
    stripped = text.strip()
    if stripped.lower() in _SPECIAL_FLOATS:
        return float(stripped.lower().replace("infinity", "inf"))
    if not _NUMBER_RE.match(stripped):
        return None
    if _INT_RE.match(stripped):
        return int(stripped)
    return decimal.Decimal(stripped)


def parse_date_text(text: str) -> dt.date | None:
    """A plain ``yyyy-mm-dd`` date string; anything fancier returns None (treated as unknown)."""
    match = _DATE_RE.match(text)
    if not match:
        return None
    try:
        return dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def parse_timestamp_text(text: str) -> TimestampText | None:
    """Spark's common timestamp spellings; None when not recognised (consumers treat as unknown)."""
    match = _TIMESTAMP_RE.match(text)
    if not match:
        return None
    year, month, day, hour, minute, second, frac, zone = match.groups()
    try:
        wall = dt.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0))
    except ValueError:
        return None
    micros = int((frac or "0")[:6].ljust(6, "0"))
    delta = wall - _EPOCH
    wall_micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + micros
    offset: int | None = None
    if zone in ("Z", "UTC"):
        offset = 0
    elif zone:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return TimestampText(wall_micros, offset)


def looks_like_date_or_timestamp(text: str) -> bool:
    """Loose check used to reject obviously wrong strings compared with dates/timestamps."""
    return bool(_DATE_PREFIX_RE.match(text))


def kind_of_sqlglot_type(data_type: exp.DataType) -> Kind:
    """Family of a CAST target type."""
    t = exp.DataType.Type
    this = data_type.this
    if this in (t.DATE, t.DATE32):
        return Kind.DATE
    if this in (t.TIMESTAMP, t.TIMESTAMPTZ, t.TIMESTAMPLTZ):
        return Kind.TIMESTAMP
    if this == t.TIMESTAMPNTZ:
        return Kind.TIMESTAMP_NTZ
    if this in exp.DataType.NUMERIC_TYPES:
        return Kind.NUMERIC
    if this in exp.DataType.TEXT_TYPES:
        return Kind.STRING
    if this == t.BOOLEAN:
        return Kind.BOOLEAN
    if this in (t.BINARY, t.VARBINARY):
        return Kind.BINARY
    if this in (t.ARRAY, t.MAP, t.STRUCT):
        return Kind.COMPLEX
    return Kind.UNKNOWN


def _number_literal(text: str) -> int | float | decimal.Decimal:
    """The value of a numeric token; the tokenizer also accepts malformed ones such as ``0E``."""
    try:
        if _INT_RE.match(text):
            return int(text)
        if "e" in text.lower():
            return float(text)
        return decimal.Decimal(text)
    except (ValueError, decimal.InvalidOperation):
        raise InvalidPredicateError(f"{text!r} is not a valid number literal") from None


def _cast_literal(inner: Lit, target: Kind, data_type: exp.DataType) -> Lit | None:
    value = inner.value
    if value is None:
        return Lit(target, None)
    if target == Kind.NUMERIC:
        number = value if inner.kind == Kind.NUMERIC else parse_number_text(str(value))
        if number is None or isinstance(number, bool):
            return None
        name = data_type.this
        if name in exp.DataType.INTEGER_TYPES and not isinstance(number, int):
            return None
        if name in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
            return Lit(Kind.NUMERIC, float(number))  # type: ignore[arg-type]
        if name == exp.DataType.Type.DECIMAL:
            return Lit(Kind.NUMERIC, decimal.Decimal(str(number)))
        return Lit(Kind.NUMERIC, number)
    if inner.kind != Kind.STRING:
        return None
    text = str(value)
    if target == Kind.DATE:
        date = parse_date_text(text)
        return None if date is None else Lit(Kind.DATE, date)
    if target in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ):
        ts = parse_timestamp_text(text)
        return None if ts is None else Lit(target, ts)
    if target == Kind.STRING:
        return Lit(Kind.STRING, text)
    return None


def literal_of(node: exp.Expr) -> Lit | None:
    """The literal a node denotes, or None when it is not a (possibly cast or negated) literal."""
    if isinstance(node, exp.Paren):
        return literal_of(node.this)
    if isinstance(node, exp.Null):
        return Lit(Kind.NULL, None)
    if isinstance(node, exp.Boolean):
        return Lit(Kind.BOOLEAN, bool(node.this))
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Lit(Kind.STRING, str(node.this))
        return Lit(Kind.NUMERIC, _number_literal(str(node.this)))
    if isinstance(node, exp.Neg):
        inner = literal_of(node.this)
        if inner is not None and inner.kind == Kind.NUMERIC and inner.value is not None:
            return Lit(Kind.NUMERIC, -inner.value)  # type: ignore[operator]
        return None
    if isinstance(node, (exp.Cast, exp.TryCast)):
        inner = literal_of(node.this)
        to = node.args.get("to")
        if inner is None or not isinstance(to, exp.DataType):
            return None
        return _cast_literal(inner, kind_of_sqlglot_type(to), to)
    return None
