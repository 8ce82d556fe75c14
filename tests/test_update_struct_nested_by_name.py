"""UPDATE stores struct values by field *name* at every depth, as Delta does (``castIfNeeded`` with
``resolveMergeUpdateStructsByName``): structs inside a struct value's fields, struct elements of
arrays, struct values of maps, another column whose nested fields come in another order, and
functions returning structs (``IF`` / ``CASE``), with a NULL struct staying NULL at each level.
Before, only the top level of a ``named_struct`` or a plain column was matched by name (a rewrite of
the SQL text); deeper structs went by position on Spark and were refused by the in-process
evaluator. Other field sets are refused with the table byte-for-byte unchanged.

Expected rows are written by hand (what Delta stores: each value in the field of its name) and
compared with the table as dvengine and delta-rs (QueryBuilder, DV-aware) read it, on both
executors (Spark also with the row plan, whose values ``engine/spark/struct_align`` rebuilds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SchemaMismatchError

XY = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.int32())])
YX = pa.struct([pa.field("y", pa.int32()), pa.field("x", pa.int32())])
S = pa.struct([pa.field("a", pa.int32()), pa.field("b", XY)])
R = pa.struct([pa.field("b", YX), pa.field("a", pa.int32())])  # s's fields, other order at both levels
OTHER = pa.struct([pa.field("a", pa.int32()), pa.field("c", pa.int32())])  # other fields: refused
COLUMNS = ["id", "s", "arr", "m"]
IDS = range(1, 11)


def _table(root: str) -> None:
    r = {2: {"b": {"y": 10, "x": 20}, "a": 30}, 3: {"b": None, "a": 31}, 4: None}
    rarr = {2: [{"y": 5, "x": 6}, None], 3: None}
    rm = {2: [("k", {"y": 5, "x": 6}), ("n", None)], 3: None}
    dvengine.write(pa.table({
        "id": pa.array(list(IDS), pa.int32()),
        "s": pa.array([{"a": i, "b": {"x": i, "y": -i}} for i in IDS], type=S),
        "r": pa.array([r.get(i, {"b": {"y": 0, "x": 0}, "a": 0}) for i in IDS], type=R),
        "o": pa.array([{"a": i, "c": i} for i in IDS], type=OTHER),
        "arr": pa.array([[{"x": i, "y": i}] for i in IDS], type=pa.list_(XY)),
        "rarr": pa.array([rarr.get(i, []) for i in IDS], type=pa.list_(YX)),
        "m": pa.array([[("k", {"x": i, "y": i})] for i in IDS], type=pa.map_(pa.string(), XY)),
        "rm": pa.array([rm.get(i, []) for i in IDS], type=pa.map_(pa.string(), YX)),
    }), root)


# (condition, set) run on both executors, and the rows they leave (by hand: fields matched by name)
BOTH: list[tuple[str, dict[str, str]]] = [
    ("id = 1", {"s": "named_struct('b', named_struct('y', 1, 'x', 2), 'a', 3)"}),
    ("id IN (2, 3, 4)", {"s": "r", "arr": "rarr", "m": "rm"}),
    ("id = 5", {"s": "IF(id = 5, named_struct('B', named_struct('Y', 9, 'x', 8), 'a', 7), NULL)"}),
    ("id = 6", {"s.b": "named_struct('y', 40, 'x', 41)"}),
    ("id = 7", {"s": "CASE WHEN id = 0 THEN named_struct('b', named_struct('y', 1, 'x', 1), 'a', 1) END"}),
    ("id = 8", {"s": "named_struct('b', NULL, 'a', 5)"}),
]
# array / map constructors: only Spark computes them (the in-process evaluator builds no lists)
SPARK_ONLY: list[tuple[str, dict[str, str]]] = [
    ("id = 9", {
        "arr": "array(named_struct('y', 1, 'x', 2), NULL)",
        "m": "map('k', named_struct('y', 3, 'x', 4), 'n', NULL)",
        "s": "IF(id = 9, named_struct('b', NULL, 'a', 1), NULL)",
    }),
    ("id = 10", {"s.b": "CASE WHEN id = 10 THEN struct(6 AS y, 5 AS x) END"}),
]


def _unchanged(i: int) -> tuple[Any, ...]:
    return (i, {"a": i, "b": {"x": i, "y": -i}}, [{"x": i, "y": i}], [("k", {"x": i, "y": i})])


def _expected(spark_only: bool) -> list[tuple[Any, ...]]:
    rows = {i: _unchanged(i) for i in IDS}
    rows[1] = (1, {"a": 3, "b": {"x": 2, "y": 1}}, *rows[1][2:])
    rows[2] = (2, {"a": 30, "b": {"x": 20, "y": 10}}, [{"x": 6, "y": 5}, None], [("k", {"x": 6, "y": 5}), ("n", None)])
    rows[3] = (3, {"a": 31, "b": None}, None, None)
    rows[4] = (4, None, [], [])
    rows[5] = (5, {"a": 7, "b": {"x": 8, "y": 9}}, *rows[5][2:])
    rows[6] = (6, {"a": 6, "b": {"x": 41, "y": 40}}, *rows[6][2:])
    rows[7] = (7, None, *rows[7][2:])
    rows[8] = (8, {"a": 5, "b": None}, *rows[8][2:])
    if spark_only:
        rows[9] = (9, {"a": 1, "b": None}, [{"x": 2, "y": 1}, None], [("k", {"x": 4, "y": 3}), ("n", None)])
        rows[10] = (10, {"a": 10, "b": {"x": 5, "y": 6}}, *rows[10][2:])
    return sort_rows(list(rows.values()))


def _check(root: str, spark_only: bool) -> None:
    expected = _expected(spark_only)
    assert rows_arrow(root, COLUMNS) == expected
    assert rows_delta_rs(root, COLUMNS) == expected


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_nested_struct_values_go_by_name_in_process(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    _table(root)
    table = DeltaTable.forPath(None, root)
    for condition, values in BOTH:
        assert table.updateMetrics(condition, values, engine="local", mode=mode)["executionEngine"] == "local"
    _check(root, spark_only=False)


@pytest.mark.parametrize("strategy", ["rows", "auto"])
def test_nested_struct_values_go_by_name_on_spark(spark: Any, tmp_path: Path, strategy: str) -> None:
    root = str(tmp_path / "t")
    _table(root)
    table = DeltaTable.forPath(spark, root)
    spark.conf.set("dvengine.spark.dmlStrategy", strategy)
    try:
        for condition, values in BOTH + SPARK_ONLY:
            assert table.updateMetrics(condition, values, engine="spark")["executionEngine"] == "spark"
    finally:
        spark.conf.unset("dvengine.spark.dmlStrategy")
    _check(root, spark_only=True)


REFUSED: list[dict[str, str]] = [
    {"s": "named_struct('b', named_struct('y', 1, 'z', 2), 'a', 3)"},  # an inner field the column lacks
    {"s": "named_struct('b', named_struct('y', 1), 'a', 3)"},  # an inner field missing
    {"s": "named_struct('a', 3)"},  # a top-level field missing
    {"s": "o"},  # another column with other fields
    {"s.b": "named_struct('x', 1, 'y', 2, 'z', 3)"},  # a nested assignment with an extra field
    {"s": "IF(id = 1, named_struct('b', named_struct('x', 1, 'y', 2), 'c', 3), NULL)"},  # through a function
]
SPARK_REFUSED: list[dict[str, str]] = [
    {"arr": "array(named_struct('x', 1))"},  # a struct element missing a field
    {"m": "map('k', named_struct('x', 1, 'y', 2, 'z', 3))"},  # a struct map value with an extra field
]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("values", REFUSED)
def test_other_struct_fields_are_refused_in_process(tmp_path: Path, values: dict[str, str]) -> None:
    root = tmp_path / "t"
    _table(str(root))
    before = _files(root)
    with pytest.raises(SchemaMismatchError, match=r"column 's'.*matched by field name"):
        DeltaTable.forPath(None, str(root)).update("id = 1", values, engine="local")
    assert _files(root) == before


def test_other_struct_fields_are_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(str(root))
    before = _files(root)
    table = DeltaTable.forPath(spark, str(root))
    for values in REFUSED + SPARK_REFUSED:
        column = next(iter(values)).split(".")[0]
        with pytest.raises(SchemaMismatchError, match=rf"column '{column}'.*matched by field name"):
            table.update("id = 1", values, engine="spark")
        assert _files(root) == before, values
