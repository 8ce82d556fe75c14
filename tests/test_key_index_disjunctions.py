"""``col = a OR col = b OR col IN (...)``: an OR of lookups on one column is the lookup of all their
keys (engine/local/point_lookup.py). Checked against the general filter over each whole file on
random disjunctions (alone and as a conjunct), and in DML against a model read back by delta-rs
and DuckDB."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import rows_delta_rs, rows_duckdb, sort_rows
from key_index_support import assert_general_path, fresh_column_cache, write_two_random_files  # noqa: F401 (autouse fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import executor
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.expressions import parse_predicate, to_pyarrow_expression
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructType, from_arrow_schema

BASE = dt.date(2024, 1, 1)


def _schema() -> StructType:
    return from_arrow_schema(pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("x", pa.int32())]))


@pytest.mark.parametrize(
    ("text", "column", "keys", "whole"),
    [
        ("id = 3 OR id = 1", "id", [1, 3], True),
        ("s IN ('b', 'a') OR s = 'c' OR 'a' = s", "s", ["a", "b", "c"], True),
        ("d = DATE '2024-01-02' OR d IN (DATE '2024-01-01')", "d", [BASE, BASE + dt.timedelta(days=1)], True),
        ("(id = 1 OR id = 2) AND x > 0", "id", [1, 2], False),
        ("x > 0 AND (s = 'q' OR (s = 'r'))", "s", ["q", "r"], False),
    ],
)
def test_or_of_lookups_on_one_column_is_one_lookup(text: str, column: str, keys: list[Any], whole: bool) -> None:
    lookup = point_lookup(parse_predicate(text, _schema()))
    assert lookup is not None and lookup.column == column and lookup.whole is whole
    assert sorted(lookup.keys.values.to_pylist()) == keys


@pytest.mark.parametrize(
    "text",
    [
        "id = 1 OR s = 'a'",  # two columns
        "id = 1 OR x = 1",
        "id = 1 OR id > 3",  # a disjunct that is no lookup
        "id = 1 OR NOT id = 2",
        "s = 'a' OR s = 1",  # a cast of the string column is the general path's to judge
        "d = DATE '2024-01-01' OR d = '2024-01-02'",
        "id = 1 OR id = NULL",
        "(id = 1 OR id = 2) AND x + 1 > 0",  # a conjunct that can fail keeps the whole-file filter
    ],
)
def test_other_disjunctions_take_the_general_path(text: str) -> None:
    assert_general_path(text, _schema())


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_two_random_files(str(tmp_path_factory.mktemp("disj") / "t"), seed=11)


def _id_part(keys: list[int | None]) -> str:
    rendered = ["NULL" if k is None else str(k) for k in keys]
    return f"id = {rendered[0]}" if len(rendered) == 1 and keys[0] is not None else f"id IN ({', '.join(rendered)})"


id_parts = st.lists(st.one_of(st.none(), st.integers(-1, 41)), min_size=1, max_size=3).map(_id_part)
s_parts = st.lists(st.sampled_from(["a", "b", "", "é", "zz"]), min_size=1, max_size=2).map(
    lambda ks: f"s = '{ks[0]}'" if len(ks) == 1 else f"s IN ({', '.join(repr(k) for k in ks)})")
d_parts = st.integers(-1, 4).map(lambda n: f"d = DATE '{(BASE + dt.timedelta(days=n)).isoformat()}'")
disjunctions = st.one_of(
    *(st.lists(parts, min_size=2, max_size=4).map(lambda ps: " OR ".join(f"({p})" for p in ps))
      for parts in (id_parts, s_parts, d_parts))
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(disjunction=disjunctions, other=st.sampled_from([None, "x > 0", "x IS NULL", "s <> 'b'"]))
def test_looked_up_rows_equal_the_whole_file_filter(two_files: str, disjunction: str, other: str | None) -> None:
    """match_file's rows through the index equal the filter over each whole file, and their sum the
    rows an Arrow filter of the whole table keeps."""
    text = disjunction if other is None else f"({disjunction}) AND {other}"
    snap = load_snapshot(two_files)
    predicate = parse_predicate(text, snap.schema)
    found = point_lookup(predicate)
    assert found is not None and found.whole is (other is None)
    total = 0
    for add in snap.files:
        got = executor.match_file(snap, add, predicate, all_columns=False).matched.tolist()
        assert got == executor.match_file(snap, add, predicate, all_columns=False, lookup=None).matched.tolist()
        total += len(got)
    assert total == DeltaTable.forPath(None, two_files).toArrow().filter(to_pyarrow_expression(predicate)).num_rows


def _model_schema_rows(n: int) -> list[tuple[int, str, int]]:
    return [(i, f"user-{i % 37:03d}", i % 5) for i in range(n)]


def test_delete_and_update_by_or_of_keys_keep_the_model(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    model = _model_schema_rows(600)
    dvengine.write(pa.table({"id": [r[0] for r in model], "user": [r[1] for r in model], "n": [r[2] for r in model]}),
                   root, configuration={"delta.autoOptimize.autoCompact": "false"})
    t = DeltaTable.forPath(None, root)
    t.delete("id = 4 OR id = 77 OR id IN (300, 599, 1000)", engine="local")
    model = [r for r in model if r[0] not in (4, 77, 300, 599)]
    t.update("user = 'user-003' OR user = 'user-010'", {"n": "n + 100"}, engine="local")
    model = [(i, u, n + 100 if u in ("user-003", "user-010") else n) for i, u, n in model]
    t.delete("(user = 'user-020' OR user IN ('user-021')) AND n <> 2", engine="local")
    model = [r for r in model if not (r[1] in ("user-020", "user-021") and r[2] != 2)]

    expected = sort_rows(model)
    assert sort_rows([(r["id"], r["user"], r["n"]) for r in t.toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["id", "user", "n"]) == expected
    assert rows_duckdb(root, ["id", "user", "n"]) == expected
