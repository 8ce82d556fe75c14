"""``CAST(string AS ...)`` with Spark 4's ANSI rules, batch-wise: to BYTE / SHORT / INT / BIGINT,
FLOAT / DOUBLE, BOOLEAN, DATE and TIMESTAMP / TIMESTAMP_NTZ.

What Spark accepts (checked against Spark itself in tests/test_expressions_arrow_casts.py):

- every target first trims ASCII control characters, spaces and DEL (``' 12 '`` and ``'\\t12\\n'``
  are 12; FLOAT / DOUBLE keep DEL); non-ASCII spaces are not trimmed;
- integers: ``[+-]digits`` only (``'1.7'``, ``'1e3'``, ``''`` fail) and in the type's range;
- FLOAT / DOUBLE: Java's ``parseDouble`` / ``parseFloat`` grammar (``'1.5e3'``, ``'.5'``, ``'1d'``,
  ``'1f'``), plus ``inf`` / ``infinity`` / ``nan`` in any case; Java's hexadecimal floats fail the row as
  not evaluated here; the decimal-to-binary conversion is Arrow's (correctly rounded, as Java's);
- BOOLEAN: t / true / y / yes / 1 and f / false / n / no / 0, in any case;
- DATE: ``[+-]yyyy[y..]``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d`` optionally followed by ``' '`` or ``'T'``
  and anything; an impossible date (Feb 30) fails;
- TIMESTAMP: the date forms, then ``[ T]h:m[:s[.fraction]]`` and an optional ``Z`` / ``UTC`` /
  ``+hh[:mm]`` zone; a zone-less text is in the session zone, UTC (TIMESTAMP_NTZ ignores no zone: it
  refuses one). Other forms Spark knows (time-only texts, which take today's date; region zone ids)
  fail the row as not evaluated here rather than risk a different answer.

A value Spark rejects fails with ``[CAST_INVALID_INPUT]`` naming the value and the types, as Spark's
message does; the caller adds the expression and column.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.expressions.arrow_types import INTEGRAL, Refused, Val, null_of, prim
from dvengine.expressions.arrow_udfs import call_udf, invalid, valid
from dvengine.protocol.schema import DataType, to_arrow_type

# Characters Spark trims before parsing (measured: every ASCII control character, space and DEL;
# the floating-point parser, Java's String.trim, keeps DEL)
_TRIM = "".join(chr(c) for c in range(33)) + "\x7f"
_TRIM_FLOAT = "".join(chr(c) for c in range(33))
_SQL_NAME = {
    "byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT", "float": "FLOAT",
    "double": "DOUBLE", "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ",
}
_RANGE = {"byte": 2**7, "short": 2**15, "integer": 2**31, "long": 2**63}
_TRUE = ["t", "true", "y", "yes", "1"]
_FALSE = ["f", "false", "n", "no", "0"]
_SPECIAL = {"inf": np.inf, "+inf": np.inf, "-inf": -np.inf, "infinity": np.inf, "+infinity": np.inf,
            "-infinity": -np.inf, "nan": np.nan, "+nan": np.nan, "-nan": np.nan}
_FLOAT_RE = r"^[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)$"
_HEX_FLOAT_RE = r"^[+-]?0[xX]"
_DATE = r"(?P<sign>[+-]?)(?P<y>[0-9]{4,7})(?:-(?P<m>[0-9]{1,2})(?:-(?P<d>[0-9]{1,2})"
_DATE_RE = "(?s)^" + _DATE + r"(?:[ T].*)?)?)?$"
_TS_RE = (
    "^" + _DATE + r"(?:[ T](?:(?P<H>[0-9]{1,2}):(?P<M>[0-9]{1,2})(?::(?P<S>[0-9]{1,2})(?:\.(?P<f>[0-9]{0,9}))?)?)?)?)?)?"
    r"(?P<z>Z|UTC|[+-][0-9]{1,2}(?::?[0-9]{2})?)?$"
)


def _malformed(text: str, target: str) -> pa.ArrowInvalid:
    return invalid(
        "CAST_INVALID_INPUT",
        f"The value '{text}' of the type \"STRING\" cannot be cast to \"{_SQL_NAME[target]}\" because it is malformed.",
    )


def _first_bad(array: pa.Array, bad: np.ndarray[Any, Any]) -> str:
    return str(array[int(np.nonzero(bad)[0][0])].as_py())


def _trimmed(array: pa.Array, characters: str = _TRIM) -> pa.Array:
    return pc.utf8_trim(array, characters=characters)


def _matches(array: pa.Array, pattern: str) -> np.ndarray[Any, Any]:
    return np.asarray(pc.fill_null(pc.match_substring_regex(array, pattern), False).to_numpy(zero_copy_only=False), dtype=bool)


def _to_integral(target: str) -> Any:
    def run(array: pa.Array) -> pa.Array:
        text = _trimmed(array)
        present = valid(array)
        good = _matches(text, r"^[+-]?[0-9]+$")
        bad = present & ~good
        digits = pc.replace_substring_regex(pc.if_else(pa.array(good), text, "0"), r"^\+", "")
        long_text = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(digits), 18), False).to_numpy(zero_copy_only=False), dtype=bool)
        numbers = np.array(pc.cast(pc.if_else(pa.array(long_text), "0", digits), pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
        limit = _RANGE[target]
        if long_text.any():  # 19 digits and more: exact Python integers for the range check
            for i in np.nonzero(long_text)[0]:
                value = int(str(digits[int(i)].as_py()))
                if -limit <= value < limit:
                    numbers[i] = value
                else:
                    bad[i] = True
        bad |= present & good & ((numbers < -limit) | (numbers >= limit))
        if bad.any():
            raise _malformed(_first_bad(array, bad), target)
        return pa.array(numbers, mask=~present).cast(to_arrow_type(prim(target)))

    return run


def _to_floating(target: str) -> Any:
    def run(array: pa.Array) -> pa.Array:
        text = _trimmed(array, _TRIM_FLOAT)
        present = valid(array)
        lower = pc.utf8_lower(text)
        special = np.asarray(pc.fill_null(pc.is_in(lower, value_set=pa.array(list(_SPECIAL))), False).to_numpy(zero_copy_only=False), dtype=bool)
        good = _matches(text, _FLOAT_RE) | special
        hexadecimal = present & ~good & _matches(text, _HEX_FLOAT_RE)
        if hexadecimal.any():
            raise invalid("UNSUPPORTED_IN_ARROW", f"the value '{_first_bad(array, hexadecimal)}' is a hexadecimal float: "
                          "CAST to floating point of it is not evaluated in Arrow; run this command on Spark")
        bad = present & ~good
        if bad.any():
            raise _malformed(_first_bad(array, bad), target)
        plain = pc.replace_substring_regex(pc.replace_substring_regex(text, r"[fFdD]$", ""), r"^\+", "")
        usable = pa.array(good & ~special & ~_matches(text, r"^[+-]?(?:NaN|Infinity)$"))
        arrow_type = pa.float32() if target == "float" else pa.float64()
        parsed = pc.cast(pc.if_else(usable, plain, "0"), arrow_type).to_numpy(zero_copy_only=False).astype(np.float64)
        lowered = lower.to_pylist()
        for i in np.nonzero(present & ~np.asarray(usable))[0]:
            word = str(lowered[int(i)]).lstrip("+")
            parsed[i] = np.nan if "nan" in word else (-np.inf if word.startswith("-") else np.inf)
        return pa.array(parsed, mask=~present).cast(arrow_type)

    return run


def _to_boolean(array: pa.Array) -> pa.Array:
    lower = pc.utf8_lower(_trimmed(array))
    yes = pc.is_in(lower, value_set=pa.array(_TRUE))
    no = pc.is_in(lower, value_set=pa.array(_FALSE))
    bad = valid(array) & ~np.asarray(pc.or_(yes, no).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    if bad.any():
        raise _malformed(_first_bad(array, bad), "boolean")
    return pc.if_else(pc.is_valid(array), yes, pa.scalar(None, pa.bool_()))


def _field(parts: pa.StructArray, name: str, default: int) -> np.ndarray[Any, Any]:
    column = pc.struct_field(parts, name)  # NULL where the row did not match
    filled = pc.if_else(pc.equal(pc.fill_null(column, ""), ""), str(default), column)
    return np.asarray(pc.cast(filled, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _days(parts: pa.StructArray, ok: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(days since 1970-01-01, valid date) of the regex groups ``sign y m d`` of rows ``ok``."""
    sign = np.where(np.asarray(pc.fill_null(pc.equal(pc.struct_field(parts, "sign"), "-"), False).to_numpy(zero_copy_only=False), dtype=bool), -1, 1)
    year = sign * _field(parts, "y", 1970)
    month = _field(parts, "m", 1)
    day = _field(parts, "d", 1)
    possible = ok & (month >= 1) & (month <= 12) & (day >= 1)
    months = np.where(possible, (year - 1970) * 12 + month - 1, 0).astype("datetime64[M]")
    first = months.astype("datetime64[D]")
    length = ((months + 1).astype("datetime64[D]") - first).astype(np.int64)
    possible &= day <= length
    return (first.astype(np.int64) + day - 1), possible


def _to_date(array: pa.Array) -> pa.Array:
    text = _trimmed(array)
    present = valid(array)
    shaped = _matches(text, _DATE_RE)
    parts = pc.extract_regex(pc.if_else(pa.array(shaped), text, "1970"), _DATE_RE)
    days, possible = _days(parts, shaped)
    bad = present & ~possible
    if bad.any():
        raise _malformed(_first_bad(array, bad), "date")
    return pa.array(np.where(possible, days, 0).astype(np.int32), mask=~present).cast(pa.date32())


def _to_timestamp(target: str) -> Any:
    def run(array: pa.Array) -> pa.Array:
        text = _trimmed(array)
        present = valid(array)
        shaped = _matches(text, _TS_RE)
        other = present & ~shaped & _matches(text, r"^(?:T?[0-9]{1,2}:|.*[0-9]{2}:[0-9]{2}.*[A-Za-z]{2,}|.*[A-Za-z]+/[A-Za-z_]+)")
        if other.any():
            raise invalid("UNSUPPORTED_IN_ARROW", f"the value '{_first_bad(array, other)}' has a time-only or zone-id form: "
                          f"CAST to {_SQL_NAME[target]} of it is not evaluated in Arrow; run this command on Spark")
        parts = pc.extract_regex(pc.if_else(pa.array(shaped), text, "1970"), _TS_RE)
        days, possible = _days(parts, shaped)
        hour, minute, second = _field(parts, "H", 0), _field(parts, "M", 0), _field(parts, "S", 0)
        fraction = pc.utf8_slice_codeunits(pc.binary_join_element_wise(pc.fill_null(pc.struct_field(parts, "f"), ""), "000000", ""), 0, 6)
        micros = np.asarray(pc.cast(fraction, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
        possible &= (hour <= 23) & (minute <= 59) & (second <= 59)
        zone = pc.struct_field(parts, "z")
        offset = _zone_seconds(zone)
        zoned = present & np.asarray(pc.fill_null(pc.not_equal(zone, ""), False).to_numpy(zero_copy_only=False), dtype=bool)
        if target == "timestamp_ntz" and zoned.any():
            raise invalid("UNSUPPORTED_IN_ARROW", f"the value '{_first_bad(array, zoned)}' carries a zone: "
                          "CAST to TIMESTAMP_NTZ of it is not evaluated in Arrow; run this command on Spark")
        possible &= np.abs(offset) <= 18 * 3600
        bad = present & ~possible
        if bad.any():
            raise _malformed(_first_bad(array, bad), target)
        total = ((days * 86400 + hour * 3600 + minute * 60 + second - offset) * 1_000_000 + micros)
        return pa.array(np.where(possible, total, 0), mask=~present).cast(to_arrow_type(prim(target)))

    return run


def _zone_seconds(zone: pa.Array) -> np.ndarray[Any, Any]:
    """Offsets of ``Z`` / ``UTC`` / ``+h`` / ``+hh`` / ``+hh:mm`` / ``+hhmm`` (empty: 0, the UTC session)."""
    out = np.zeros(len(zone), dtype=np.int64)
    named = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(zone), 0), False).to_numpy(zero_copy_only=False), dtype=bool)
    for i in np.nonzero(named)[0]:  # only rows that carry a zone
        z = str(zone[int(i)].as_py())
        if z in ("Z", "UTC"):
            continue
        sign = -1 if z[0] == "-" else 1
        body = z[1:].replace(":", "")
        hours, minutes = (int(body), 0) if len(body) <= 2 else (int(body[:-2]), int(body[-2:]))
        out[i] = sign * (hours * 3600 + minutes * 60) if minutes < 60 else 10**9
    return out


def from_string(v: Val, target: DataType) -> Any:
    """``CAST(v AS target)`` for a STRING ``v``; Refused for targets not handled (DECIMAL, BINARY ...)."""
    to = target.name
    if to in INTEGRAL:
        fn, name = _to_integral(to), f"cast_string_{to}"
    elif to in ("float", "double"):
        fn, name = _to_floating(to), f"cast_string_{to}"
    elif to == "boolean":
        fn, name = _to_boolean, "cast_string_boolean"
    elif to == "date":
        fn, name = _to_date, "cast_string_date"
    elif to in ("timestamp", "timestamp_ntz"):
        fn, name = _to_timestamp(to), f"cast_string_{to}"
    else:
        raise Refused(f"CAST from string to {to} is not evaluated in Arrow")
    return call_udf(name, fn, [(v.expr, pa.string())], to_arrow_type(target))


# --- to_date / to_timestamp with a pattern ------------------------------------------------------

# Spark (java.time) pattern letters read here -> (regex group, digits): a doubled letter is a fixed
# width, a single one 1 or more digits (java.time's appendValue(field)); yyyy exactly 4 digits
# (more need a sign in java.time's strict parsing, which is not read here)
_PATTERN_FIELDS = {
    "yyyy": ("y", "[0-9]{4}"),
    "MM": ("m", "[0-9]{2}"), "M": ("m", "[0-9]{1,9}"),
    "dd": ("d", "[0-9]{2}"), "d": ("d", "[0-9]{1,9}"),
    "HH": ("H", "[0-9]{2}"), "H": ("H", "[0-9]{1,9}"),
    "mm": ("M", "[0-9]{2}"), "m": ("M", "[0-9]{1,9}"),
    "ss": ("S", "[0-9]{2}"), "s": ("S", "[0-9]{1,9}"),
}
_PATTERN_RUN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")


def pattern_regex(pattern: str, with_time: bool) -> str:
    """A Spark datetime pattern as an anchored RE2 regex with groups ``sign y m d H M S f z``;
    Refused naming the first letters not read here (text months, 12-hour clocks, fractions, zones
    ...), a field given twice, or two adjacent fields of which one has a variable width."""
    parts = ["^(?P<sign>)"]
    seen: set[str] = set()
    previous_variable: bool | None = None  # None: the previous token was not a field
    for match in _PATTERN_RUN.finditer(pattern):
        token = match.group(0)
        if token[0].isalpha():
            field = _PATTERN_FIELDS.get(token)
            if field is None or (field[0] in "HMS" and not with_time):
                raise Refused(f"datetime pattern letters {token!r} are not parsed in Arrow")
            name, digits = field
            if name in seen:
                raise Refused(f"datetime pattern field {token!r} given twice")
            variable = len(token) == 1
            if previous_variable is not None and (variable or previous_variable):
                raise Refused(f"datetime pattern {pattern!r}: adjacent fields of variable width")
            seen.add(name)
            parts.append(f"(?P<{name}>{digits})")
            previous_variable = variable
            continue
        text = token[1:-1].replace("''", "'") if token.startswith("'") else token
        if token == "''":
            text = "'"
        parts.append("".join(f"\\x{{{ord(c):x}}}" for c in text))
        previous_variable = None if text else previous_variable
    for name in "ymdHMS":
        if name not in seen:
            parts.append(f"(?P<{name}>)")
    parts.append("(?P<f>)(?P<z>)$")
    return "".join(parts)


def _cannot_parse(text: str) -> pa.ArrowInvalid:
    return invalid("CANNOT_PARSE_TIMESTAMP", f"Text '{text}' could not be parsed.")


_EPOCH_TEXT = ""


def _parse_with(regex: str, target: str) -> Any:
    def run(array: pa.Array) -> pa.Array:
        present = valid(array)
        shaped = _matches(array, regex)
        parts = pc.extract_regex(pc.if_else(pa.array(shaped), array, _EPOCH_TEXT), regex)
        days, possible = _days(parts, shaped)
        hour, minute, second = _field(parts, "H", 0), _field(parts, "M", 0), _field(parts, "S", 0)
        possible &= (hour <= 23) & (minute <= 59) & (second <= 59)
        bad = present & ~possible
        if bad.any():
            raise _cannot_parse(_first_bad(array, bad))
        if target == "date":
            return pa.array(np.where(possible, days, 0).astype(np.int32), mask=~present).cast(pa.date32())
        total = (days * 86400 + hour * 3600 + minute * 60 + second) * 1_000_000
        return pa.array(np.where(possible, total, 0), mask=~present).cast(pa.timestamp("us", tz="UTC"))

    return run


def parse_with_pattern(v: Val, pattern: str, target: str) -> Val:
    """``to_date(s, pattern)`` (DATE) / ``to_timestamp(s, pattern)`` (TIMESTAMP, UTC session) of a
    STRING: the whole text must match (no trimming); an impossible date or time fails with
    ``[CANNOT_PARSE_TIMESTAMP]``, as Spark in ANSI mode; missing fields default to 1970-01-01 00:00."""
    if v.data_type is None:
        return Val(null_of(prim(target)), prim(target))
    if v.name != "string":
        raise Refused(f"to_{target} of a {v.name} value with a pattern")
    regex = pattern_regex(pattern, with_time=True)  # to_date reads the time too (and checks it)
    out_type = pa.date32() if target == "date" else pa.timestamp("us", tz="UTC")
    name = f"parse_{target}_{pattern.encode().hex()}"
    return Val(call_udf(name, _parse_with(regex, target), [(v.expr, pa.string())], out_type), prim(target))
