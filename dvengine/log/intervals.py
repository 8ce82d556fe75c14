"""Parsing Delta's interval table properties (``delta.logRetentionDuration`` ...).

Delta stores durations as Spark calendar-interval strings such as ``interval 30 days``,
``interval 1 week`` or ``168 hours``. Retention must be a fixed length of time, so months and
years (whose length varies) are refused, as Delta does.
"""

from __future__ import annotations

import re

from dvengine.errors import InvalidArgumentError

_UNIT_MS: dict[str, float] = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "ms": 1,
    "second": 1000,
    "sec": 1000,
    "s": 1000,
    "minute": 60_000,
    "min": 60_000,
    "m": 60_000,
    "hour": 3_600_000,
    "h": 3_600_000,
    "day": 86_400_000,
    "d": 86_400_000,
    "week": 7 * 86_400_000,
    "w": 7 * 86_400_000,
}
_VARIABLE_UNITS = ("month", "year")
_PAIR = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)")


def _unit(word: str, text: str) -> float:
    singular = word[:-1] if word.endswith("s") and word[:-1] in _UNIT_MS else word
    if singular in _UNIT_MS:
        return _UNIT_MS[singular]
    if singular.rstrip("s") in _VARIABLE_UNITS:
        raise InvalidArgumentError(
            f"interval {text!r} uses {word}, whose length varies; retention durations must use weeks, days, "
            f"hours, minutes or seconds"
        )
    raise InvalidArgumentError(f"interval {text!r} has unknown unit {word!r}")


def parse_interval_ms(text: str) -> int:
    """Milliseconds of an interval string like 'interval 7 days', 'interval 1 week', '168 hours'."""
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval") :].strip()
    if not body:
        raise InvalidArgumentError(f"interval {text!r} is empty; expected e.g. 'interval 7 days'")
    total = 0.0
    pos = 0
    for match in _PAIR.finditer(body):
        if body[pos : match.start()].strip():
            break
        total += float(match.group(1)) * _unit(match.group(2), text)
        pos = match.end()
    if pos == 0 or body[pos:].strip():
        raise InvalidArgumentError(
            f"cannot parse interval {text!r}; expected '<number> <unit>' pairs, e.g. 'interval 30 days' or '168 hours'"
        )
    if total < 0:
        raise InvalidArgumentError(f"interval {text!r} is negative")
    return int(total)
