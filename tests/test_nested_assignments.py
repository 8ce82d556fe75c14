"""Assignments to nested struct fields in UPDATE and MERGE (``SET s.x = v``, ``SET t.s.inner.a = v``).

What Delta does (delta-io/delta master, ``UpdateExpressionsSupport.generateUpdateExpressions``,
``DeltaUpdateTable.getTargetColNameParts``, ``PreprocessTableMerge``): every struct holding an
assigned field is rebuilt as ``CreateNamedStruct`` of its fields in schema order, assigned fields
taking the (cast) value and the others their old value, so a NULL struct becomes a non-NULL one
whose unassigned fields are NULL. Fields inside arrays or maps are refused
(DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE), a struct assigned together with one of its fields, or
a target twice, too (DELTA_CONFLICT_SET_COLUMN), nested fields in a MERGE INSERT clause too
(DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION).

Truth: a plain-Python model of those rules over the same rows, compared with what dvengine,
delta-rs and DuckDB's delta extension read back; refusals leave the table folder byte-identical.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import folder_state
from interop import duckdb_delta_extension

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    ConflictingAssignmentError,
    ConstraintViolationError,
    NestedAssignmentError,
    NestedInsertAssignmentError,
    SchemaMismatchError,
    SchemaViolationError,
    UnresolvedColumnError,
)

INNER = pa.struct([("a", pa.int64()), ("b", pa.string())])
STRUCT = pa.struct([("x", pa.int32()), ("y", pa.string()), ("inner", INNER)])
SCHEMA = pa.schema([
    ("id", pa.int64()), ("s", STRUCT), ("l", pa.list_(pa.struct([("x", pa.int32())]))),
    ("m", pa.map_(pa.string(), pa.int64())),
])
ROWS: list[dict[str, Any]] = [
    {"id": 1, "s": {"x": 1, "y": "a", "inner": {"a": 10, "b": "p"}}, "l": [{"x": 1}], "m": [("k", 1)]},
    {"id": 2, "s": None, "l": None, "m": None},
    {"id": 3, "s": {"x": None, "y": None, "inner": None}, "l": [], "m": []},
    {"id": 4, "s": {"x": 4, "y": "d", "inner": {"a": None, "b": "q"}}, "l": None, "m": None},
]


def _table(tmp_path: Path, configuration: dict[str, str] | None = None, without_map: bool = False) -> str:
    """The table of ROWS; ``without_map`` drops the map column (Spark's MERGE row plan hashes every
    target column to spread rows, which Spark refuses for maps: a separate, older limitation)."""
    path = str(tmp_path / "t")
    data = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    dvengine.write(data.drop_columns(["m"]) if without_map else data, path, configuration=configuration or {})
    return path


def _set(row: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Delta's rebuild in the model: every struct on the way becomes non-NULL, other fields keep their value."""
    fields = {"s": ["x", "y", "inner"], "inner": ["a", "b"]}
    holder = row
    for name in path[:-1]:
        if holder[name] is None:
            holder[name] = dict.fromkeys(fields[name])
        holder = holder[name]
    holder[path[-1]] = value


def _model(update: Callable[[dict[str, Any]], None], where: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    out = []
    for row in copy.deepcopy(ROWS):
        if where(row):
            update(row)
        out.append(row)
    return out


def _normalized(rows: list[dict[str, Any]], columns: tuple[str, ...] = ("id", "s")) -> list[dict[str, Any]]:
    return sorted(({c: r[c] for c in columns} for r in rows), key=lambda r: r["id"])


def _read_all(path: str, columns: tuple[str, ...] = ("id", "s")) -> dict[str, list[dict[str, Any]]]:
    """The rows as dvengine, delta-rs and DuckDB (delta-kernel-rs) read them."""
    import duckdb
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    cols = ", ".join(f'"{c}"' for c in columns)
    rs = pa.table(QueryBuilder().register("t", RsTable(path)).execute(f"select {cols} from t").read_all())
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        con.execute(f"LOAD '{duckdb_delta_extension()}'")
        duck = con.execute(f"select {cols} from delta_scan('{path}')").fetch_arrow_table()
    finally:
        con.close()
    return {
        "dvengine": _normalized(DeltaTable.forPath(None, path).toArrow().to_pylist(), columns),
        "delta-rs": _normalized(rs.to_pylist(), columns),
        "duckdb": _normalized(duck.to_pylist(), columns),
    }


def _assert_readers(path: str, expected: list[dict[str, Any]], columns: tuple[str, ...] = ("id", "s")) -> None:
    want = _normalized(expected, columns)
    for reader, got in _read_all(path, columns).items():
        assert got == want, reader


# --- UPDATE ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mapping", [None, "name"])
def test_update_nested_fields_rebuilds_structs(tmp_path: Path, mapping: str | None) -> None:
    """Two fields of one struct, a deeper path, case-insensitive names, a NULL parent, a NULL leaf,
    a bigint value stored into an int field; under column mapping too (physical names differ)."""
    path = _table(tmp_path, {"delta.columnMapping.mode": mapping} if mapping else None)
    metrics = DeltaTable.forPath(None, path).update(
        "id <= 3", {"s.x": "id * 2", "S.Inner.A": "id + 100", "s.y": "NULL"}
    )
    assert (metrics["numUpdatedRows"], metrics["executionEngine"]) == (3, "local")

    def update(row: dict[str, Any]) -> None:
        _set(row, ("s", "x"), row["id"] * 2)
        _set(row, ("s", "inner", "a"), row["id"] + 100)
        _set(row, ("s", "y"), None)

    _assert_readers(path, _model(update, lambda r: r["id"] <= 3))


def test_update_nested_field_by_sql_text(tmp_path: Path) -> None:
    path = _table(tmp_path)
    dvengine.sql(None, f"UPDATE delta.`{path}` AS t SET t.s.inner.b = concat('n', id), s.x = 7 WHERE id IN (2, 4)")

    def update(row: dict[str, Any]) -> None:
        _set(row, ("s", "inner", "b"), f"n{row['id']}")
        _set(row, ("s", "x"), 7)

    _assert_readers(path, _model(update, lambda r: r["id"] in (2, 4)))


def test_update_nested_field_keeps_other_columns(tmp_path: Path) -> None:
    """The array and map columns next to the rebuilt struct are untouched."""
    path = _table(tmp_path)
    DeltaTable.forPath(None, path).update("id = 1", {"s.y": "'z'"})
    rows = {r["id"]: r for r in DeltaTable.forPath(None, path).toArrow().to_pylist()}
    assert rows[1]["s"] == {"x": 1, "y": "z", "inner": {"a": 10, "b": "p"}}
    assert (rows[1]["l"], rows[1]["m"]) == ([{"x": 1}], [("k", 1)])


@pytest.mark.parametrize(
    ("assignments", "error", "words"),
    [
        ({"l.x": "1"}, NestedAssignmentError, "array"),
        ({"m.k": "1"}, NestedAssignmentError, "map"),
        ({"id.x": "1"}, NestedAssignmentError, "not a struct"),
        ({"s.zz": "1"}, UnresolvedColumnError, "zz"),
        ({"nope.x": "1"}, UnresolvedColumnError, "nope"),
        ({"s": "s", "s.x": "1"}, ConflictingAssignmentError, "s.x"),
        ({"s.inner": "s.inner", "s.INNER.a": "1"}, ConflictingAssignmentError, "inner"),
        ({"s.x": "1", "S.X": "2"}, ConflictingAssignmentError, "twice"),
        ({"s.x": "id * 3000000000"}, SchemaViolationError, "does not fit column 's'"),  # ANSI store overflow
    ],
)
def test_update_refusals_leave_table_unchanged(
    tmp_path: Path, assignments: dict[str, str], error: type[Exception], words: str
) -> None:
    path = _table(tmp_path)
    before = folder_state(Path(path))
    with pytest.raises(error, match=words):
        DeltaTable.forPath(None, path).update("id = 1", assignments)
    assert folder_state(Path(path)) == before


def test_update_not_null_nested_field_under_null_parent(tmp_path: Path) -> None:
    """``s.x = 1`` on a NULL ``s`` builds ``{x: 1, y: NULL}``, which a NOT NULL ``y`` refuses (Delta
    checks ``s.y IS NOT NULL`` on the new struct); on a non-NULL ``s`` it is fine. The row with a
    NULL ``s`` is appended by delta-rs: Delta's writer (and dvengine's) refuses a NULL struct above
    a NOT NULL field (tests/test_null_struct_not_null_field.py), delta-rs 1.6 writes it."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    struct = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string(), nullable=False)])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", struct)])
    dvengine.write(pa.Table.from_pylist([{"id": 1, "s": {"x": 1, "y": "a"}}], schema=schema), path)
    write_deltalake(path, pa.Table.from_pylist([{"id": 2, "s": None}], schema=schema), mode="append")
    before = folder_state(Path(path))
    with pytest.raises(SchemaViolationError, match="s.y"):
        DeltaTable.forPath(None, path).update("id = 2", {"s.x": "1"})
    assert folder_state(Path(path)) == before
    # mode="dv": a copy-on-write rewrite of the file would carry the NULL struct over, which the
    # embedded writer cannot yet cast to a struct with a NOT NULL field (a separate, older problem)
    DeltaTable.forPath(None, path).update("id = 1", {"s.x": "5"}, mode="dv")
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    # read by delta-rs: dvengine's Arrow reader shares the writer's problem with a NULL struct
    # that has a NOT NULL field once the table has two files
    read = pa.table(QueryBuilder().register("t", RsTable(path)).execute("select id, s from t").read_all())
    assert _normalized(read.to_pylist()) == [{"id": 1, "s": {"x": 5, "y": "a"}}, {"id": 2, "s": None}]


def test_update_nested_field_recomputes_generated_column_and_checks_constraint(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dvengine.sql(None, f"CREATE TABLE delta.`{path}` (id BIGINT, s STRUCT<x: BIGINT, y: STRING>, "
                       "g BIGINT GENERATED ALWAYS AS (s.x * 10)) USING delta")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive CHECK (s.x > 0)")
    struct = pa.struct([("x", pa.int64()), ("y", pa.string())])
    data = pa.Table.from_pylist([{"id": 1, "s": {"x": 1, "y": "a"}}, {"id": 2, "s": {"x": 2, "y": "b"}}],
                                schema=pa.schema([("id", pa.int64()), ("s", struct)]))
    dvengine.write(data, path, mode="append")
    table = DeltaTable.forPath(None, path)
    table.update("id = 1", {"s.x": "s.x + 4"})
    # a whole struct value: the generation expression reads the field of the new struct
    table.update("id = 2", {"s": "named_struct('x', 3, 'y', 'w')"}, engine="local")
    got = sorted(table.toArrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["s"]["x"], r["g"]) for r in got] == [(1, 5, 50), (2, 3, 30)]
    before = folder_state(Path(path))
    with pytest.raises(ConstraintViolationError, match="positive"):
        table.update("id = 2", {"s.x": "-1"})
    with pytest.raises(ConstraintViolationError, match="positive"):
        table.update("id = 1", {"s.x": "NULL"})  # NULL is not TRUE
    assert folder_state(Path(path)) == before


# --- MERGE -----------------------------------------------------------------------------------------

SOURCE = pa.table({"key": pa.array([1, 2, 5], pa.int64()), "v": pa.array([11, 22, 55], pa.int64())})


@pytest.mark.parametrize("mapping", [None, "name"])
def test_merge_matched_and_not_matched_by_source_nested_updates(tmp_path: Path, mapping: str | None) -> None:
    path = _table(tmp_path, {"delta.columnMapping.mode": mapping} if mapping else None)
    metrics = (
        DeltaTable.forPath(None, path).alias("t").merge(SOURCE, "t.id = s.key", source_alias="s")
        .whenMatchedUpdate(set={"t.s.x": "s.v", "s.inner.b": "'matched'"})
        .whenNotMatchedBySourceUpdate(condition="t.id = 3", set={"S.Inner.a": "t.id * 1000"})
        .whenNotMatchedInsert(values={"id": "s.key", "s": "named_struct('x', 0, 'y', 'new', 'inner', NULL)"})
        .executeMetrics()
    )
    assert metrics["executionEngine"] == "local"
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (3, 1)
    source = {1: 11, 2: 22}

    def update(row: dict[str, Any]) -> None:
        if row["id"] in source:
            _set(row, ("s", "x"), source[row["id"]])
            _set(row, ("s", "inner", "b"), "matched")
        else:
            _set(row, ("s", "inner", "a"), row["id"] * 1000)

    expected = _model(update, lambda r: r["id"] in (1, 2, 3))
    expected.append({"id": 5, "s": {"x": 0, "y": "new", "inner": None}})
    _assert_readers(path, expected)


def test_merge_nested_update_by_sql_text(tmp_path: Path) -> None:
    path = _table(tmp_path)
    dvengine.sql(None, f"""MERGE INTO delta.`{path}` AS t USING (SELECT 2 AS key, 'two' AS name) AS src ON t.id = src.key
                           WHEN MATCHED THEN UPDATE SET t.s.y = src.name, t.s.inner.a = 2""")

    def update(row: dict[str, Any]) -> None:
        _set(row, ("s", "y"), "two")
        _set(row, ("s", "inner", "a"), 2)

    _assert_readers(path, _model(update, lambda r: r["id"] == 2))


@pytest.mark.parametrize(
    ("build", "error", "words"),
    [
        (lambda b: b.whenMatchedUpdate(set={"t.l.x": "1"}), NestedAssignmentError, "array"),
        (lambda b: b.whenMatchedUpdate(set={"m.k": "s.v"}), NestedAssignmentError, "map"),
        (lambda b: b.whenMatchedUpdate(set={"t.s.nope": "1"}), SchemaMismatchError, "nope"),
        (lambda b: b.whenMatchedUpdate(set={"t.s": "t.s", "t.s.x": "1"}), ConflictingAssignmentError, "t.s.x"),
        (lambda b: b.whenNotMatchedBySourceUpdate(set={"s.x": "1", "s.X": "2"}), ConflictingAssignmentError, "twice"),
        (lambda b: b.whenNotMatchedInsert(values={"id": "s.key", "s.x": "1"}), NestedInsertAssignmentError, "INSERT"),
    ],
)
def test_merge_refusals_leave_table_unchanged(
    tmp_path: Path, build: Callable[[Any], Any], error: type[Exception], words: str
) -> None:
    path = _table(tmp_path)
    before = folder_state(Path(path))
    with pytest.raises(error, match=words):
        build(DeltaTable.forPath(None, path).alias("t").merge(SOURCE, "t.id = s.key", source_alias="s")).execute()
    assert folder_state(Path(path)) == before


def test_merge_nested_field_recomputes_generated_column(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dvengine.sql(None, f"CREATE TABLE delta.`{path}` (id BIGINT, s STRUCT<x: BIGINT, y: STRING>, "
                       "g BIGINT GENERATED ALWAYS AS (s.x * 10)) USING delta")
    struct = pa.struct([("x", pa.int64()), ("y", pa.string())])
    data = pa.Table.from_pylist([{"id": 1, "s": {"x": 1, "y": "a"}}, {"id": 2, "s": None}],
                                schema=pa.schema([("id", pa.int64()), ("s", struct)]))
    dvengine.write(data, path, mode="append")
    (DeltaTable.forPath(None, path).alias("t").merge(SOURCE, "t.id = s.key", source_alias="s")
     .whenMatchedUpdate(set={"t.s.x": "s.v"}).withEngine("local").execute())
    got = sorted(DeltaTable.forPath(None, path).toArrow().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "s": {"x": 11, "y": "a"}, "g": 110}, {"id": 2, "s": {"x": 22, "y": None}, "g": 220}]
