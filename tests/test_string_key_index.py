"""Point lookups on string keys through the hashed key index (engine/local/string_key_index.py).

Truth is independent of the index: the general Arrow filter path (``matching_positions``) and a
Python model of Spark's answer (byte-wise equality, NULL never TRUE); DML through the index is
checked against an in-memory model and read back by delta-rs and DuckDB."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import rows_delta_rs, rows_duckdb, sort_rows
from key_index_support import assert_general_path, fresh_column_cache  # noqa: F401 (autouse fixture)
from sqlglot import exp

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import column_cache, executor, key_lookup
from dvengine.engine.local.key_lookup import lookup_keys
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.engine.local.string_key_index import build_string_key_index, string_hashes
from dvengine.expressions import BoundPredicate, parse_predicate
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructType, from_arrow_schema


def _schema() -> StructType:
    return from_arrow_schema(pa.schema([("s", pa.string()), ("i", pa.int64()), ("d", pa.date32()), ("b", pa.binary())]))


def _sql(value: str) -> str:
    return str(exp.Literal.string(value).sql(dialect="spark"))


def _in_list(keys: list[str | None]) -> str:
    return f"s IN ({', '.join('NULL' if k is None else _sql(k) for k in keys)})"


# NUL bytes, an empty string, non-ASCII (2-, 3- and 4-byte UTF-8, a combining accent next to its
# precomposed twin), SQL quoting, and values past the hashed 128-byte prefix that share it
LONG = "x" * 130
NASTY = ["", "a", "a\x00", "\x00", "ab", "é", "e\u0301", "日本", "🙂", "O'Brien", "a\\b", LONG + "1", LONG + "2", LONG]
values = st.one_of(st.sampled_from(NASTY), st.text(max_size=10), st.uuids().map(str))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.one_of(st.none(), values), max_size=60),
    keys=st.lists(st.one_of(values, st.none()), min_size=1, max_size=5),
    sort=st.booleans(),
    cut=st.integers(0, 60),
    large=st.booleans(),
)
def test_index_rows_equal_the_filter_and_the_model(rows: list[str | None], keys: list[str | None], sort: bool, cut: int, large: bool) -> None:
    """Random columns (NULLs, duplicates, sorted or not, one or two chunks, string or large_string)
    and keys (absent ones, NULL): the index returns exactly the general filter's rows and the
    model's. Keys without NULL also go through ``s = 'x'`` when there is one."""
    if sort:
        rows = sorted(rows, key=lambda v: (v is None, (v or "").encode()))
    kind = pa.large_string() if large else pa.string()
    cut = min(cut, len(rows))
    column = pa.chunked_array([pa.array(rows[:cut], kind), pa.array(rows[cut:], kind)], type=kind)
    text = f"s = {_sql(keys[0])}" if len(keys) == 1 and keys[0] is not None else _in_list(keys)
    predicate = parse_predicate(text, _schema())
    lookup = point_lookup(predicate)
    assert lookup is not None and lookup.column == "s"
    assert sorted(lookup.keys.values.to_pylist()) == sorted({k for k in keys if k is not None})
    index = build_string_key_index(column)
    got = index.rows_of(column, lookup.keys.values, lookup.keys.searched).tolist()
    model = [i for i, v in enumerate(rows) if v is not None and v in keys]
    assert got == model
    assert got == executor.matching_positions(pa.table({"s": column}), predicate).tolist()
    present = sum(v is not None for v in rows)
    assert 8 * present <= index.nbytes <= 12 * present  # 8-byte hashes + 4-byte positions


def test_hashes_depend_on_the_bytes_only() -> None:
    """Chunking, slicing, and the large layout hash alike; values differing only past the hashed
    prefix collide by design (and are told apart by the exact check above)."""
    vals = ["", "a", "a\x00", "é", LONG + "1", None, LONG + "2"]
    whole = string_hashes(pa.array(vals))
    assert whole.tolist() == string_hashes(pa.array(vals, pa.large_string())).tolist()
    assert whole[2:].tolist() == string_hashes(pa.array(vals).slice(2)).tolist()
    assert len({whole[0], whole[1], whole[2], whole[3]}) == 4
    assert whole[4] == whole[6]


def test_values_sharing_the_hashed_prefix_are_told_apart() -> None:
    """Equal hashes are candidates, not answers: the exact check keeps only equal values."""
    column = pa.chunked_array([pa.array([LONG + "2", LONG + "1", LONG, LONG + "1", None, LONG + "3"])])
    index = build_string_key_index(column)

    def rows(keys: list[str]) -> list[int]:
        prepared = lookup_keys(pa.array(keys))
        assert prepared is not None
        return index.rows_of(column, prepared.values, prepared.searched).tolist()

    assert rows([LONG + "1"]) == [1, 3]
    assert rows([LONG + "4", LONG]) == [2]


def test_uuid_hashes_do_not_collide() -> None:
    keys = [str(uuid.UUID(int=int(x))) for x in np.random.default_rng(5).integers(0, 2**62, 100_000)]
    assert len(set(string_hashes(pa.array(keys)).tolist())) == len(set(keys))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("s = 'x'", ["x"]),
        ("'x' = s", ["x"]),
        ("s IN ('b', 'a', 'b', NULL)", ["a", "b"]),
        ("(s IN (NULL))", []),
        ("s = ''", [""]),
        ("s IN ('a') OR s = 'b'", ["a", "b"]),
    ],
)
def test_string_shapes(text: str, expected: list[str]) -> None:
    lookup = point_lookup(parse_predicate(text, _schema()))
    assert lookup is not None and lookup.column == "s" and sorted(lookup.keys.values.to_pylist()) == expected


@pytest.mark.parametrize(
    "text",
    [
        "s = 5",  # an implicit cast: the general path judges it
        "s IN ('a', 5)",
        "s = CAST('a' AS STRING)",
        "s NOT IN ('a')",
        "s = NULL",
        "s LIKE 'a'",
        "s IN ('a') OR s = 5",
        "upper(s) = 'A'",
        "i = 'a'",
        "i IN (1, '2')",
        "b = X'00'",
    ],
)
def test_other_string_shapes_take_the_general_path(text: str) -> None:
    assert_general_path(text, _schema())


def test_match_file_answers_string_lookups_from_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's first string lookup filters (no index is built: a one-off command would not
    repay it), the second builds the index, and from then on the filter is not called."""
    root = str(tmp_path / "t")
    vals: list[str | None] = [f"k{i % 37}" for i in range(499, -1, -1)]
    vals.append(None)
    dvengine.write(pa.table({"s": pa.array(vals), "i": pa.array(range(501), pa.int64())}), root)
    snap = load_snapshot(root)
    builds: list[int] = []
    real_build = key_lookup.build_string_key_index
    monkeypatch.setattr(key_lookup, "build_string_key_index", lambda c: builds.append(1) or real_build(c))
    filtered: list[int] = []
    real_filter = executor.matching_positions
    monkeypatch.setattr(executor, "matching_positions", lambda t, p: filtered.append(t.num_rows) or real_filter(t, p))
    for n, key in enumerate(("k3", "k36", "k3", "absent")):
        predicate: BoundPredicate = parse_predicate(f"s = '{key}'", snap.schema)
        m = executor.match_file(snap, snap.files[0], predicate, all_columns=False)
        assert m.matched.tolist() == [i for i, v in enumerate(vals) if v == key]
        assert (len(filtered), len(builds)) == ((1, 0) if n == 0 else (1, 1))


def test_no_string_index_without_the_column_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the cache off (budget 0) nothing remembers a lookup: every one filters, none builds."""
    monkeypatch.setenv(column_cache.ENV_BYTES, "0")
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"s": pa.array(["a", "b", "a"])}), root)
    snap = load_snapshot(root)
    monkeypatch.setattr(key_lookup, "build_string_key_index", lambda c: pytest.fail("an index was built"))
    for _ in range(3):
        m = executor.match_file(snap, snap.files[0], parse_predicate("s = 'a'", snap.schema), all_columns=False)
        assert m.matched.tolist() == [0, 2]


def _rows(keys: list[str | None], tag: str) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.string()), "v": pa.array([tag] * len(keys))})


@pytest.mark.parametrize("mode", [None, "name"])
def test_delete_update_merge_by_string_key_keep_the_model(tmp_path: Path, mode: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """DELETE / UPDATE / MERGE by string key on an unsorted file with NULL keys, empty and
    non-ASCII keys, and a sorted second file sharing some keys: the table equals the model, read
    back by dvengine, delta-rs and DuckDB; the string index answered the lookups."""
    builds: list[int] = []
    real = key_lookup.build_string_key_index
    monkeypatch.setattr(key_lookup, "build_string_key_index", lambda c: builds.append(1) or real(c))
    root = str(tmp_path / "t")
    rng = np.random.default_rng(11)
    config = {"delta.autoOptimize.autoCompact": "false"}
    if mode:
        config["delta.columnMapping.mode"] = mode
    uuids = [str(uuid.UUID(int=int(x))) for x in rng.integers(0, 2**62, 300)]
    first = [*uuids, "", "é", "日本", "🙂", None, None]
    rng.shuffle(first)  # type: ignore[arg-type]
    dvengine.write(_rows(first, "a"), root, configuration=config)
    second = sorted([uuids[0], uuids[0], uuids[1], "é", "zz", ""])
    dvengine.write(_rows(second, "b"), root, mode="append")
    model: list[tuple[str | None, str]] = [(k, "a") for k in first] + [(k, "b") for k in second]
    t = DeltaTable.forPath(None, root)

    def delete(text: str, gone: set[str]) -> None:
        nonlocal model
        t.delete(text, engine="local")
        model = [(k, v) for k, v in model if k is None or k not in gone]

    delete(f"k IN ('{uuids[0]}', '{uuids[5]}', 'not-there', NULL)", {uuids[0], uuids[5]})  # both files
    delete("k = 'é'", {"é"})
    delete(f"k IN ('{uuids[5]}', '')", {""})  # uuids[5] is already deleted: not counted again
    assert t.history(1)[0]["operationMetrics"]["numDeletedRows"] == "2"
    t.update(f"k = '{uuids[1]}'", {"v": "'u'"}, engine="local")
    model = [(k, "u" if k == uuids[1] else v) for k, v in model]
    assert builds, "the string index was not used"

    source = _rows([uuids[2], uuids[1], "日本", "new", "", None], "m")
    t.alias("t").merge(source, "t.k = s.k", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().withEngine("local").execute()
    matched = {uuids[2], uuids[1], "日本"}  # "" was deleted above: inserted again
    model = [(k, "m" if k in matched else v) for k, v in model] + [("new", "m"), ("", "m"), (None, "m")]

    expected = sort_rows(model)
    assert sort_rows([(r["k"], r["v"]) for r in t.toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["k", "v"]) == expected
    assert rows_duckdb(root, ["k", "v"]) == expected


@pytest.mark.parametrize("by_source", [False, True])
@pytest.mark.parametrize("key_type", [pa.string(), pa.date32()])
def test_merge_joins_only_the_rows_the_index_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_source: bool, key_type: pa.DataType) -> None:
    """Two MERGE rounds on a string or date key (a stream: the first round's lookups make the
    files' string indexes worth building). In the second round no file looked up before is
    joined whole unless a NOT MATCHED BY SOURCE clause needs the other rows; the table equals the model either
    way, read back by dvengine, delta-rs and DuckDB."""
    import datetime as dt

    def key(n: int | None) -> Any:
        if n is None:
            return None
        return f"key-{n:03d}-é" if pa.types.is_string(key_type) else dt.date(2024, 1, 1) + dt.timedelta(days=n)

    root = str(tmp_path / "t")
    config = {"delta.autoOptimize.autoCompact": "false"}
    files = [[7, 3, None, 9, 3, 1], [20, 21, 22], [40, 41, None]]  # unsorted with NULLs; sorted; another
    for i, ns in enumerate(files):
        table = pa.table({"k": pa.array([key(n) for n in ns], key_type), "v": [f"f{i}"] * len(ns)})
        dvengine.write(table, root, mode="append" if i else "error", configuration=config)
    model = [(key(n), f"f{i}") for i, ns in enumerate(files) for n in ns]
    whole_files: list[str] = []
    real = executor.physical_file
    monkeypatch.setattr(executor, "physical_file", lambda snap, add: whole_files.append(add.path) or real(snap, add))

    def merge(pairs: list[tuple[int | None, str]]) -> None:
        nonlocal model
        whole_files.clear()
        source = pa.table({"k": pa.array([key(n) for n, _ in pairs], key_type), "v": [v for _, v in pairs]})
        builder = (
            DeltaTable.forPath(None, root).alias("t").merge(source, "t.k = s.k", source_alias="s")
            .whenMatchedDelete("s.v = 'del'").whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll()
        )
        if by_source:
            builder = builder.whenNotMatchedBySourceUpdate("t.v = 'f1'", {"v": "'orphan'"})
        builder.withMode("dv").withEngine("local").execute()  # DVs: the files keep their paths
        new = {key(n): v for n, v in pairs if n is not None}
        present = {k for k, _ in model}
        updated = [(k, new.get(k, v)) for k, v in model if new.get(k) != "del"]
        if by_source:
            updated = [(k, "orphan" if v == "f1" and k not in new else v) for k, v in updated]
        model = updated + [(key(n), v) for n, v in pairs if n is None or key(n) not in present]

    first_files = {f.path for f in load_snapshot(root).files}
    merge([(3, "u"), (20, "u"), (41, "u"), (99, "i")])  # a first round over every file
    merge([(3, "u2"), (9, "del"), (21, "u"), (30, "i"), (30, "i"), (None, "n")])
    # the file the first round wrote is looked up for the first time: a string index waits for its
    # second lookup (test above); the files looked up before are narrowed
    assert bool(set(whole_files) & first_files) == by_source
    expected = sort_rows(model)
    assert sort_rows([(r["k"], r["v"]) for r in DeltaTable.forPath(None, root).toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["k", "v"]) == expected
    assert rows_duckdb(root, ["k", "v"]) == expected
