"""Point lookups on DATE keys through the integer key index over the days (key_lookup.py).

Only typed date literals are lookups; what a file's index returns through ``match_file`` is
checked against the general Arrow filter and a Python model, and DML by date against a model
read back by delta-rs and DuckDB."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import rows_delta_rs, rows_duckdb, sort_rows
from key_index_support import assert_general_path, fresh_column_cache  # noqa: F401 (autouse fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import executor, key_lookup
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructType, from_arrow_schema

BASE = dt.date(2024, 1, 1)


def _schema() -> StructType:
    return from_arrow_schema(pa.schema([("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("s", pa.string())]))


def _date_sql(day: dt.date, cast: bool) -> str:
    return f"CAST('{day.isoformat()}' AS DATE)" if cast else f"DATE '{day.isoformat()}'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("d = DATE '2024-01-02'", [dt.date(2024, 1, 2)]),
        ("DATE '2024-01-02' = d", [dt.date(2024, 1, 2)]),
        ("d = CAST('2024-1-2' AS DATE)", [dt.date(2024, 1, 2)]),
        ("d IN (DATE '2024-01-03', DATE '1969-12-31', NULL, DATE '2024-01-03')", [dt.date(1969, 12, 31), dt.date(2024, 1, 3)]),
    ],
)
def test_date_shapes(text: str, expected: list[dt.date]) -> None:
    lookup = point_lookup(parse_predicate(text, _schema()))
    assert lookup is not None and lookup.column == "d" and lookup.keys.values.to_pylist() == expected


@pytest.mark.parametrize(
    "text",
    [
        "d = '2024-01-02'",  # a string Spark casts by its comparison rules: the general path
        "d IN (DATE '2024-01-02', '2024-01-03')",
        "d = TIMESTAMP '2024-01-02 00:00:00'",
        "ts = DATE '2024-01-02'",
        "s = DATE '2024-01-02'",
        "d = NULL",
        "d NOT IN (DATE '2024-01-02')",
        "d = DATE '2024-01-02' + 1",
    ],
)
def test_other_date_shapes_take_the_general_path(text: str) -> None:
    assert_general_path(text, _schema())


days = st.integers(-3, 6).map(lambda n: BASE + dt.timedelta(days=n))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.one_of(st.none(), days), min_size=1, max_size=40),
    keys=st.lists(st.one_of(days, st.none()), min_size=1, max_size=4),
    sort=st.booleans(),
    cast=st.booleans(),
)
def test_match_file_rows_equal_the_filter_and_the_model(rows: list[dt.date | None], keys: list[dt.date | None], sort: bool, cast: bool) -> None:
    if sort:
        rows = sorted(rows, key=lambda v: (v is None, v or BASE))
    with tempfile.TemporaryDirectory() as root:
        dvengine.write(pa.table({"d": pa.array(rows, pa.date32()), "i": pa.array(range(len(rows)), pa.int64())}), root)
        snap = load_snapshot(root)
        listed = ", ".join("NULL" if k is None else _date_sql(k, cast) for k in keys)
        predicate = parse_predicate(f"d IN ({listed})", snap.schema)
        assert point_lookup(predicate) is not None
        got = executor.match_file(snap, snap.files[0], predicate, all_columns=False).matched.tolist()
        table = DeltaTable.forPath(None, root).toArrow()
        assert got == executor.matching_positions(table, predicate).tolist()
        assert got == [i for i, v in enumerate(rows) if v is not None and v in keys]


def test_date_lookups_use_the_index_once_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    values = [BASE + dt.timedelta(days=(i * 7) % 30) for i in range(300)]
    dvengine.write(pa.table({"d": pa.array(values, pa.date32())}), root)
    snap = load_snapshot(root)
    builds: list[int] = []
    real = key_lookup.build_key_index
    monkeypatch.setattr(key_lookup, "build_key_index", lambda c: builds.append(1) or real(c))

    def no_filter(*args: object) -> Any:
        raise AssertionError("the general filter ran")

    monkeypatch.setattr(executor, "matching_positions", no_filter)
    for offset in (3, 29, 3, 31):
        day = BASE + dt.timedelta(days=offset)
        m = executor.match_file(snap, snap.files[0], parse_predicate(f"d = {_date_sql(day, False)}", snap.schema), all_columns=False)
        assert m.matched.tolist() == [i for i, v in enumerate(values) if v == day]
    assert len(builds) == 1


def test_delete_update_merge_by_date_keep_the_model(tmp_path: Path) -> None:
    """DELETE / UPDATE by typed date literals and a MERGE on a date key, two files (one unsorted
    with NULL dates, one sorted), against a model read back by dvengine, delta-rs and DuckDB."""
    root = str(tmp_path / "t")
    first = [BASE + dt.timedelta(days=(i * 13) % 40) for i in range(200)] + [None, None]
    dvengine.write(pa.table({"d": pa.array(first, pa.date32()), "v": ["a"] * len(first)}), root,
                   configuration={"delta.autoOptimize.autoCompact": "false"})
    second = sorted(BASE + dt.timedelta(days=n) for n in (0, 0, 5, 39, 45))
    dvengine.write(pa.table({"d": pa.array(second, pa.date32()), "v": ["b"] * len(second)}), root, mode="append")
    model: list[tuple[dt.date | None, str]] = [(d, "a") for d in first] + [(d, "b") for d in second]
    t = DeltaTable.forPath(None, root)

    gone = {BASE, BASE + dt.timedelta(days=7)}
    t.delete("d IN (DATE '2024-01-01', DATE '2024-01-08', NULL)", engine="local")
    model = [(d, v) for d, v in model if d not in gone]
    t.update("d = CAST('2024-01-06' AS DATE)", {"v": "'u'"}, engine="local")
    model = [(d, "u" if d == BASE + dt.timedelta(days=5) else v) for d, v in model]

    source = pa.table({"d": pa.array([BASE + dt.timedelta(days=n) for n in (1, 39, 100)] + [None], pa.date32()), "v": ["m"] * 4})
    t.alias("t").merge(source, "t.d = s.d", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().withEngine("local").execute()
    matched = {BASE + dt.timedelta(days=n) for n in (1, 39)}
    model = [(d, "m" if d in matched else v) for d, v in model] + [(BASE + dt.timedelta(days=100), "m"), (None, "m")]

    expected = sort_rows(model)
    assert sort_rows([(r["d"], r["v"]) for r in t.toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["d", "v"]) == expected
    assert rows_duckdb(root, ["d", "v"]) == expected
