"""Property tests: skipping and Arrow filtering against DuckDB as independent truth.

Random predicates over a small schema are evaluated by DuckDB (translated from Spark SQL by
sqlglot) on random rows split into random "files". Soundness: a file whose rows DuckDB says
contain a match must never be skipped by ``stats_might_match`` / ``partition_might_match``; the
Arrow filter must select exactly DuckDB's rows.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvengine.expressions import parse_predicate, partition_might_match, stats_might_match, to_pyarrow_expression
from dvengine.protocol.schema import PrimitiveType, StructField, StructType, to_arrow_schema
from dvengine.protocol.stats import FileStats

SCHEMA = StructType(
    (
        StructField("i", PrimitiveType("integer")),
        StructField("l", PrimitiveType("long")),
        StructField("x", PrimitiveType("double")),
        StructField("s", PrimitiveType("string")),
        StructField("d", PrimitiveType("date")),
        StructField("ts", PrimitiveType("timestamp")),
        StructField("b", PrimitiveType("boolean")),
        StructField("p", PrimitiveType("string")),
    )
)
COLUMNS = [f.name for f in SCHEMA.fields]
BASE_DATE = dt.date(2024, 1, 1)
BASE_TS = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
STRINGS = ["", "a", "ab", "abc", "abcd", "abd", "b", "ba", "bab", "c", "caa"]
TRUNCATE = 2  # string stats prefix length, tiny so truncation is exercised constantly

# --- values -----------------------------------------------------------------------------------

ints = st.integers(-4, 4)
doubles = st.sampled_from([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 2.25, 3.0])
strings = st.sampled_from(STRINGS)
dates = st.integers(0, 6).map(lambda n: BASE_DATE + dt.timedelta(days=n))
# micro-second offsets around a few millisecond boundaries
ts_micros = st.sampled_from([0, 999, 1000, 1001, 1999, 2000, 86_400_000_000, 86_400_000_999])
timestamps = ts_micros.map(lambda us: BASE_TS + dt.timedelta(microseconds=us))
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": ints,
    "l": ints,
    "x": doubles,
    "s": strings,
    "d": dates,
    "ts": timestamps,
    "b": st.booleans(),
    "p": st.sampled_from(["a", "b", "c"]),
}


def sql_literal(column: str, value: Any) -> str:
    if value is None:
        return "NULL"
    if column in ("s", "p"):
        return "'" + value + "'"
    if column == "d":
        return f"DATE '{value.isoformat()}'"
    if column == "ts":
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if column == "b":
        return "TRUE" if value else "FALSE"
    if column == "x":
        return repr(float(value)) if value != 0 else ("-0.0" if str(value).startswith("-") else "0.0")
    return str(value)


def maybe_null(column: str) -> st.SearchStrategy[Any]:
    return st.one_of(VALUES[column], VALUES[column], VALUES[column], st.none())


# --- predicates -------------------------------------------------------------------------------

ORDERED = ["i", "l", "x", "s", "d", "ts", "p"]


@st.composite
def comparison(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from([*ORDERED, "b"]))
    op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
    if draw(st.integers(0, 5)) == 0:
        other = {"i": "l", "l": "i"}.get(column, column)
        return f"{column} {op} {other}"
    literal = sql_literal(column, draw(maybe_null(column)))
    if draw(st.booleans()):
        return f"{literal} {op} {column}"
    return f"{column} {op} {literal}"


@st.composite
def in_list(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(ORDERED))
    values = draw(st.lists(maybe_null(column), min_size=1, max_size=4))
    negate = "NOT " if draw(st.booleans()) else ""
    return f"{column} {negate}IN ({', '.join(sql_literal(column, v) for v in values)})"


@st.composite
def between(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(ORDERED))
    low, high = draw(maybe_null(column)), draw(maybe_null(column))
    negate = "NOT " if draw(st.booleans()) else ""
    return f"{column} {negate}BETWEEN {sql_literal(column, low)} AND {sql_literal(column, high)}"


@st.composite
def null_check(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(COLUMNS))
    return f"{column} IS {'NOT ' if draw(st.booleans()) else ''}NULL"


@st.composite
def like(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(["s", "p"]))
    prefix = draw(st.sampled_from(["", "a", "ab", "abc", "b", "ba", "c", "d"]))
    suffix = draw(st.sampled_from(["%", "", "_", "_%", "%c", "%%"]))
    negate = "NOT " if draw(st.booleans()) else ""
    return f"{column} {negate}LIKE '{prefix}{suffix}'"


@st.composite
def arithmetic(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(["i", "l", "x"]))
    op = draw(st.sampled_from(["+", "-", "*"]))
    k = draw(st.integers(-2, 3))
    cmp = draw(st.sampled_from(["=", "<", ">="]))
    return f"{column} {op} {k} {cmp} {draw(ints)}"


boolean_atom = st.sampled_from(["b", "NOT b", "b = TRUE", "b IS NULL"])
atoms = st.one_of(comparison(), comparison(), in_list(), between(), null_check(), like(), arithmetic(), boolean_atom)


def combine(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, children).map(lambda ab: f"({ab[0]} AND {ab[1]})"),
        st.tuples(children, children).map(lambda ab: f"({ab[0]} OR {ab[1]})"),
        children.map(lambda a: f"NOT ({a})"),
    )


predicates = st.recursive(atoms, combine, max_leaves=5)

# --- rows, files, stats -------------------------------------------------------------------------


@st.composite
def row(draw: st.DrawFn) -> dict[str, Any]:
    return {c: draw(maybe_null(c)) for c in COLUMNS if c != "p"}


@st.composite
def files(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Each file: partition value, live rows, and extra rows a DV hides (only in loose stats)."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        part = draw(st.sampled_from(["a", "b", "c", None]))
        live = draw(st.lists(row(), min_size=0, max_size=6))
        hidden = draw(st.lists(row(), max_size=3))
        out.append(
            {
                "p": part,
                "live": [dict(r, p=part) for r in live],
                "hidden": [dict(r, p=part) for r in hidden],
                "drop": draw(st.sets(st.sampled_from(COLUMNS))),
            }
        )
    return out


def _stat(column: str, value: Any, upper: bool) -> Any:
    if column == "s":
        if len(value) <= TRUNCATE:
            return value
        return value[:TRUNCATE] + ("\uffff" if upper else "")
    if column == "d":
        return value.isoformat()
    if column == "ts":
        floored = value.replace(microsecond=value.microsecond // 1000 * 1000)
        return floored.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return value


def file_stats(rows: list[dict[str, Any]], tight: bool, drop: set[str]) -> FileStats:
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for c in COLUMNS:
        if c == "p" or c in drop:
            continue
        present = [r[c] for r in rows if r[c] is not None]
        nulls[c] = len(rows) - len(present)
        if present and c != "b":
            mins[c] = _stat(c, min(present), upper=False)
            maxs[c] = _stat(c, max(present), upper=True)
    return FileStats(len(rows), mins, maxs, nulls, tight_bounds=None if tight else False)


def arrow_table(rows: list[dict[str, Any]]) -> pa.Table:
    schema = to_arrow_schema(SCHEMA).append(pa.field("file_id", pa.int32())).append(pa.field("rid", pa.int32()))
    return pa.Table.from_pylist(rows, schema=schema)


def duckdb_matches(con: duckdb.DuckDBPyConnection, table: pa.Table, predicate: str, what: str) -> set[int]:
    condition = sqlglot.transpile(predicate, read="spark", write="duckdb")[0]
    con.register("t", table)
    try:
        return {r[0] for r in con.execute(f"SELECT DISTINCT {what} FROM t WHERE {condition}").fetchall()}
    finally:
        con.unregister("t")


@pytest.fixture(scope="module")
def con() -> Any:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    yield connection
    connection.close()


SETTINGS = settings(
    max_examples=int(os.environ.get("DVENGINE_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@SETTINGS
@given(predicate=predicates, layout=files())
def test_skipping_never_drops_a_matching_file(con: Any, predicate: str, layout: list[dict[str, Any]]) -> None:
    bound = parse_predicate(predicate, SCHEMA)
    rows: list[dict[str, Any]] = []
    for fid, f in enumerate(layout):
        rows += [dict(r, file_id=fid, rid=len(rows) + k) for k, r in enumerate(f["live"])]
    matching = duckdb_matches(con, arrow_table(rows), predicate, "file_id") if rows else set()
    for fid, f in enumerate(layout):
        tight = not f["hidden"]
        stats = file_stats(f["live"] + f["hidden"], tight, f["drop"])
        part = {"p": f["p"]}
        if fid in matching:
            assert partition_might_match(bound, part), (predicate, f["p"])
            assert stats_might_match(bound, stats, SCHEMA, part), (predicate, stats, f["live"])


@SETTINGS
@given(predicate=predicates, layout=files())
def test_partition_pruning_is_exact_for_partition_only_predicates(
    con: Any, predicate: str, layout: list[dict[str, Any]]
) -> None:
    """Where only ``p`` is referenced, pruning must agree with DuckDB exactly (no false positives)."""
    bound = parse_predicate(predicate, SCHEMA)
    if bound.columns != {"p"}:
        return
    for f in layout:
        probe = arrow_table([dict({c: None for c in COLUMNS}, p=f["p"], file_id=0, rid=0)])
        truth = bool(duckdb_matches(con, probe, predicate, "rid"))
        assert partition_might_match(bound, {"p": f["p"]}) == truth, (predicate, f["p"])


@SETTINGS
@given(predicate=predicates, layout=files())
def test_arrow_filter_equals_duckdb(con: Any, predicate: str, layout: list[dict[str, Any]]) -> None:
    bound = parse_predicate(predicate, SCHEMA)
    rows: list[dict[str, Any]] = []
    for fid, f in enumerate(layout):
        rows += [dict(r, file_id=fid, rid=len(rows) + k) for k, r in enumerate(f["live"] + f["hidden"])]
    table = arrow_table(rows)
    expected = duckdb_matches(con, table, predicate, "rid")
    got = set(table.filter(to_pyarrow_expression(bound)).column("rid").to_pylist())
    assert got == expected, predicate
