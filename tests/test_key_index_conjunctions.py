"""``lookup AND other``: the key index finds candidate rows, the Arrow filter decides on them alone
(engine/local/point_lookup.py). Checked against the general filter over the whole file on random
conjunctions, for errors (a conjunct that can fail keeps the whole-file filter and its error), and
in DML against a model read back by delta-rs and DuckDB."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import rows_delta_rs, rows_duckdb, sort_rows
from key_index_support import fresh_column_cache, write_two_random_files  # noqa: F401 (autouse fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import executor
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.errors import DvengineError
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructType, from_arrow_schema

BASE = dt.date(2024, 1, 1)


def _schema() -> StructType:
    return from_arrow_schema(
        pa.schema([("id", pa.int64()), ("s", pa.string()), ("x", pa.int32()), ("f", pa.float64()), ("d", pa.date32()),
                   ("ok", pa.bool_()), ("dec", pa.decimal128(10, 2))])
    )


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("id = 5 AND s = 'x'", "id"),
        ("s = 'x' AND id IN (1, 2)", "s"),  # the first lookup conjunct
        ("x > 3 AND (s IN ('a', NULL) AND ok)", "s"),
        ("d = DATE '2024-01-02' AND NOT (f < 1.5 OR f IS NULL) AND x BETWEEN -1 AND 4", "d"),
        ("id = 5 AND s <=> 'a' AND ok IS TRUE AND x <> -3", "id"),
    ],
)
def test_conjunctions_with_a_lookup_are_narrowed(text: str, column: str) -> None:
    lookup = point_lookup(parse_predicate(text, _schema()))
    assert lookup is not None and lookup.column == column and not lookup.whole


@pytest.mark.parametrize(
    "text",
    [
        "id = 5 AND x + 1 > 0",  # checked arithmetic can overflow on some other row
        "id = 5 AND -x > 0",
        "id = 5 AND upper(s) = 'A'",
        "id = 5 AND s LIKE 'a%'",
        "id = 5 AND dec = 1.5",
        "id = 5 AND CAST(s AS INT) = 1",
        "id = 5 OR s = 'x'",  # an OR over two columns
        "x > 3 AND s <> 'a'",
        "NOT (id = 5 AND s = 'x')",
    ],
)
def test_other_conjunctions_filter_the_whole_file(text: str) -> None:
    assert point_lookup(parse_predicate(text, _schema())) is None


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_two_random_files(str(tmp_path_factory.mktemp("conj") / "t"), seed=4)


lookups = st.one_of(
    st.lists(st.integers(-1, 41), min_size=1, max_size=3).map(lambda ks: f"id IN ({', '.join(map(str, ks))})"),
    st.sampled_from(["a", "b", "", "é", "zz"]).map(lambda k: f"s = '{k}'"),
    st.integers(-1, 4).map(lambda n: f"d = DATE '{(BASE + dt.timedelta(days=n)).isoformat()}'"),
)
others = st.sampled_from([
    "x > 0", "x <= -2", "x BETWEEN -1 AND 1", "x IN (1, 2, NULL)", "x IS NULL", "s IN ('a', 'x')", "s <> 'b'",
    "ok", "NOT ok", "ok IS NOT TRUE", "f > 1.0", "f = f", "d > DATE '2024-01-02'", "s <=> NULL", "id <> 7",
])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lookup=lookups, rest=st.lists(st.tuples(others, st.sampled_from(["AND", "OR"])), min_size=1, max_size=3), first=st.booleans())
def test_narrowed_rows_equal_the_whole_file_filter(two_files: str, lookup: str, rest: list[tuple[str, str]], first: bool) -> None:
    """Random ``lookup AND (others joined by AND/OR)``, the lookup first or last: match_file's
    rows (index, then the filter on the candidates) equal the filter over each whole file."""
    other = rest[0][0]
    for text, joiner in rest[1:]:
        other = f"({other}) {joiner} {text}"
    text = f"{lookup} AND ({other})" if first else f"({other}) AND {lookup}"
    snap = load_snapshot(two_files)
    predicate = parse_predicate(text, snap.schema)
    found = point_lookup(predicate)
    assert found is not None and not found.whole
    table = DeltaTable.forPath(None, two_files)
    for add in snap.files:
        got = executor.match_file(snap, add, predicate, all_columns=False).matched.tolist()
        whole = executor.match_file(snap, add, predicate, all_columns=False, lookup=None).matched.tolist()
        assert got == whole
    expected = table.toArrow().filter(parse_predicate_expression(text, snap.schema)).num_rows
    assert sum(len(executor.match_file(snap, a, predicate, all_columns=False).matched) for a in snap.files) == expected


def parse_predicate_expression(text: str, schema: StructType) -> Any:
    from dvengine.expressions import to_pyarrow_expression

    return to_pyarrow_expression(parse_predicate(text, schema))


def test_the_filter_runs_on_the_candidates_only(two_files: str, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = load_snapshot(two_files)
    sizes: list[int] = []
    real = executor.matching_positions
    monkeypatch.setattr(executor, "matching_positions", lambda t, p: sizes.append(t.num_rows) or real(t, p))
    predicate = parse_predicate("id = 7 AND x > 0", snap.schema)
    for add in snap.files:
        executor.match_file(snap, add, predicate, all_columns=False)
    assert sizes and max(sizes) < 40  # ~10 rows hold id 7 in each 400-row file


def test_a_conjunct_that_can_fail_keeps_the_error(tmp_path: Path) -> None:
    """``id = 1 AND x + 1 > 0`` overflows on a row whose id is not 1: the filter over the whole
    file raises it as before (narrowing to id = 1 would not have seen that row)."""
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64()), "x": pa.array([0, 2**31 - 1], pa.int32())}), root)
    with pytest.raises(DvengineError):
        DeltaTable.forPath(None, root).delete("id = 1 AND x + 1 > 0", engine="local")
    assert DeltaTable.forPath(None, root).toArrow().num_rows == 2


def test_delete_and_update_by_key_and_status_keep_the_model(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    rng = np.random.default_rng(8)
    users = [f"user-{i:04d}" for i in rng.integers(0, 60, 500)]
    status = [["new", "active", "gone", None][i] for i in rng.integers(0, 4, 500)]
    ids = list(range(500))
    dvengine.write(pa.table({"id": ids, "user": users, "status": status}), root,
                   configuration={"delta.autoOptimize.autoCompact": "false"})
    model = list(zip(ids, users, status, strict=True))
    t = DeltaTable.forPath(None, root)
    t.delete("user IN ('user-0003', 'user-0007') AND status = 'gone'", engine="local")
    model = [r for r in model if not (r[1] in ("user-0003", "user-0007") and r[2] == "gone")]
    t.update("user = 'user-0011' AND (status IS NULL OR status <> 'active')", {"status": "'closed'"}, engine="local")
    model = [(i, u, "closed" if u == "user-0011" and (s is None or s != "active") else s) for i, u, s in model]
    t.delete("id IN (1, 2, 3, 4, 5) AND user <> 'user-0001'", engine="local")
    model = [r for r in model if not (r[0] in (1, 2, 3, 4, 5) and r[1] != "user-0001")]

    expected = sort_rows(model)
    assert sort_rows([(r["id"], r["user"], r["status"]) for r in t.toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["id", "user", "status"]) == expected
    assert rows_duckdb(root, ["id", "user", "status"]) == expected
