"""Point lookups through the local executor's sorted key index (dvengine/engine/local/key_index.py):
the index answers exactly what numpy's ``isin`` answers; only exact predicate shapes take it; and
DELETE / MERGE through it keep the rows a model keeps, with deletion vectors, NULL keys, unsorted
and multi-file tables, narrow key types and column mapping (checked against delta-rs too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from interop import rows_delta_rs, sort_rows
from key_index_support import fresh_column_cache  # noqa: F401 (autouse fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import executor
from dvengine.engine.local.key_index import build_key_index
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructType, from_arrow_schema


@pytest.mark.parametrize("sorted_input", [True, False])
@pytest.mark.parametrize("nulls", [False, True])
def test_index_rows_equal_numpy_isin(sorted_input: bool, nulls: bool) -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(-50, 50, 2_000)  # many duplicates
    if sorted_input:
        values = np.sort(values)
    mask = rng.random(len(values)) < 0.1 if nulls else np.zeros(len(values), dtype=bool)
    column = pa.chunked_array([pa.array(values[:700], mask=mask[:700]), pa.array(values[700:], mask=mask[700:])])
    index = build_key_index(column)
    for keys in ([], [7], [-50, 0, 3, 49, 1000], list(range(-60, 60, 7))):
        wanted = np.unique(np.array(keys, dtype=np.int64))
        truth = np.flatnonzero(np.isin(values, wanted) & ~mask)
        assert index.rows_of(wanted).tolist() == truth.tolist()
    assert index.nbytes > 0


def _schema() -> StructType:
    return from_arrow_schema(pa.schema([("id", pa.int32()), ("s", pa.string()), ("d", pa.float64())]))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id IN (3, 1, 3, -2)", [-2, 1, 3]),
        ("id = 5", [5]),
        ("5 = id", [5]),
        ("(id IN (4, NULL))", [4]),
        ("id IN (2147483647)", [2147483647]),
        ("id = 1 OR id = 2", [1, 2]),
        ("(id = 7 OR (2 = id)) OR id IN (7, NULL, 0)", [0, 2, 7]),
    ],
)
def test_point_shapes(text: str, expected: list[int]) -> None:
    lookup = point_lookup(parse_predicate(text, _schema()))
    assert lookup is not None and lookup.column == "id" and lookup.keys.values.to_pylist() == expected


@pytest.mark.parametrize(
    "text",
    [
        "id NOT IN (1, 2)",
        "id IN (2147483648)",  # outside INT: the general path judges it
        "id = 1.5",
        "id = 1 OR s = 'a'",  # an OR over two columns
        "id = 1 OR id = NULL",
        "id = 1 OR id = 2147483648",
        "id = 1 OR id > 5",
        "d = 1",
        "id = NULL",
        "id + 0 = 3",
    ],
)
def test_other_shapes_take_the_general_path(text: str) -> None:
    assert point_lookup(parse_predicate(text, _schema())) is None


def _rows(ids: list[int | None], tag: str, key_type: pa.DataType) -> pa.Table:
    return pa.table({"id": pa.array(ids, key_type), "v": pa.array([tag] * len(ids))})


@pytest.mark.parametrize("mode", [None, "name"])
@pytest.mark.parametrize("key_type", [pa.int64(), pa.int16()])
def test_delete_and_merge_through_the_index_keep_the_model(tmp_path: Path, mode: str | None, key_type: pa.DataType) -> None:
    root = str(tmp_path / "t")
    rng = np.random.default_rng(11)
    config = {"delta.autoOptimize.autoCompact": "false"}
    if mode:
        config["delta.columnMapping.mode"] = mode
    model: list[tuple[int | None, str]] = []
    first = [int(x) for x in rng.permutation(300)] + [None, None]  # unsorted, with NULL keys
    dvengine.write(_rows(first, "a", key_type), root, configuration=config)
    model += [(k, "a") for k in first]
    second = [5, 5, 17, 400, 250, None]  # duplicates within and across files
    dvengine.write(_rows(second, "b", key_type), root, mode="append")
    model += [(k, "b") for k in second]
    t = DeltaTable.forPath(None, root)

    def delete(text: str, gone: set[int]) -> None:
        nonlocal model
        t.delete(text)
        model = [(k, v) for k, v in model if k is None or k not in gone]

    delete("id IN (3, 5, 299, 1000)", {3, 5, 299, 1000})  # DVs on both files
    delete("id = 17", {17})
    delete("id IN (3, 7)", {7})  # 3 is already deleted: not counted twice, not resurrected
    assert t.history(1)[0]["operationMetrics"]["numDeletedRows"] == "1"

    source = pa.table({"id": pa.array([7, 8, 400, 250, 1234, None], key_type), "v": ["m"] * 6})
    (t.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    matched = {8, 400, 250}  # 250: two target rows, both updated
    model = [(k, "m" if k in matched else v) for k, v in model] + [(7, "m"), (1234, "m"), (None, "m")]

    expected = sort_rows(model)
    got = sort_rows([(r["id"], r["v"]) for r in t.toArrow().to_pylist()])
    assert got == expected
    assert rows_delta_rs(root, ["id", "v"]) == expected


def test_the_index_is_built_once_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.engine.local import key_index, key_lookup

    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(50, 0, -1)), "a", pa.int64()), root)
    snap = load_snapshot(root)
    builds: list[int] = []
    real = key_index.build_key_index
    monkeypatch.setattr(key_lookup, "build_key_index", lambda c: builds.append(1) or real(c))
    for key in (3, 9, 3):
        m = executor.match_file(snap, snap.files[0], parse_predicate(f"id IN ({key})", snap.schema), all_columns=False)
        assert m.matched.tolist() == [50 - key]
    assert len(builds) == 1
