"""MERGE schema evolution that adds nested struct fields, as delta-spark does it
(``ResolveDeltaMergeInto`` / ``SchemaMergingUtils.mergeSchemas`` for the schema,
``UpdateExpressionsSupport.castIfNeeded`` for the values; MergeIntoNestedStructEvolutionTests).

Truth is an in-memory model of Delta's rules, written here from the inputs: structs are matched
by name; new fields are appended inside their struct (also inside arrays); INSERT * and a whole
struct assignment fill fields the source lacks with NULL, UPDATE SET * with the row's own
value; a NULL source struct stays NULL (under UPDATE SET * only when the row's struct is NULL
too); rows the MERGE does not write read the new fields as NULL. Every table is read back by
dvengine, delta-rs and DuckDB; refusals leave the folder byte-for-byte as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from interop import assert_all_readers, rows_delta_rs, rows_duckdb, rows_spark

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SchemaMismatchError, SchemaViolationError
from dvengine.log import load_snapshot

XY = pa.struct([("x", pa.int64()), ("y", pa.string())])
ZX = pa.struct([("z", pa.bool_()), ("X", pa.int64())])  # reordered, another case, lacks y, brings z
TARGET = {1: {"x": 1, "y": "a"}, 2: {"x": 2, "y": "b"}, 3: None, 4: {"x": 4, "y": "d"}, 5: None}
SOURCE = {2: {"z": True, "X": 20}, 3: {"z": False, "X": 30}, 4: None, 5: None, 6: {"z": True, "X": 60}, 7: None}


def _folder_state(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _write_target(path: Path) -> None:
    dvengine.write(pa.table({"id": list(TARGET), "s": pa.array(list(TARGET.values()), XY)}), str(path))


def _source() -> pa.Table:
    return pa.table({"id": list(SOURCE), "s": pa.array(list(SOURCE.values()), ZX)})


def _from_source(src: dict[str, Any] | None, own: dict[str, Any] | None, keep_own: bool) -> dict[str, Any] | None:
    """The struct Delta writes from a source struct ``src`` (fields z, X) into s<x, y, z>."""
    if src is None and (not keep_own or own is None):
        return None
    y = own["y"] if keep_own and own is not None else None
    return {"x": None if src is None else src["X"], "y": y, "z": None if src is None else src["z"]}


def _model(keep_own: bool) -> list[tuple[Any, ...]]:
    rows = {}
    for key, own in TARGET.items():
        if key in SOURCE:
            rows[key] = _from_source(SOURCE[key], own, keep_own)
        else:
            rows[key] = None if own is None else {**own, "z": None}
    for key, src in SOURCE.items():
        if key not in TARGET:
            rows[key] = _from_source(src, None, False)
    return [(k, v) for k, v in rows.items()]


def _read_all(path: Path, columns: list[str], expected: list[tuple[Any, ...]]) -> None:
    assert_all_readers(None, path, columns, expected, skip=("dvengine spark",))


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_update_all_and_insert_all_add_a_nested_field(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _write_target(path)
    metrics = (
        DeltaTable.forPath(None, path).alias("t").merge(_source(), "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().withMode(mode).executeMetrics()
    )
    assert metrics["executionEngine"] == "local" and metrics["version"] == 1
    assert metrics["numTargetDeletionVectorsAdded"] == (1 if mode == "dv" else 0)
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (4, 2)
    assert load_snapshot(str(path)).schema.get("s").type.simple_string() == "struct<x:long,y:string,z:boolean>"
    _read_all(path, ["id", "s"], _model(keep_own=True))
    # one commit: the MERGE with the new metaData
    commit = [json.loads(line) for line in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    assert [a["commitInfo"]["operation"] for a in commit if "commitInfo" in a] == ["MERGE"]
    schema = json.loads(next(a["metaData"]["schemaString"] for a in commit if "metaData" in a))
    s_type = next(f["type"] for f in schema["fields"] if f["name"] == "s")
    assert [(f["name"], f["type"], f["nullable"]) for f in s_type["fields"]] == [
        ("x", "long", True), ("y", "string", True), ("z", "boolean", True)
    ]


def test_whole_struct_assignment_adds_the_field_and_nulls_what_the_source_lacks(tmp_path: Path) -> None:
    """``set={"s": "s.s"}`` keeps the source's s whole (Delta's filterSchema); its values are cast
    with NULLIFY: y, which the source lacks, is NULL even in updated rows."""
    path = tmp_path / "t"
    _write_target(path)
    (
        DeltaTable.forPath(None, path).alias("t").merge(_source(), "t.id = s.id", source_alias="s")
        .whenMatchedUpdate(set={"s": "s.s"}).whenNotMatchedInsert(values={"id": "s.id", "t.s": "s.s"})
        .withSchemaEvolution().executeMetrics()
    )
    _read_all(path, ["id", "s"], _model(keep_own=False))


def test_two_levels_deep_and_structs_inside_arrays_and_maps(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """On Spark the row plan runs (dvengine.spark.dmlStrategy=rows): transform / transform_values there."""
    engine, spark = merge_engine
    path = tmp_path / "t"
    inner = pa.struct([("p", pa.int64())])
    s_old = pa.struct([("a", pa.int64()), ("inner", inner)])
    k_old = pa.list_(pa.struct([("k", pa.int64())]))
    m_old = pa.map_(pa.string(), pa.struct([("a", pa.int64())]))
    target: list[dict[str, Any]] = [
        {"id": 1, "s": {"a": 1, "inner": {"p": 10}}, "arr": [{"k": 1}, None], "m": [("x", {"a": 1}), ("y", None)]},
        {"id": 2, "s": {"a": 2, "inner": None}, "arr": None, "m": None},
        {"id": 3, "s": {"a": 3, "inner": {"p": 30}}, "arr": [], "m": []},
    ]
    old_schema = pa.schema([("id", pa.int64()), ("s", s_old), ("arr", k_old), ("m", m_old)])
    dvengine.write(pa.Table.from_pylist(target, old_schema), str(path))
    inner_new = pa.struct([("p", pa.int64()), ("q", pa.string())])
    s_new = pa.struct([("a", pa.int64()), ("inner", inner_new), ("b", pa.string())])
    k_new = pa.list_(pa.struct([("k", pa.int64()), ("v", pa.string())]))
    m_new = pa.map_(pa.string(), pa.struct([("b", pa.string()), ("a", pa.int64())]))
    source: list[dict[str, Any]] = [
        {"id": 2, "s": {"a": 20, "inner": {"p": 200, "q": "q2"}, "b": "b2"}, "arr": [{"k": 2, "v": "v2"}],
         "m": [("z", {"b": "bz", "a": 2})]},
        {"id": 4, "s": {"a": 40, "inner": None, "b": "b4"}, "arr": [None, {"k": 4, "v": None}], "m": [("w", None)]},
    ]
    src_arrow = pa.Table.from_pylist(source, pa.schema([("id", pa.int64()), ("s", s_new), ("arr", k_new), ("m", m_new)]))
    src = src_arrow if spark is None else spark.createDataFrame(src_arrow).alias("s")
    if spark is not None:
        spark.conf.set("dvengine.spark.dmlStrategy", "rows")
    try:
        metrics = (
            DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().withEngine(engine).executeMetrics()
        )
    finally:
        if spark is not None:
            spark.conf.unset("dvengine.spark.dmlStrategy")
    assert metrics["executionEngine"] == engine
    schema = load_snapshot(str(path)).schema
    assert schema.get("s").type.simple_string() == "struct<a:long,inner:struct<p:long,q:string>,b:string>"
    assert schema.get("arr").type.simple_string() == "array<struct<k:long,v:string>>"
    assert schema.get("m").type.simple_string() == "map<string,struct<a:long,b:string>>"

    def entries(m: list[tuple[str, Any]] | None) -> list[tuple[str, Any]] | None:
        return None if m is None else [(k, None if v is None else {"a": v["a"], "b": v.get("b")}) for k, v in m]

    def widened(row: dict[str, Any]) -> tuple[Any, ...]:
        s = row["s"]
        inner_value = None if s["inner"] is None else {**s["inner"], "q": None}
        arr = None if row["arr"] is None else [None if e is None else {**e, "v": None} for e in row["arr"]]
        return (row["id"], {**s, "inner": inner_value, "b": None}, arr, entries(row["m"]))

    by_id = {r["id"]: widened(r) for r in target}
    by_id.update({r["id"]: (r["id"], r["s"], r["arr"], entries(r["m"])) for r in source})
    _read_all(path, ["id", "s", "arr", "m"], list(by_id.values()))


def test_new_nested_fields_on_a_column_mapped_table_get_ids_and_physical_names(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(
        str(path), pa.table({"id": [1, 2], "s": pa.array([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}], XY)}),
        configuration={"delta.columnMapping.mode": "name"},
    )
    before = load_snapshot(str(path))
    max_id = int(before.configuration["delta.columnMapping.maxColumnId"])
    src = pa.table({"id": [2, 3], "s": pa.array([{"z": True, "X": 20}, {"z": False, "X": 30}], ZX)})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
    )
    after = load_snapshot(str(path))
    old_s, new_s = before.schema.get("s"), after.schema.get("s")
    assert isinstance(new_s.type, type(old_s.type))
    z = new_s.type.get("z")  # type: ignore[union-attr]
    assert z.field_id == max_id + 1 and z.physical_name.startswith("col-")
    assert after.configuration["delta.columnMapping.maxColumnId"] == str(max_id + 1)
    assert new_s.physical_name == old_s.physical_name and new_s.field_id == old_s.field_id
    _read_all(path, ["id", "s"], [
        (1, {"x": 1, "y": "a", "z": None}), (2, {"x": 20, "y": "b", "z": True}), (3, {"x": 30, "y": None, "z": False})
    ])


def test_without_evolution_a_wider_source_struct_is_refused_and_the_table_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _write_target(path)
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError, match="'s'"):
        (
            DeltaTable.forPath(None, path).alias("t").merge(_source(), "t.id = s.id", source_alias="s")
            .whenNotMatchedInsertAll().executeMetrics()
        )
    assert _folder_state(path) == before


def test_incompatible_nested_types_are_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _write_target(path)
    before = _folder_state(path)
    bad = pa.table({"id": [1], "s": pa.array([{"x": {"deep": 1}, "y": "a"}], pa.struct([("x", pa.struct([("deep", pa.int64())])), ("y", pa.string())]))})
    with pytest.raises(SchemaMismatchError, match="s.x"):
        (
            DeltaTable.forPath(None, path).alias("t").merge(bad, "t.id = s.id", source_alias="s")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
        )
    assert _folder_state(path) == before


def test_reordered_struct_fields_are_matched_by_name_without_evolution(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """Delta casts MERGE structs by name (resolveMergeUpdateStructsByName), not by position as Spark's CAST."""
    engine, spark = merge_engine
    path = tmp_path / "t"
    _write_target(path)
    yx = pa.struct([("Y", pa.string()), ("x", pa.int64())])
    rows = [(1, {"Y": "one", "x": 100}), (9, {"Y": "nine", "x": 900})]
    arrow = pa.table({"id": [r[0] for r in rows], "s": pa.array([r[1] for r in rows], yx)})
    src = arrow if spark is None else spark.createDataFrame(arrow.to_pandas()).alias("s")
    metrics = (
        DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withEngine(engine).executeMetrics()
    )
    assert metrics["executionEngine"] == engine
    expected = dict(TARGET)
    expected.update({k: {"x": v["x"], "y": v["Y"]} for k, v in rows})
    _read_all(path, ["id", "s"], list(expected.items()))


def test_nested_evolution_on_the_spark_executor(spark: Any, tmp_path: Path) -> None:
    """The Spark row plan (dvengine.spark.dmlStrategy=rows) gives the model's rows too."""
    path = tmp_path / "t"
    _write_target(path)
    src = spark.createDataFrame(
        [(k, None if v is None else (v["z"], v["X"])) for k, v in SOURCE.items()], "id long, s struct<z: boolean, X: long>"
    ).alias("s")
    spark.conf.set("dvengine.spark.dmlStrategy", "rows")
    try:
        metrics = (
            DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().withEngine("spark").executeMetrics()
        )
    finally:
        spark.conf.unset("dvengine.spark.dmlStrategy")
    assert metrics["executionEngine"] == "spark" and metrics["version"] == 1
    expected = _model(keep_own=True)
    _read_all(path, ["id", "s"], expected)
    got = [(r[0], None if r[1] is None else r[1].asDict()) for r in rows_spark(spark, path, ["id", "s"])]
    assert sorted(got, key=lambda r: r[0]) == sorted(expected, key=lambda r: r[0])


def test_structs_inside_map_values_evolve_and_keep_null_entries(tmp_path: Path) -> None:
    path = tmp_path / "t"
    old = pa.map_(pa.string(), pa.struct([("a", pa.int64())]))
    new = pa.map_(pa.string(), pa.struct([("b", pa.string()), ("a", pa.int64())]))
    target = {1: [("k", {"a": 1})], 2: None}
    source = {2: [("q", {"b": "x", "a": 2}), ("r", None)], 3: []}
    dvengine.write(pa.table({"id": list(target), "m": pa.array(list(target.values()), old)}), str(path))
    src = pa.table({"id": list(source), "m": pa.array(list(source.values()), new)})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
    )
    assert load_snapshot(str(path)).schema.get("m").type.simple_string() == "map<string,struct<a:long,b:string>>"

    def entries(m: list[tuple[str, Any]] | None, fill: bool) -> list[tuple[str, Any]] | None:
        if m is None:
            return None
        return [(k, None if v is None else ({**v, "b": None} if fill else {"a": v["a"], "b": v["b"]})) for k, v in m]

    expected = {k: entries(v, True) for k, v in target.items()}
    expected.update({k: entries(v, False) for k, v in source.items()})
    got = {r["id"]: r["m"] for r in DeltaTable.forPath(None, path).toArrow().to_pylist()}
    assert got == expected
    for read in (rows_delta_rs, rows_duckdb):
        assert {k: (None if m is None else [tuple(e) for e in m]) for k, m in read(path, ["id", "m"])} == expected


def test_a_nested_field_is_widened_when_the_table_allows_type_widening(tmp_path: Path) -> None:
    path = tmp_path / "t"
    narrow = pa.struct([("x", pa.int32())])
    dvengine.write(pa.table({"id": [1], "s": pa.array([{"x": 1}], narrow)}), str(path), configuration={"delta.enableTypeWidening": "true"})
    wide = pa.struct([("x", pa.int64()), ("w", pa.string())])
    src = pa.table({"id": [1, 2], "s": pa.array([{"x": 2**40, "w": "n"}, {"x": 5, "w": None}], wide)})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
    )
    x = load_snapshot(str(path)).schema.get("s").type.get("x")  # type: ignore[union-attr]
    assert x.type.simple_string() == "long"
    assert x.metadata["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    # delta-rs does not read typeWidening tables yet
    assert_all_readers(None, path, ["id", "s"], [(1, {"x": 2**40, "w": "n"}), (2, {"x": 5, "w": None})],
                       skip=("dvengine spark", "delta-rs"))


def test_a_nested_value_that_overflows_its_field_is_refused_naming_it(tmp_path: Path) -> None:
    """Without type widening the field keeps its type (implicit cast, as Delta's mergeSchemas
    with allowImplicitConversions) and a value that does not fit fails the store assignment."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1], "s": pa.array([{"x": 1}], pa.struct([("x", pa.int32())]))}), str(path))
    before = _folder_state(path)
    src = pa.table({"id": [1], "s": pa.array([{"x": 2**40, "w": "n"}], pa.struct([("x", pa.int64()), ("w", pa.string())]))})
    with pytest.raises(SchemaViolationError, match="'s.x'"):
        (
            DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
            .whenMatchedUpdateAll().withSchemaEvolution().executeMetrics()
        )
    assert _folder_state(path) == before


def test_a_not_null_nested_field_the_source_lacks_is_refused_on_insert(tmp_path: Path) -> None:
    """Delta enforces NOT NULL on fields of (non-array, non-map) structs: an insert whose source
    struct lacks such a field would write NULL into it."""
    path = tmp_path / "t"
    strict = pa.struct([pa.field("x", pa.int64(), nullable=False), ("y", pa.string())])
    dvengine.write(pa.table({"id": [1], "s": pa.array([{"x": 1, "y": "a"}], strict)}), str(path))
    before = _folder_state(path)
    src = pa.table({"id": [2], "s": pa.array([{"y": "b", "z": True}], pa.struct([("y", pa.string()), ("z", pa.bool_())]))})
    with pytest.raises(SchemaViolationError, match="s.x"):
        (
            DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
            .whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
        )
    assert _folder_state(path) == before


def test_a_not_null_nested_field_the_source_lacks_is_refused_on_the_spark_row_plan(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    strict = pa.struct([pa.field("x", pa.int64(), nullable=False), ("y", pa.string())])
    dvengine.write(pa.table({"id": [1], "s": pa.array([{"x": 1, "y": "a"}], strict)}), str(path))
    before = _folder_state(path)
    src = spark.createDataFrame([(2, ("b", True))], "id long, s struct<y: string, z: boolean>").alias("s")
    spark.conf.set("dvengine.spark.dmlStrategy", "rows")
    try:
        with pytest.raises(SchemaViolationError, match="NOT NULL field 'x'"):
            (
                DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id")
                .whenNotMatchedInsertAll().withSchemaEvolution().withEngine("spark").executeMetrics()
            )
    finally:
        spark.conf.unset("dvengine.spark.dmlStrategy")
    assert _folder_state(path) == before
