"""Functions the Arrow evaluator computes with numpy routines or Spark-specific rules, against Spark.

Truth: Spark 4 (ANSI mode, session time zone UTC) evaluating the same expression text over the same
rows, read from one Parquet file (every expression in one query), as in
test_expressions_arrow_functions. Two kinds of rows: hand-picked edge cases (NULL, negative, .5
ties in decimal but not in binary, -0.0, NaN, infinities, the integer range ends, empty and
non-ASCII strings, Feb 29, whitespace and control characters around parsed text) and seeded random
samples (thousands of rows: decimal ties for rounding, strings of every length for the hashes,
dates and month offsets, numbers printed in the forms Spark parses). Values and Spark's result
types must both match; the rows Spark fails on must fail here too, with Spark's error class and
the value in the message.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from test_expressions_arrow_functions import _compare, _evaluate, _write

from dvengine.errors import InvalidPredicateError
from dvengine.expressions import parse_value_expression
from dvengine.expressions.arrow import _ValueTranslator
from dvengine.expressions.spark_sql import to_spark_sql
from dvengine.protocol.schema import from_arrow_schema

UTC = dt.UTC
N = 14


def _col(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    return pa.array(values + [None] * (N - len(values)), arrow_type)


EDGE = pa.table({
    "id": pa.array(range(N), pa.int64()),
    "x": _col([2.5, -2.5, 1.005, 0.125, -0.4, 1234.5, 1e300, float("nan"), float("inf"), -0.0, 2.675,
               5e-324, -1.5e-7, 0.285], pa.float64()),
    "f": _col([2.5, -2.5, 1.005, 0.125, -0.4, 1234.5, 3e38, float("nan"), float("-inf"), -0.0, 2.675, 1e-45, None],
              pa.float32()),
    "i": _col([1, -7, None, 3, 0, 2**31 - 1, -(2**31), 25, 12, -1, 30], pa.int32()),
    "l": _col([10, -3, 5, None, -(2**63), 2**63 - 1, 0, 7], pa.int64()),
    "s": _col(["abc", "", "h\u00e9llo w\u00f6rld!", "\U0001f600 emoji", "x" * 40, "abcd", "abcde", "ab", None,
               "\u00e9-x\u00c9", "  pad  "], pa.string()),
    "d": _col([dt.date(2024, 1, 31), dt.date(2024, 2, 29), dt.date(1969, 12, 31), dt.date(1900, 3, 1),
               dt.date(2023, 12, 31), dt.date(2000, 2, 29), None, dt.date(100, 1, 1), dt.date(9998, 11, 30)], pa.date32()),
    "ts": _col([dt.datetime(2024, 1, 31, 23, 59, 59, 999999, UTC), dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC), None,
                dt.datetime(2024, 5, 10, 10, 0, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    "b": _col([True, False, None, True], pa.bool_()),
    # regular expression subjects: line terminators Java's '.' skips, a vertical tab (Java's \\s), non-ASCII
    "r": _col(["a1b2", "line\n", "x\ry", "x\u2028y", "", "aaab", "foo.bar", "tab\tsep", "v\x0bt", "\u00c4\u00d6x9",
               None, "abc123def", "x\u0085y", "\U0001f600z7"], pa.string()),
    # texts Spark's ANSI casts accept
    "si": _col([" 12 ", "\t-7\n", "+5", "00012", "2147483647", "-2147483648", "0", "-0", "\x0112\x7f", None], pa.string()),
    "sl": _col(["9223372036854775807", "-9223372036854775808", " 42 ", "+0", None], pa.string()),
    "sd": _col([" 1.5e3 ", "inf", "-Infinity", "NaN", "nan", "1d", "1f", ".5", "5.", "+1.5", "1e400", "-0", "1E-400",
                "0.1"], pa.string()),
    "sb": _col([" true ", "Y", "1", "no", "F", "yes", "0", "t", "FALSE", None], pa.string()),
    "sdt": _col([" 2024-1-5 ", "2024", "2024-02", "2024-02-29T10:00", "2024-02-03 garbage", "0001-01-01",
                 "9999-12-31", "\t2000-2-9\n", "2024-12-31 ", None], pa.string()),
    "p1": _col(["2024-01-05", "1900-02-28", "2000-02-29", "0100-12-31", None], pa.string()),
    "p2": _col(["05/01/2024", "29/02/2024", None], pa.string()),
    "p3": _col(["2024-1-5T1:2:3", "2024-12-31T23:59:59", "1969-12-31T0:0:0", "2024-01-05T10:00:09"], pa.string()),
    "sts": _col(["2024-02-03 10:11:12.5", "2024-02-03T10:11", "2024-02-03 10:11:12+02:00", "2024-02-03 10:11:12Z",
                 "2024-02-03", "2024-02-03 1:2:3", "2024-02-03 10:11:12.1234567", "2024-02-03T23:59:59.999999-05:30",
                 "1969-12-31 23:59:59.5", "2024", "2024-3", " 2024-02-03 10:11:12 ", None], pa.string()),
})

VALUES = [
    # rounding of floating point (HALF_UP through the decimal text; HALF_EVEN for bround)
    "round(x)", "round(x, 2)", "round(x, 1)", "round(x, -2)", "round(x, 3)", "bround(x)", "bround(x, 2)",
    "bround(x, -1)", "round(f, 2)", "bround(f, 1)", "round(f)", "round(x, 400)", "round(x, -400)",
    # NaN-aware greatest / least, NULLs skipped, the first of equal values kept
    "greatest(x, 1.0E0)", "least(x, 1.0E0)", "greatest(x, f, i)", "least(x, CAST(NULL AS DOUBLE), f)",
    "greatest(-x, x)", "least(CAST('NaN' AS DOUBLE), x)",
    "sqrt(x)", "sqrt(i)", "sqrt(l)",
    # logarithms and exp as StrictMath (fdlibm) computes them; NULL for arguments <= 0
    "ln(x)", "log(x)", "log(2.0E0, x)", "log2(x)", "log10(x)", "exp(x)", "ln(i)", "log(i, l)", "log10(l)", "exp(f)",
    # hashes
    "hash(s)", "hash(i)", "hash(l)", "hash(x)", "hash(f)", "hash(d)", "hash(ts)", "hash(b)", "hash(s, i, x, NULL, d)",
    "hash(NULL)", "xxhash64(s)", "xxhash64(i)", "xxhash64(l)", "xxhash64(x)", "xxhash64(f)", "xxhash64(d, ts, b)",
    "xxhash64(s, l)", "crc32(s)", "md5(s)", "sha1(s)", "sha(s)", "sha2(s, 256)", "sha2(s, 0)", "sha2(s, 224)",
    "sha2(s, 384)", "sha2(s, 512)", "sha2(s, 100)",
    # dates
    "add_months(d, 1)", "add_months(d, -1)", "add_months(d, 12)", "add_months(d, -12)", "add_months(ts, 1)",
    "last_day(d)", "last_day(ts)",
    # padding
    "lpad(s, 6, 'xy')", "lpad(s, 3, 'x')", "lpad(s, 5)", "lpad(s, 0, 'x')", "lpad(s, -1, 'x')", "lpad(s, 5, '')",
    "rpad(s, 6, 'xy')", "rpad(s, 2)", "rpad(s, 8, '\u00e9\U0001f600')", "lpad(s, 8, '\u00e9\U0001f600')",
    "lpad(s, NULL, 'x')", "rpad(s, 4, NULL)",
    # regular expressions (Java's semantics on RE2)
    "r rlike '[0-9]+'", "r rlike '^a'", "r rlike 'x.y'", "r rlike '\\\\s'", "r rlike '^\\\\S+'", "r rlike '[\\\\s]'",
    "regexp_like(r, 'a{2,}')", "r rlike '\\\\d\\\\w'", "r rlike '.'", "r rlike ''", "r rlike 'a|^\\\\z'",
    "regexp_replace(r, '[0-9]', '#')", "regexp_replace(r, '(a)(b)?', '<$1|$2>')", "regexp_replace(r, '\\\\.', '\\\\$')",
    "regexp_replace(r, '.', '_')", "regexp_replace(r, '[^a-z]+?', '')", "regexp_replace(r, 'a', NULL)",
    "regexp_extract(r, '([a-z]+)([0-9]+)', 2)", "regexp_extract(r, '([a-z]+)([0-9]+)', 0)", "regexp_extract(r, '(x)|(y)', 2)",
    "regexp_extract(r, '[^a-z]+', 0)", "regexp_extract(r, '((a)|b)+', 2)", "regexp_extract(r, '(?:x)(.)', 1)",
    # parsing with a pattern, and the pattern as written (sqlglot would turn 'y' into 'yyyy')
    "to_date(p1, 'yyyy-MM-dd')", "to_timestamp(p1, 'yyyy-MM-dd')", "to_date(p2, 'dd/MM/yyyy')",
    "to_timestamp(p3, \"yyyy-M-d'T'H:m:s\")", "to_date(p3, \"yyyy-M-d'T'H:m:s\")", "to_date(sdt)",
    "date_format(sts, 'yyyy-MM-dd HH:mm')", "date_format(d, \"yyyy'%Y'MM\")", "to_date(p1, NULL)",
    # units as Spark reads them: unknown abbreviations give NULL (sqlglot would rewrite 'Q' to QUARTER)
    "date_trunc('Q', ts)", "date_trunc('WK', ts)", "date_trunc('quarter', ts)", "date_trunc('D', ts)", "date_trunc('mon', ts)",
    "trunc(d, 'Q')", "trunc(d, 'mon')", "trunc(d, 'YY')", "trunc(ts, 'W')",
    # casts from strings (ANSI)
    "CAST(si AS INT)", "CAST(si AS BIGINT)", "CAST(sl AS BIGINT)", "CAST(sd AS DOUBLE)",
    "CAST(sd AS FLOAT)", "CAST(sb AS BOOLEAN)", "CAST(sdt AS DATE)", "CAST(sts AS TIMESTAMP)",
    "CAST(CAST(i AS STRING) AS INT)", "CAST(CAST(d AS STRING) AS DATE)",
]

# Spark fails on these rows (ANSI); so must the evaluator, with Spark's error class (CAST_INVALID_INPUT
# for casts, CANNOT_PARSE_TIMESTAMP for patterns) and the value
FAILING = {
    "to_date(s, 'yyyy-MM-dd')": ["2024-1-5", "bad", "2024-02-30", " 2024-01-05", "2024-01-05x", "24-01-05"],
    "to_timestamp(s, 'yyyy-MM-dd HH:mm:ss')": ["2024-01-05 24:00:00", "2024-01-05 10:61:00", "2024-01-05"],
    "CAST(s AS INT)": ["1.7", "", "1e3", "99999999999", "2147483648", ".5", "5.", "12 3", "\u00a012", "\uff11"],
    "CAST(s AS BIGINT)": ["9223372036854775808", "-9223372036854775809", "1" * 30, "0x10"],
    "CAST(s AS TINYINT)": ["128", "-129"],
    "CAST(s AS SMALLINT)": ["32768"],
    "CAST(s AS DOUBLE)": ["abc", "1.5.5", "", "1e", "\u00a01", "1.5\x7f", "infinite"],
    "CAST(s AS BOOLEAN)": ["maybe", "", "tru", "2"],
    "CAST(s AS DATE)": ["2024-02-30", "2024-13-01", "2024-02-03garbage", "2024-", "24-01-01", "2024 01", "2024-1-5x",
                        "2023-02-29", ""],
    "CAST(s AS TIMESTAMP)": ["2024-02-03 25:00", "2024-02-30 10:00", "2024-02-03 10:60", "abc", ""],
}


def test_edge_values_and_types_match_spark(spark: Any, tmp_path: Path) -> None:
    mismatches = _compare(spark, tmp_path, EDGE, VALUES, "edge")
    assert not mismatches, "\n".join(mismatches[:60])


def _random_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    py = random.Random(seed)
    # decimal ties at 1..4 digits (binary neighbours either side), plus plain doubles of every scale
    ties = (rng.integers(-10**6, 10**6, n) * 2 + 1) / 10.0 ** rng.integers(1, 5, n) / 2
    plain = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 17, n)
    x = np.where(rng.random(n) < 0.6, ties, plain)
    alphabet = string.ascii_letters + string.digits + " \u00e9\u00fc\u4e2d\U0001f600\u0000"
    texts = ["".join(py.choice(alphabet) for _ in range(py.randrange(0, 90))) for _ in range(n)]
    days = rng.integers(-200_000, 200_000, n)
    ints = rng.integers(-(2**31), 2**31, n)
    spaces = [" ", "", "\t", "\n ", "\x01"]
    formatted_ints = [f"{py.choice(spaces)}{'+' if v >= 0 and py.random() < 0.2 else ''}{v}{py.choice(spaces)}" for v in ints]
    formatted_doubles = [py.choice([repr, lambda v: f"{v:.6e}", lambda v: f"{v:.3f}", lambda v: f"{v}d"])(float(v)) for v in plain]
    dates = [dt.date(1970, 1, 1) + dt.timedelta(days=int(v)) for v in days]
    micros = rng.integers(-(2**60) // 1000, 2**60 // 1000, n)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "x": pa.array(x), "f": pa.array(x.astype(np.float32)),
        "s": pa.array(texts), "i": pa.array(ints.astype(np.int32)), "l": pa.array(rng.integers(-(2**63), 2**63 - 1, n)),
        "d": pa.array(days.astype(np.int32)).cast(pa.date32()),
        "ts": pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "m": pa.array(rng.integers(-30, 30, n).astype(np.int32)),
        "si": pa.array(formatted_ints), "sd": pa.array(formatted_doubles),
        "sdt": pa.array([f"{d.year:04d}-{d.month}-{d.day:02d}" for d in dates]),
        "sts": pa.array([f"{d.isoformat()}{py.choice([' ', 'T'])}{py.randrange(24)}:{py.randrange(60):02d}:"
                         f"{py.randrange(60):02d}.{py.randrange(10**6):06d}{py.choice(['', 'Z', '+01:30', '-08'])}" for d in dates]),
    })


RANDOM_VALUES = [
    "round(x)", "round(x, 1)", "round(x, 2)", "round(x, 3)", "round(x, -1)", "bround(x, 1)", "bround(x, 2)",
    "bround(x, 3)", "round(f, 2)", "greatest(x, f)", "least(x, f, 0.0E0)",
    "hash(s)", "hash(s, i, l, x, d, ts)", "xxhash64(s)", "xxhash64(s, i, l, x, f, d, ts)", "crc32(s)", "sha2(s, 256)",
    "ln(abs(x))", "log10(abs(x))", "log(3, abs(x))", "exp(x / 1000000)", "exp(-abs(x))",
    "s rlike '[a-z]{3}'", "regexp_replace(s, '[0-9]+', '#')", "regexp_extract(s, '([A-Z])(.)', 2)",
    "regexp_replace(s, '(\\\\w)(\\\\s)', '$2$1')",
    "add_months(d, m)", "last_day(d)", "lpad(s, 40, 'ab')", "rpad(s, 40, '-')",
    "CAST(si AS INT)", "CAST(sd AS DOUBLE)", "CAST(sd AS FLOAT)", "CAST(sdt AS DATE)", "CAST(sts AS TIMESTAMP)",
]


def test_random_samples_match_spark(spark: Any, tmp_path: Path) -> None:
    mismatches = _compare(spark, tmp_path, _random_table(4000, 26), RANDOM_VALUES, "random")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:40])


def test_failing_rows_match_spark(spark: Any, tmp_path: Path) -> None:
    for k, (text, inputs) in enumerate(FAILING.items()):
        for j, value in enumerate(inputs):
            one = pa.table({"s": pa.array([value])})
            path = _write(tmp_path, one, f"f{k}_{j}")
            with pytest.raises(Exception) as spark_error:
                spark.read.parquet(path).selectExpr(text).collect()
            error_class = "CAST_INVALID_INPUT" if text.startswith("CAST") else "CANNOT_PARSE_TIMESTAMP"
            assert error_class in str(spark_error.value), (text, value, str(spark_error.value)[:300])
            with pytest.raises(pa.ArrowInvalid, match=error_class) as ours:
                _evaluate(one, text)
            assert f"'{value}'" in str(ours.value), (text, value, str(ours.value))


def test_date_trunc_units_reach_spark_as_written() -> None:
    """The Spark executor runs the bound tree regenerated as text: the unit must be the user's
    ('Q' gives NULL in Spark; sqlglot's own parser would send 'QUARTER'), and a column unit must stay
    a column (sqlglot would send the constant 'U'); the Arrow evaluator refuses a column unit."""
    schema = from_arrow_schema(pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32()), ("u", pa.string())]))
    assert "'Q'" in to_spark_sql(parse_value_expression("date_trunc('Q', ts)", schema))
    assert "`u`" in to_spark_sql(parse_value_expression("date_trunc(u, ts)", schema))
    assert "`u`" in to_spark_sql(parse_value_expression("trunc(d, u)", schema))
    bound = parse_value_expression("date_trunc(u, ts)", schema)
    with pytest.raises(InvalidPredicateError, match="unit must be a string literal"):
        _ValueTranslator(bound, None).typed(bound.tree)


def test_dollar_matches_as_in_java_or_fails(spark: Any, tmp_path: Path) -> None:
    """Java's ``$`` also matches before a final line terminator: without one the answers agree; with
    one the evaluator fails rather than answer differently."""
    plain = pa.table({"id": pa.array([0, 1, 2], pa.int64()), "r": pa.array(["abc", "ab", None])})
    mismatches = _compare(spark, tmp_path, plain, ["r rlike 'c$'", "r rlike '^ab$'", "regexp_replace(r, 'b$', 'B')"], "dollar")
    assert not mismatches, mismatches
    with pytest.raises(pa.ArrowInvalid, match="line terminator"):
        _evaluate(pa.table({"r": pa.array(["abc\n"])}), "r rlike 'c$'")


def test_regular_expressions_outside_the_common_core_are_refused() -> None:
    schema = from_arrow_schema(pa.schema([("r", pa.string())]))
    for text, reason in {
        "r rlike '(a)\\\\1'": "escape \\1", "r rlike '(?i)a'": "flags", "r rlike 'a(?=b)'": "look-around",
        "r rlike '\\\\bx'": "escape \\b", "r rlike '\\\\p{Alpha}'": "escape \\p", "r rlike 'a++'": "possessive",
        "r rlike '[a[b]]'": "nested", "r rlike '[a&&b]'": "intersected", "r rlike 'a{'": "literal '{'",
        "regexp_replace(r, 'b*', '-')": "empty string", "regexp_replace(r, '(a)', '$2')": "group 2",
        "regexp_extract(r, '(a)', 2)": "group 2", "r rlike s": "must be a string literal",
    }.items():
        if " s" in text:
            schema = from_arrow_schema(pa.schema([("r", pa.string()), ("s", pa.string())]))
        bound = parse_value_expression(text, schema)
        with pytest.raises(InvalidPredicateError, match="cannot be evaluated in Arrow") as info:
            _ValueTranslator(bound, None).typed(bound.tree)
        assert reason in str(info.value), (text, str(info.value))


def test_forms_not_parsed_here_fail_instead_of_differing() -> None:
    """Time-only texts (Spark takes today's date), zone ids, hexadecimal floats: not evaluated."""
    for text, value in [("CAST(s AS TIMESTAMP)", "10:11:12"), ("CAST(s AS TIMESTAMP)", "2024-01-01 10:00:00 America/New_York"),
                        ("CAST(s AS DOUBLE)", "0x1p3"), ("CAST(s AS TIMESTAMP_NTZ)", "2024-01-01 10:00:00Z")]:
        with pytest.raises(pa.ArrowInvalid, match="not evaluated in Arrow"):
            _evaluate(pa.table({"s": pa.array([value])}), text)
