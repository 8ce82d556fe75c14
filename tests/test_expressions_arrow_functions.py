"""The Arrow evaluator's functions, casts and conditionals against Spark's own evaluation.

Truth: Spark 4 (ANSI mode, session time zone UTC, as dvengine's sessions run) evaluating the same
expression text over the same rows, read from one Parquet file: every expression in one query (one
small job), then each failing expression alone. Values and Spark's result type must both match;
constructs the evaluator refuses must say which part and why.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import acero

from dvengine.engine.local.constraints import check_constraints
from dvengine.errors import EvaluationError, InvalidPredicateError
from dvengine.expressions import parse_predicate, parse_value_expression, to_pyarrow_expression
from dvengine.expressions.arrow import _ValueTranslator
from dvengine.protocol.schema import from_arrow_schema
from dvengine.writing.constraints import bind_constraint

UTC = dt.UTC
ROWS = {
    "id": pa.array(range(8), pa.int64()),
    "i": pa.array([1, -7, None, 3, 0, 15, -15, 25], pa.int32()),
    "l": pa.array([10, -3, 5, None, -(2**63), 2**62, 0, 7], pa.int64()),
    "x": pa.array([1.5, -2.5, float("nan"), None, 9.2e18, -0.0, 2.0, -9.2e18]),
    "s": pa.array(["  ab c ", "Hello", None, "", "\u00e9-x\u00c9", "hello world", "x", "  "]),
    "d": pa.array([dt.date(2024, 2, 29), dt.date(1969, 12, 31), None, dt.date(2000, 1, 1),
                   dt.date(2024, 12, 30), dt.date(1900, 3, 1), dt.date(2023, 1, 1), dt.date(1970, 1, 1)]),
    "ts": pa.array([dt.datetime(2024, 3, 1, 12, 5, 7, 123456, UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 500000, UTC),
                    None, dt.datetime(2000, 1, 1, tzinfo=UTC), dt.datetime(2024, 12, 30, 1, 2, 3, tzinfo=UTC),
                    dt.datetime(1900, 3, 1, 0, 0, 0, 1, UTC), dt.datetime(2023, 1, 1, 23, 59, 59, tzinfo=UTC),
                    dt.datetime(1970, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    "n": pa.array([dt.datetime(2024, 3, 1, 12, 5, 7, 123456), None, dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                   dt.datetime(2000, 1, 1), dt.datetime(2024, 12, 30, 1, 2, 3), dt.datetime(1900, 3, 1),
                   dt.datetime(2023, 1, 1, 23, 59, 59), dt.datetime(1970, 1, 1)], pa.timestamp("us")),
}
VALUES = [
    # date and time fields
    "year(ts)", "month(ts)", "day(ts)", "dayofmonth(d)", "hour(ts)", "minute(ts)", "second(ts)", "quarter(d)",
    "dayofweek(ts)", "dayofyear(d)", "weekday(d)", "weekofyear(ts)", "hour(n)", "year(n)", "second(n)", "year(d)",
    "extract(YEAR FROM ts)", "extract(HOUR FROM n)", "date_part('month', d)", "date_part('doy', ts)",
    # formatting, conversion, truncation, arithmetic on dates
    "date_format(ts, 'yyyy-MM-dd HH:mm:ss')", "date_format(d, 'yyyyMMdd')", "date_format(ts, 'yy/MMM/dd EEE')",
    "date_format(n, 'yyyy-MM-dd HH:mm')", "date_format(ts, 'MMMM EEEE DDD')", "date_format(ts, \"yyyy'T'HH 'o''clock'\")",
    "to_date(ts)", "to_date(n)", "CAST(ts AS DATE)", "CAST(n AS DATE)", "CAST(d AS TIMESTAMP)", "CAST(ts AS TIMESTAMP_NTZ)",
    "CAST(n AS TIMESTAMP)", "CAST(d AS TIMESTAMP_NTZ)",
    "date_trunc('HOUR', ts)", "date_trunc('MONTH', ts)", "date_trunc('WEEK', ts)", "date_trunc('QUARTER', d)",
    "date_trunc('YEAR', ts)", "date_trunc('DD', ts)", "date_trunc('bogus', ts)", "date_trunc('SECOND', ts)",
    "trunc(d, 'MM')", "trunc(ts, 'YEAR')", "trunc(d, 'WEEK')", "trunc(d, 'QUARTER')", "trunc(d, 'DD')",
    "date_add(d, 1)", "date_sub(d, 30)", "date_add(ts, i)", "datediff(d, DATE '2024-01-01')", "datediff(ts, d)",
    "to_date(ts) >= '2024-01-01'", "ts >= TIMESTAMP '2024-01-01 00:00:00'",
    # strings
    "substring(s, 2, 3)", "substr(s, -3, 2)", "substring(s, 0, 2)", "substring(s, -10, 3)", "substring(s, 3)",
    "substring(s, 2, -1)", "substring(s, -2)", "substring(s, -3, 5)", "left(s, 2)", "right(s, 2)", "right(s, 0)",
    "concat(s, '-', i)", "concat(s, d)", "s || 'x'", "concat_ws('/', s, NULL, 'z')", "concat_ws('-', s)",
    "concat(s, CAST(id AS STRING), true)",
    "upper(s)", "lower(s)", "ucase(s)", "trim(s)", "ltrim(s)", "rtrim(s)", "trim(BOTH 'x' FROM s)",
    "trim(LEADING ' a' FROM s)", "length(s)", "char_length(s)", "length(s) + 1",
    "startswith(s, 'He')", "endswith(s, 'o')", "contains(s, 'l')", "replace(s, 'l', 'L')", "replace(s, '', 'z')",
    # numbers
    "abs(i)", "abs(x)", "floor(x)", "ceil(x)", "floor(i)", "ceiling(l)", "round(i, -1)", "round(i)", "bround(i, -1)",
    "round(i, 2)", "pmod(l, 3)", "pmod(i, -3)", "pmod(i, 4)", "l % 3", "i % -3", "l div 2", "i / 2", "x / 2", "l / 4",
    "year(ts) * 100 + month(ts)", "-floor(x)", "positive(i)",
    # conditionals
    "CASE WHEN i <> 0 THEN 10 / i END", "if(i = 0, 0, 100 div i)", "CASE WHEN l <> 0 THEN 7 % l END",
    "CASE WHEN i <> 0 THEN pmod(9, i) ELSE -1 END", "CASE WHEN i = 0 THEN 0 ELSE 7 % i END", "coalesce(i, 0)", "nvl(s, 'none')",
    "ifnull(l, i)", "nvl2(s, 1, 2)", "if(i > 0, 'pos', 'neg')", "if(i > 0, i, -i)",
    "CASE WHEN l > 0 THEN l / 2 ELSE 0 END", "CASE i WHEN 1 THEN 'one' WHEN 0 THEN 'zero' ELSE 'other' END",
    "CASE WHEN x > 0 THEN 'p' WHEN x < 0 THEN 'n' END", "nullif(i, 1)", "greatest(i, 3, l)", "least(s, 'b')",
    "greatest(d, DATE '2000-01-01')", "isnull(s)", "isnotnull(x)", "isnan(x)", "isnan(i)",
    "i <=> NULL", "i <=> 1", "(x > 1) IS TRUE", "(x > 1) IS NOT FALSE", "coalesce(i, 0) IN (0, 1)",
    # casts
    "CAST(i AS STRING)", "CAST(i AS BIGINT)", "CAST(i AS DOUBLE)", "CAST(x AS FLOAT)", "CAST(i AS BOOLEAN)",
    "CAST(d AS STRING)", "CAST(i AS TINYINT)", "CAST(CAST(x AS FLOAT) AS DOUBLE)", "CAST(x > 0 AS INT)",
    "CAST(l AS DOUBLE)", "CAST(i AS SMALLINT) + 1",
]
PREDICATES = [
    "length(s) > 2", "year(ts) = 2024", "upper(s) LIKE 'H%'", "coalesce(i, 0) IN (0, 1)", "startswith(s, 'He')",
    "i <=> 1", "date_format(d, 'yyyy') = '2024'", "(x > 1) IS TRUE", "NOT (month(d) BETWEEN 2 AND 11)",
    "trim(s) = 'ab c'", "to_date(ts) >= '2024-01-01'", "floor(x) > 0", "NOT startswith(s, 'He')",
    "if(i > 0, true, NULL)", "CASE WHEN i > 0 THEN s IS NULL ELSE x > 0 END", "date_trunc('MONTH', ts) = ts",
    "hour(ts) + minute(ts) > 10", "pmod(l, 3) = 1", "substring(s, 1, 1) IN ('H', 'h')", "NOT (abs(x) < 2)",
]
# Spark fails on these (ANSI); so must the evaluator, on the same row
FAILING = {
    "abs(i)": {"i": pa.array([-(2**31)], pa.int32())},
    "10 / l": {"l": pa.array([0], pa.int64())},
    "pmod(5, l)": {"l": pa.array([0], pa.int64())},
    "l div l": {"l": pa.array([0], pa.int64())},
    "CAST(x AS INT)": {"x": pa.array([1e10])},
    "floor(x)": {"x": pa.array([1e300])},
    "ceil(x)": {"x": pa.array([9.3e18])},
    "round(i, -1)": {"i": pa.array([2**31 - 1], pa.int32())},
    "CAST(i AS TINYINT)": {"i": pa.array([300], pa.int32())},
    "date_add(d, i)": {"d": pa.array([dt.date(2024, 1, 1)]), "i": pa.array([2**31 - 1], pa.int32())},
}
# The evaluator refuses these, naming the part it cannot evaluate
REFUSED = {
    "date_format(ts, 'hh a')": "'hh'",
    "to_date(s, 'dd MMM yyyy')": "'MMM'",
    "date_format(d, 'y')": "'y'",
    "CAST(x AS STRING)": "CAST from double to string",
    "CAST(s AS DECIMAL(10, 2))": "CAST to DECIMAL",
    "cbrt(x)": "CBRT",
    "pow(x, 2)": "POWER",
    "substring(s, i, 2)": "substring position must be an integer literal",
    "x * 1.5": "DECIMAL",
    "coalesce(s, i)": "mixes string and integer",
    "date_trunc('HOUR', n)": "TIMESTAMP_NTZ",
    "date_trunc(s, ts)": "unit must be a string literal",
    "add_months(d, l)": "add_months by a long",
    "lpad(s, i, 'x')": "length of lpad/rpad must be an integer literal",
}


def _table() -> pa.Table:
    return pa.table(ROWS)


def _evaluate(table: pa.Table, text: str) -> tuple[pa.ChunkedArray, str]:
    bound = parse_value_expression(text, from_arrow_schema(table.schema))
    value = _ValueTranslator(bound, None).typed(bound.tree)
    plan = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("project", acero.ProjectNodeOptions([value.expr], ["v"])),
    ])
    return plan.to_table(use_threads=False).column(0), value.name


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return bool(a == b) and type(a) is type(b)


_SPARK_TYPES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte"}


def _write(tmp_path: Path, table: pa.Table, name: str) -> str:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path)
    return str(path)


def _compare(spark: Any, tmp_path: Path, table: pa.Table, texts: list[str], name: str) -> list[str]:
    """Mismatches between Spark and the evaluator (values and result types) over ``table``."""
    df = spark.read.parquet(_write(tmp_path, table, name))
    result = df.selectExpr("id", *[f"{t} AS e{k}" for k, t in enumerate(texts)]).orderBy("id")
    spark_rows = result.collect()
    spark_types = {f.name: f.dataType.simpleString() for f in result.schema.fields}
    mismatches = []
    for k, text in enumerate(texts):
        got, type_name = _evaluate(table, text)
        want_type = _SPARK_TYPES.get(spark_types[f"e{k}"], spark_types[f"e{k}"])
        if type_name != want_type:
            mismatches.append(f"{text}: type {type_name}, Spark {want_type}")
        for row, value in zip(spark_rows, got.to_pylist()):
            expected = row[f"e{k}"]
            if isinstance(expected, dt.datetime) and isinstance(value, dt.datetime) and value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)  # pyspark gives naive session-zone (UTC) times
            if not _same(value, expected):
                mismatches.append(f"{text} row {row['id']}: {value!r}, Spark {expected!r}")
    return mismatches


def test_values_and_types_match_spark(spark: Any, tmp_path: Path) -> None:
    mismatches = _compare(spark, tmp_path, _table(), VALUES + [f"({p})" for p in PREDICATES], "rows")
    assert not mismatches, "\n".join(mismatches)


def test_filters_match_spark(spark: Any, tmp_path: Path) -> None:
    table = _table()
    pq.write_table(table, tmp_path / "rows.parquet")
    df = spark.read.parquet(str(tmp_path / "rows.parquet"))
    flags = df.selectExpr("id", *[f"coalesce({p}, false) AS p{k}" for k, p in enumerate(PREDICATES)]).collect()
    schema = from_arrow_schema(table.schema)
    for k, text in enumerate(PREDICATES):
        kept = table.filter(to_pyarrow_expression(parse_predicate(text, schema))).column("id").to_pylist()
        assert kept == [r["id"] for r in sorted(flags, key=lambda r: r["id"]) if r[f"p{k}"]], text


def test_failures_match_spark(spark: Any, tmp_path: Path) -> None:
    for k, (text, columns) in enumerate(FAILING.items()):
        one = pa.table({"x": pa.array([0.0]), "i": pa.array([0], pa.int32()), "l": pa.array([0], pa.int64()),
                        "d": pa.array([dt.date(2024, 1, 1)]), **columns})
        path = tmp_path / f"f{k}.parquet"
        pq.write_table(one, path)
        with pytest.raises(Exception) as spark_error:
            spark.read.parquet(str(path)).selectExpr(text).collect()
        assert any(c in str(spark_error.value) for c in ("OVERFLOW", "BY_ZERO", "CAST", "ordinal must be")), (text, spark_error.value)
        with pytest.raises(pa.ArrowInvalid):
            _evaluate(one, text)


def test_constructs_that_could_differ_from_spark_are_refused_by_name() -> None:
    schema = from_arrow_schema(_table().schema)
    for text, reason in REFUSED.items():
        bound = parse_value_expression(text, schema)
        with pytest.raises(InvalidPredicateError, match="cannot be evaluated in Arrow") as info:
            _ValueTranslator(bound, None).typed(bound.tree)
        assert reason.lower() in str(info.value).lower(), (text, str(info.value))


def test_letters_whose_case_differs_between_java_and_arrow_fail_instead_of_differing() -> None:
    table = pa.table({"s": pa.array(["stra\u00dfe", "ok"])})
    with pytest.raises(pa.ArrowInvalid, match="upper\\(\\) of a letter"):
        _evaluate(table, "upper(s)")
    assert _evaluate(table.slice(1), "upper(s)")[0].to_pylist() == ["OK"]  # Spark's upper('ok')


def test_a_failing_constraint_names_the_part_and_its_column() -> None:
    rows = pa.table({"a": pa.array([1, -(2**31)], pa.int32()), "s": ["x", "stra\u00dfe"]})
    schema = from_arrow_schema(rows.schema)
    with pytest.raises(EvaluationError, match=r"CHECK constraint c1 .* at part 'ABS\(`a`\)' \(column 'a'\): overflow"):
        check_constraints(rows, [bind_constraint("c1", "length(s) > 0 AND abs(a) > 0", schema)])
    with pytest.raises(EvaluationError, match=r"at part 'UPPER\(`s`\)' \(column 's'\).*upper\(\) of a letter"):
        check_constraints(rows, [bind_constraint("c2", "upper(s) <> ''", schema)])
