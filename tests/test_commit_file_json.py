"""Commit lines decoded through orjson give exactly what the standard library's json gives.

Truth: ``json.loads`` of the same line (what the parser used before orjson). Values are drawn
widely (integers far beyond 64 bits, floats of every magnitude, any unicode text, nesting), and
lines orjson refuses or would decode differently are pinned one by one.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvengine.errors import LogCorruptedError
from dvengine.log.commit_file import _parse_line, parse_actions

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 == 1.0 would hide an int turned float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(), _VALUES, max_size=6), st.booleans())
def test_any_line_decodes_as_json_decodes_it(obj: dict[str, Any], ascii_only: bool) -> None:
    line = json.dumps(obj, ensure_ascii=ascii_only)
    assert _same(_parse_line(line, "x.json", 1), json.loads(line))


@pytest.mark.parametrize(
    "line",
    [
        '{"add": {"size": 123456789012345678901234567890}}',  # orjson: a float
        '{"a": -9223372036854775809}',  # one below int64: orjson gives a float
        '{"a": 18446744073709551615}',
        '{"a": [1, {"b": [18446744073709551616]}]}',  # nested: found wherever it sits
        '{"a": 9.3e18, "b": -1e300, "c": 9223372036854775807}',  # genuine large floats: json again, same values
        '{"dv": "0rr910000000000j1{Tm0rr9X00@S9051sb0096S0096W0096000000000000000000000"}',  # digits in a string
        '{"a": NaN, "b": Infinity, "c": -Infinity}',  # orjson refuses
        '{"a": 1e400}',  # a double's overflow: json gives inf, orjson refuses
        '{"a": "\\ud800"}',  # a lone surrogate: json keeps it, orjson refuses
        '{"a": 1, "a": 2}',  # duplicate keys: the last wins in both
        '{"a": -0.0, "b": 5e-324, "c": 1.7976931348623157e308}',
    ],
)
def test_lines_orjson_refuses_or_reads_differently_decode_as_json_does(line: str) -> None:
    assert _same(_parse_line(line, "x.json", 1), json.loads(line))


def test_broken_lines_still_name_the_file_and_line() -> None:
    data = b'{"commitInfo": {"timestamp": 1}}\n{"add": {"path": "a.parquet", "size": 1\n'
    with pytest.raises(LogCorruptedError, match=r"00000000000000000007\.json line 2 is not valid JSON"):
        parse_actions(data, "_delta_log/00000000000000000007.json")
    with pytest.raises(LogCorruptedError, match="line 1 is not a JSON object"):
        _parse_line("[1, 2]", "x.json", 1)
