"""MERGE stores struct values by field *name* for any value expression, at every depth, as Delta does
(``UpdateExpressionsSupport.castIfNeeded`` with ``resolveMergeUpdateStructsByName``, on by default):
a reordered ``named_struct`` in UPDATE SET and INSERT VALUES, structs nested in struct values, struct
elements of arrays and struct values of maps, ``IF`` / ``CASE`` returning structs, and a nested
assignment (``s.b``), with a NULL struct staying NULL at each level. Before, only a value that was a
plain source column was matched by name; any other expression was cast by position on Spark's row
plan (values stored in the wrong fields, or an analysis error when clauses gave structs of different
field orders) and not evaluated in-process. Other field sets are refused with
SchemaMismatchError naming the column, the table byte-for-byte unchanged.

Expected rows are written by hand (what Delta stores: each value in the field of its name) and
compared with the table as dvengine and delta-rs (QueryBuilder, DV-aware) read it: in-process, and on
Spark through the file tasks (``dvengine.spark.dmlStrategy=files``), the row plan (``rows``) and
``auto``."""

from __future__ import annotations

import hashlib
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
COLUMNS = ["id", "s", "arr", "m"]
TARGET_IDS = range(1, 9)
STRATEGY = "dvengine.spark.dmlStrategy"

# b<y, x> and s<b, a>: the column's fields in another order, at both levels
BA = "named_struct('b', named_struct('y', src.y, 'x', src.x), 'a', src.a)"


def _table(root: str) -> None:
    dvengine.write(pa.table({
        "id": pa.array(list(TARGET_IDS), pa.int32()),
        "s": pa.array([{"a": i, "b": {"x": i, "y": -i}} for i in TARGET_IDS], type=S),
        "arr": pa.array([[{"x": i, "y": i}] for i in TARGET_IDS], type=pa.list_(XY)),
        "m": pa.array([[("k", {"x": i, "y": i})] for i in TARGET_IDS], type=pa.map_(pa.string(), XY)),
    }), root)


def _source(rows: list[tuple[Any, ...]]) -> pa.Table:
    names = ["id", "a", "x", "y", "rarr", "rm"]
    types = [pa.int32(), pa.int32(), pa.int32(), pa.int32(), pa.list_(YX), pa.map_(pa.string(), YX)]
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(zip(names, types))})


RARR = [{"y": 5, "x": 6}, None]
RM = [("k", {"y": 7, "x": 8}), ("n", None)]
# (id, a, x, y, rarr, rm)
SOURCE = _source([
    (1, 101, 11, 12, None, None),
    (2, 102, 21, 22, RARR, RM),
    (3, 103, 31, 32, None, None),
    (4, 104, None, 42, None, None),
    (5, 105, 51, 52, None, None),
    (11, 111, 1, 2, RARR, RM),
    (12, None, 3, 4, None, None),
    (13, 113, 5, 6, None, None),
])


def _merge(table: DeltaTable, source: Any) -> Any:
    """Clauses the in-process evaluator computes too: every value an expression other than a plain column."""
    return (
        table.alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedUpdate("src.id = 1", {"s": BA})
        .whenMatchedUpdate("src.id = 2", {
            "s": "IF(src.a > 0, named_struct('B', named_struct('Y', src.y, 'x', src.x), 'a', src.a), NULL)",
            "arr": "IF(src.id = 2, src.rarr, NULL)",
            "m": "IF(src.id = 2, src.rm, NULL)",
        })
        .whenMatchedUpdate("src.id = 3", {
            "s": "CASE WHEN src.a < 0 THEN named_struct('b', named_struct('y', 1, 'x', 2), 'a', 3) END",
        })
        .whenMatchedUpdate("src.id = 4", {
            "s": "named_struct('b', IF(src.x IS NULL, NULL, named_struct('y', src.y, 'x', src.x)), 'a', src.a)",
        })
        .whenMatchedUpdate("src.id = 5", {"s.b": "named_struct('y', src.y, 'x', src.x)"})
        .whenNotMatchedInsert("src.id = 11", {"id": "src.id", "s": BA, "arr": "IF(src.id > 0, src.rarr, NULL)", "m": "src.rm"})
        .whenNotMatchedInsert(None, {
            "id": "src.id",
            "s": "CASE WHEN src.a IS NULL THEN NULL ELSE named_struct('b', named_struct('y', src.y, 'x', src.x), 'a', src.a) END",
        })
    )


# array / map constructors: only Spark computes them (the in-process evaluator builds no lists)
SPARK_SOURCE = _source([(6, 106, 61, 62, None, None), (14, 114, 71, 72, None, None)])


def _spark_only_merge(table: DeltaTable, source: Any) -> Any:
    return (
        table.alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedUpdate(None, {
            "arr": "array(named_struct('y', src.y, 'x', src.x), NULL)",
            "m": "map('k', named_struct('y', src.y, 'x', src.x), 'n', NULL)",
        })
        .whenNotMatchedInsert(None, {
            "id": "src.id",
            "s": "IF(src.id > 0, named_struct('b', NULL, 'a', src.a), NULL)",
            "arr": "array(named_struct('y', src.y, 'x', src.x))",
            "m": "map('k', named_struct('y', src.y, 'x', src.x))",
        })
    )


def _unchanged(i: int) -> tuple[Any, ...]:
    return (i, {"a": i, "b": {"x": i, "y": -i}}, [{"x": i, "y": i}], [("k", {"x": i, "y": i})])


def _expected(spark_only: bool) -> list[tuple[Any, ...]]:
    rows = {i: _unchanged(i) for i in TARGET_IDS}
    rows[1] = (1, {"a": 101, "b": {"x": 11, "y": 12}}, *rows[1][2:])
    rows[2] = (2, {"a": 102, "b": {"x": 21, "y": 22}}, [{"x": 6, "y": 5}, None], [("k", {"x": 8, "y": 7}), ("n", None)])
    rows[3] = (3, None, *rows[3][2:])
    rows[4] = (4, {"a": 104, "b": None}, *rows[4][2:])
    rows[5] = (5, {"a": 5, "b": {"x": 51, "y": 52}}, *rows[5][2:])
    rows[11] = (11, {"a": 111, "b": {"x": 1, "y": 2}}, [{"x": 6, "y": 5}, None], [("k", {"x": 8, "y": 7}), ("n", None)])
    rows[12] = (12, None, None, None)
    rows[13] = (13, {"a": 113, "b": {"x": 5, "y": 6}}, None, None)
    if spark_only:
        rows[6] = (6, rows[6][1], [{"x": 61, "y": 62}, None], [("k", {"x": 61, "y": 62}), ("n", None)])
        rows[14] = (14, {"a": 114, "b": None}, [{"x": 71, "y": 72}], [("k", {"x": 71, "y": 72})])
    return sort_rows(list(rows.values()))


def _check(root: str, spark_only: bool) -> None:
    expected = _expected(spark_only)
    assert rows_arrow(root, COLUMNS) == expected
    assert rows_delta_rs(root, COLUMNS) == expected


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_struct_values_go_by_name_in_process(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    _table(root)
    metrics = _merge(DeltaTable.forPath(None, root), SOURCE).withEngine("local").withMode(mode).executeMetrics()
    assert metrics["executionEngine"] == "local"
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (5, 3)
    _check(root, spark_only=False)


@pytest.mark.parametrize("strategy", ["files", "rows", "auto"])
def test_struct_values_go_by_name_on_spark(spark: Any, tmp_path: Path, strategy: str) -> None:
    """``files`` proves the file tasks ran (that strategy refuses a MERGE they cannot run), ``rows``
    the row plan; the array / map constructors need the row plan (``auto`` falls back to it)."""
    root = str(tmp_path / "t")
    _table(root)
    spark.conf.set(STRATEGY, strategy)
    try:
        table = DeltaTable.forPath(spark, root)
        metrics = _merge(table, spark.createDataFrame(SOURCE)).withEngine("spark").executeMetrics()
        assert metrics["executionEngine"] == "spark"
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (5, 3)
        if strategy != "files":
            spark_source = spark.createDataFrame(SPARK_SOURCE)
            assert _spark_only_merge(table, spark_source).withEngine("spark").executeMetrics()["executionEngine"] == "spark"
    finally:
        spark.conf.unset(STRATEGY)
    _check(root, spark_only=strategy != "files")


REFUSED: list[tuple[str, dict[str, str], str]] = [
    ("update", {"s": "named_struct('b', named_struct('y', 1, 'z', 2), 'a', 3)"}, "s"),  # an inner field the column lacks
    ("update", {"s": "named_struct('b', named_struct('y', src.y), 'a', src.a)"}, "s"),  # an inner field missing
    ("update", {"s": "IF(src.a > 0, named_struct('b', named_struct('x', 1, 'y', 2), 'c', 3), NULL)"}, "s"),  # through IF
    ("insert", {"id": "src.id", "s": "named_struct('a', src.a)"}, "s"),  # a top-level field missing
    ("insert", {"id": "src.id", "s": "named_struct('b', named_struct('y', 1, 'x', 2), 'a', 3, 'c', 4)"}, "s"),  # an extra field
]
# array / map constructors: Spark's row plan only (the file tasks strategy refuses them before)
SPARK_REFUSED: list[tuple[str, dict[str, str], str]] = [
    ("update", {"arr": "IF(src.id > 0, array(named_struct('x', 1)), NULL)"}, "arr"),  # an array element missing a field
    ("insert", {"id": "src.id", "m": "map('k', named_struct('x', 1, 'y', 2, 'z', 3))"}, "m"),  # a map value with an extra field
]


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def _refused_merge(table: DeltaTable, source: Any, clause: str, values: dict[str, str]) -> Any:
    builder = table.alias("t").merge(source, "t.id = src.id", source_alias="src")
    if clause == "update":
        return builder.whenMatchedUpdate(None, values)
    return builder.whenNotMatchedInsert(None, values)


@pytest.mark.parametrize(("clause", "values", "column"), REFUSED)
def test_other_struct_fields_are_refused_in_process(tmp_path: Path, clause: str, values: dict[str, str], column: str) -> None:
    root = tmp_path / "t"
    _table(str(root))
    before = _files(root)
    with pytest.raises(SchemaMismatchError, match=rf"column '{column}'.*matched by field name"):
        _refused_merge(DeltaTable.forPath(None, str(root)), SOURCE, clause, values).withEngine("local").execute()
    assert _files(root) == before


@pytest.mark.parametrize("strategy", ["files", "rows"])
def test_other_struct_fields_are_refused_on_spark(spark: Any, tmp_path: Path, strategy: str) -> None:
    root = tmp_path / "t"
    _table(str(root))
    before = _files(root)
    table = DeltaTable.forPath(spark, str(root))
    source = spark.createDataFrame(SOURCE)
    spark.conf.set(STRATEGY, strategy)
    try:
        for clause, values, column in REFUSED + (SPARK_REFUSED if strategy == "rows" else []):
            with pytest.raises(SchemaMismatchError, match=rf"column '{column}'.*matched by field name"):
                _refused_merge(table, source, clause, values).withEngine("spark").execute()
            assert _files(root) == before, values
    finally:
        spark.conf.unset(STRATEGY)


# Values Spark's cast takes by position without complaint (the outer fields in the column's order,
# the inner ones swapped, both INT): stored by position, x and y would trade places silently.
AB = "named_struct('a', src.a, 'b', named_struct('y', src.y, 'x', src.x))"
POSITION_SOURCE = _source([(1, 101, 11, 12, None, None), (21, 121, 13, 14, None, None)])


def _position_merge(table: DeltaTable, source: Any, lists: bool) -> Any:
    update, insert = {"s": AB}, {"id": "src.id", "s": AB}
    if lists:  # array / map constructors: Spark only
        update["arr"] = insert["arr"] = "array(named_struct('y', src.y, 'x', src.x))"
        update["m"] = insert["m"] = "map('k', named_struct('y', src.y, 'x', src.x))"
    return (
        table.alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedUpdate(None, update).whenNotMatchedInsert(None, insert)
    )


def _position_expected(lists: bool) -> list[tuple[Any, ...]]:
    rows = {i: _unchanged(i) for i in TARGET_IDS}
    rows[1] = (1, {"a": 101, "b": {"x": 11, "y": 12}}, *rows[1][2:])
    rows[21] = (21, {"a": 121, "b": {"x": 13, "y": 14}}, None, None)
    if lists:
        rows[1] = (1, rows[1][1], [{"x": 11, "y": 12}], [("k", {"x": 11, "y": 12})])
        rows[21] = (21, rows[21][1], [{"x": 13, "y": 14}], [("k", {"x": 13, "y": 14})])
    return sort_rows(list(rows.values()))


def test_a_reordered_inner_struct_is_not_stored_by_position_in_process(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _table(root)
    metrics = _position_merge(DeltaTable.forPath(None, root), POSITION_SOURCE, lists=False).withEngine("local").executeMetrics()
    assert metrics["executionEngine"] == "local"
    assert rows_arrow(root, COLUMNS) == _position_expected(lists=False)
    assert rows_delta_rs(root, COLUMNS) == _position_expected(lists=False)


@pytest.mark.parametrize(("strategy", "lists"), [("files", False), ("rows", False), ("rows", True), ("auto", True)])
def test_a_reordered_inner_struct_is_not_stored_by_position_on_spark(spark: Any, tmp_path: Path, strategy: str, lists: bool) -> None:
    root = str(tmp_path / "t")
    _table(root)
    spark.conf.set(STRATEGY, strategy)
    try:
        source = spark.createDataFrame(POSITION_SOURCE)
        metrics = _position_merge(DeltaTable.forPath(spark, root), source, lists).withEngine("spark").executeMetrics()
    finally:
        spark.conf.unset(STRATEGY)
    assert metrics["executionEngine"] == "spark"
    assert rows_arrow(root, COLUMNS) == _position_expected(lists)
    assert rows_delta_rs(root, COLUMNS) == _position_expected(lists)


def test_with_schema_evolution_fields_a_value_lacks_are_null(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """Under schema evolution Delta's ``castIfNeeded`` fills the column's fields a struct value lacks
    with NULL (``NULLIFY``), whatever the expression; without it the same MERGE is refused (above)."""
    engine, spark = merge_engine
    root = str(tmp_path / "t")
    _table(root)
    source = POSITION_SOURCE if spark is None else spark.createDataFrame(POSITION_SOURCE)
    lacking = "named_struct('b', named_struct('y', src.y), 'a', src.a)"
    metrics = (
        DeltaTable.forPath(spark, root).alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedUpdate(None, {"s": lacking}).whenNotMatchedInsert(None, {"id": "src.id", "s": lacking})
        .withSchemaEvolution().withEngine(engine).executeMetrics()
    )
    assert metrics["executionEngine"] == engine
    rows = {i: _unchanged(i) for i in TARGET_IDS}
    rows[1] = (1, {"a": 101, "b": {"x": None, "y": 12}}, *rows[1][2:])
    rows[21] = (21, {"a": 121, "b": {"x": None, "y": 14}}, None, None)
    assert rows_arrow(root, COLUMNS) == sort_rows(list(rows.values()))
    assert rows_delta_rs(root, COLUMNS) == sort_rows(list(rows.values()))
