"""Spark's date and time functions as Arrow kernels: the ones Delta allows in generation expressions
and that CHECK constraints commonly use (year ... second, date_format, to_date, date_trunc, trunc,
date_add, datediff, add_months, last_day).

Spark evaluates them in the session time zone; dvengine's Spark sessions run in UTC and Arrow
reads TIMESTAMP columns as ``timestamp[us, tz=UTC]``, so the calendar fields agree. A DATE given
where Spark wants a TIMESTAMP (``hour(d)``, ``date_trunc('HOUR', d)``) is midnight UTC, and a
TIMESTAMP given where it wants a DATE is its UTC date, as Spark's implicit casts do.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.expressions.arrow_types import TEMPORAL, Refused, Val, cast, prim
from dvengine.expressions.arrow_udfs import call_udf, valid, values

_UTC = pa.timestamp("us", tz="UTC")
INT = prim("integer")

# Spark name -> (Arrow kernel, options); each returns int64, Spark returns INT
_FIELDS: dict[str, tuple[str, Any]] = {
    "year": ("year", None),
    "month": ("month", None),
    "day": ("day", None),
    "dayofmonth": ("day", None),
    "quarter": ("quarter", None),
    "dayofyear": ("day_of_year", None),
    "dayofweek": ("day_of_week", pc.DayOfWeekOptions(count_from_zero=False, week_start=7)),  # 1 = Sunday
    "weekday": ("day_of_week", pc.DayOfWeekOptions(count_from_zero=True, week_start=1)),  # 0 = Monday
    "weekofyear": ("iso_week", None),
    "hour": ("hour", None),
    "minute": ("minute", None),
    "second": ("second", None),  # whole seconds, as Spark's second()
}
_TIME_OF_DAY = ("hour", "minute", "second")
# EXTRACT / date_part fields whose result is the INT the function of the same name gives
EXTRACT_FIELDS = {
    "year": "year", "y": "year", "years": "year", "yr": "year", "yrs": "year",
    "quarter": "quarter", "qtr": "quarter",
    "month": "month", "mon": "month", "mons": "month", "months": "month",
    "day": "day", "d": "day", "days": "day",
    "hour": "hour", "h": "hour", "hours": "hour", "hr": "hour", "hrs": "hour",
    "minute": "minute", "m": "minute", "min": "minute", "mins": "minute", "minutes": "minute",
    "doy": "dayofyear", "week": "weekofyear", "w": "weekofyear", "weeks": "weekofyear",
    "dow": "dayofweek",
}


def as_timestamp(v: Val) -> Any:
    if v.name == "date":
        return cast(v, prim("timestamp"))
    if v.name in ("timestamp", "timestamp_ntz"):
        return v.expr
    raise Refused(f"a {v.name or 'NULL'} value where a date or timestamp is expected")


def as_date(v: Val) -> Any:
    if v.name in TEMPORAL:
        return cast(v, prim("date"))
    raise Refused(f"a {v.name or 'NULL'} value where a date is expected")


def field(name: str, v: Val) -> Val:
    """``year(x)`` ... ``second(x)``: INT."""
    kernel, options = _FIELDS[name]
    source = as_timestamp(v) if name in _TIME_OF_DAY else as_date(v)
    return Val(pc.Expression._call(kernel, [source], options).cast(pa.int32()), INT)


_TRUNC_UNITS = {
    "year": "year", "yyyy": "year", "yy": "year",
    "quarter": "quarter",
    "month": "month", "mm": "month", "mon": "month",
    "week": "week",
}
_DATE_TRUNC_UNITS = {
    **_TRUNC_UNITS,
    "day": "day", "dd": "day",
    "hour": "hour", "minute": "minute", "second": "second",
    "millisecond": "millisecond", "microsecond": "microsecond",
}


def _floor(source: Any, unit: str) -> Any:
    options = pc.RoundTemporalOptions(multiple=1, unit=unit, week_starts_monday=True)
    return pc.Expression._call("floor_temporal", [source], options)


def date_trunc(unit: str | None, v: Val) -> Val:
    """``date_trunc(unit, x)``: the TIMESTAMP at the start of the unit (weeks start on Monday); an
    unknown unit or a NULL one gives NULL, as in Spark."""
    if v.name == "timestamp_ntz":
        raise Refused("date_trunc of a TIMESTAMP_NTZ")
    source = as_timestamp(v)
    arrow_unit = _DATE_TRUNC_UNITS.get((unit or "").lower())
    if arrow_unit is None:
        return Val(pc.scalar(pa.scalar(None, _UTC)), prim("timestamp"))
    return Val(_floor(source, arrow_unit), prim("timestamp"))


def trunc(v: Val, unit: str | None) -> Val:
    """``trunc(date, unit)``: the DATE starting the year / quarter / month / week; other units NULL."""
    source = as_date(v)
    arrow_unit = _TRUNC_UNITS.get((unit or "").lower())
    if arrow_unit is None:
        return Val(pc.scalar(pa.scalar(None, pa.date32())), prim("date"))
    return Val(_floor(source, arrow_unit), prim("date"))


def date_add(v: Val, days: Val) -> Val:
    """``date_add(d, n)`` / ``date_sub`` (n negated by the parser): DATE; n must be an integer."""
    if days.name not in ("byte", "short", "integer"):
        raise Refused(f"date_add with a {days.name or 'NULL'} number of days")
    base = as_date(v).cast(pa.int32())
    moved = pc.Expression._call("add_checked", [base, days.expr.cast(pa.int32())])
    return Val(moved.cast(pa.date32()), prim("date"))


def datediff(end: Val, start: Val) -> Val:
    """``datediff(end, start)``: INT days from start to end."""
    a, b = as_date(end).cast(pa.int32()), as_date(start).cast(pa.int32())
    return Val(pc.Expression._call("subtract_checked", [a, b]), INT)


# Spark datetime pattern letters (runs of one letter) -> strftime; anything else is refused
_PATTERN_LETTERS = {
    "yyyy": "%Y", "yy": "%y",
    "MM": "%m", "MMM": "%b", "MMMM": "%B",
    "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S",
    "DDD": "%j",
    "EEE": "%a", "EEEE": "%A", "E": "%a",
}
_RUN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")


def strftime_pattern(pattern: str) -> str:
    """A Spark ``date_format`` pattern as a strftime format, for the common letters (yyyy yy MM MMM
    MMMM dd HH mm ss DDD E EEE EEEE) and quoted or punctuation literals; Refused naming the first
    letter run it does not map (fractions, zones, 12-hour clocks, week-based years ...)."""
    out: list[str] = []
    for match in _RUN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            out.append("'" if token == "''" else token[1:-1].replace("''", "'").replace("%", "%%"))
        elif token[0].isalpha():
            mapped = _PATTERN_LETTERS.get(token)
            if mapped is None:
                raise Refused(f"date_format pattern letters {token!r} are not evaluated in Arrow")
            out.append(mapped)
        else:
            out.append(token.replace("%", "%%"))
    return "".join(out)


def date_format(v: Val, pattern: str | None) -> Val:
    """``date_format(x, pattern)``: STRING in the UTC calendar. The timestamp is floored to whole
    seconds first (Arrow's ``%S`` would print the microseconds). Arrow's strftime costs ~0.6 s per
    million rows on this machine (vs ~20 ms for ``CAST(ts AS DATE)``)."""
    if pattern is None:
        return Val(pc.scalar(pa.scalar(None, pa.string())), prim("string"))
    # the UTC wall clock as a zone-less timestamp: the same values, and Arrow's floor and strftime
    # skip the time-zone conversion (floor 55 -> 5 ms per million rows)
    wall = as_timestamp(v).cast(pa.timestamp("us"))
    seconds = _floor(wall, "second").cast(pa.timestamp("s"))
    options = pc.StrftimeOptions(format=strftime_pattern(pattern), locale="C")
    return Val(pc.Expression._call("strftime", [seconds], options), prim("string"))


def _month_start_days(days: Any) -> Any:
    months = days.astype("datetime64[D]").astype("datetime64[M]")
    return months, months.astype("datetime64[D]").astype(np.int64)


def _add_months_udf(dates_array: pa.Array, months_array: pa.Array) -> pa.Array:
    days = values(dates_array.cast(pa.int32()), np.int64)
    months, start = _month_start_days(days)
    target = months + values(months_array, np.int64).astype("timedelta64[M]")
    first = target.astype("datetime64[D]").astype(np.int64)
    length = (target + np.timedelta64(1, "M")).astype("datetime64[D]").astype(np.int64) - first
    result = first + np.minimum(days - start, length - 1)
    mask = ~(valid(dates_array) & valid(months_array))
    return pa.array(result.astype(np.int32), mask=mask).cast(pa.date32())


def _last_day_udf(dates_array: pa.Array) -> pa.Array:
    months, _ = _month_start_days(values(dates_array.cast(pa.int32()), np.int64))
    result = (months + np.timedelta64(1, "M")).astype("datetime64[D]").astype(np.int64) - 1
    return pa.array(result.astype(np.int32), mask=~valid(dates_array)).cast(pa.date32())


def add_months(v: Val, months: Val) -> Val:
    """``add_months(d, n)``: DATE; the day is kept, or clamped to the end of a shorter month
    (``add_months('2024-01-31', 1)`` is 2024-02-29), as Java's ``LocalDate.plusMonths``. n must be
    a TINYINT / SMALLINT / INT (Spark's ANSI coercion does not narrow a BIGINT)."""
    if months.data_type is None:
        return Val(pc.scalar(pa.scalar(None, pa.date32())), prim("date"))
    if months.name not in ("byte", "short", "integer"):
        raise Refused(f"add_months by a {months.name} number of months")
    return Val(call_udf("add_months", _add_months_udf, [(as_date(v), pa.date32()), (months.expr, pa.int32())], pa.date32()), prim("date"))


def last_day(v: Val) -> Val:
    """``last_day(d)``: the DATE ending d's month."""
    return Val(call_udf("last_day", _last_day_udf, [(as_date(v), pa.date32())], pa.date32()), prim("date"))
