"""Schema evolution, re-expressing delta-spark's tests: write options ``mergeSchema``,
``overwriteSchema``, ``replaceWhere`` and the auto-merge conf (DeltaSuite / DeltaOptionSuite /
the replaceWhere suites), and MERGE ``withSchemaEvolution()`` (python/delta/tests/test_deltatable.py
``test_merge`` "Schema evolution", MergeIntoSchemaEvolutionCoreTests).

Every result is read back by delta-rs and DuckDB (and dvengine's own readers) and compared with
rows computed here from the inputs; every refused write must leave the table byte-for-byte as it
was (same log, same files).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from interop import assert_all_readers, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.commands.write_options import CONF_AUTO_MERGE
from dvengine.errors import InvalidArgumentError, SchemaMismatchError, SchemaViolationError
from dvengine.log import load_snapshot

ENGINES = ["arrow", "spark"]
AUTO_MERGE_ENV = "SPARK_DATABRICKS_DELTA_SCHEMA_AUTOMERGE_ENABLED"


def _folder_state(root: Path) -> dict[str, bytes]:
    """Every file under the table folder with its bytes: a refused write must change none of them."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def writer(request: pytest.FixtureRequest) -> Callable[..., int]:
    """``dvengine.write`` with Arrow data, either in-process or through Spark (param: engine)."""
    engine = request.param
    if engine == "arrow":
        return dvengine.write
    spark = request.getfixturevalue("spark")

    def write_spark(data: pa.Table, path: str, **kwargs: Any) -> int:
        return dvengine.write(spark.createDataFrame(data), path, spark=spark, **kwargs)

    return write_spark


def _readers(path: Path, columns: list[str], expected: list[tuple[Any, ...]]) -> None:
    assert_all_readers(None, path, columns, expected, skip=("dvengine spark",))


@pytest.fixture
def auto_merge_env() -> Iterator[None]:
    os.environ[AUTO_MERGE_ENV] = "true"
    try:
        yield
    finally:
        del os.environ[AUTO_MERGE_ENV]


# --- writes: mergeSchema -------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_append_with_a_new_column_needs_merge_schema_and_leaves_the_table_unchanged(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer(pa.table({"id": [1, 2], "v": ["a", "b"]}), str(path))
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError, match="not in the table \\['x'\\]"):
        writer(pa.table({"id": [3], "v": ["c"], "x": [1.5]}), str(path), mode="append")
    assert _folder_state(path) == before


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_merge_schema_appends_new_columns_nullable_and_old_rows_read_null(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    first = pa.table({"id": [1, 2], "v": ["a", "b"]})
    second = pa.table({"x": [1.5, None], "id": [3, 4], "v": ["c", "d"]})  # new column first: order comes from the table
    writer(first, str(path))
    version = writer(second, str(path), mode="append", mergeSchema=True)
    assert version == 1
    schema = load_snapshot(str(path)).schema
    assert schema.field_names == ["id", "v", "x"]
    assert schema.get("x").nullable and schema.get("x").type.simple_string() == "double"
    expected = [(r["id"], r["v"], None) for r in first.to_pylist()] + [(r["id"], r["v"], r["x"]) for r in second.to_pylist()]
    _readers(path, ["id", "v", "x"], expected)
    # Then data without the new column: it reads as NULL (Delta allows a subset with mergeSchema).
    writer(pa.table({"id": [5], "v": ["e"]}), str(path), mode="append", mergeSchema="true")
    _readers(path, ["id", "v", "x"], [*expected, (5, "e", None)])


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_merge_schema_refuses_a_type_change_naming_column_and_both_types(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}), str(path))
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError, match="'id'.*table has type long and the data string.*typeWidening"):
        writer(pa.table({"id": ["1"], "v": ["b"], "x": [1]}), str(path), mode="append", mergeSchema=True)
    assert _folder_state(path) == before


def test_merge_schema_keeps_a_wider_int32_column_and_refuses_widening_it(tmp_path: Path) -> None:
    """Parquet stores byte/short/int alike: narrower data fits the table's type (Delta keeps it);
    data wider than the table would change the table's type, which needs typeWidening."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"n": pa.array([1], pa.int32())}), str(path))
    dvengine.write(pa.table({"n": pa.array([2], pa.int16()), "x": [True]}), str(path), mode="append", mergeSchema=True)
    assert load_snapshot(str(path)).schema.get("n").type.simple_string() in ("int", "integer")
    _readers(path, ["n", "x"], [(1, None), (2, True)])
    small = tmp_path / "s"
    dvengine.write(pa.table({"n": pa.array([1], pa.int16())}), str(small))
    before = _folder_state(small)
    with pytest.raises(SchemaMismatchError, match="'n'.*short.*int"):
        dvengine.write(pa.table({"n": pa.array([2], pa.int32())}), str(small), mode="append", mergeSchema=True)
    assert _folder_state(small) == before


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_merge_schema_adds_nested_struct_fields(writer: Any, tmp_path: Path) -> None:
    """New nested fields are appended inside the struct; the data's field order does not matter
    (Spark casts structs by position, so the writer must match them by name)."""
    path = tmp_path / "t"
    writer(pa.table({"id": [1], "s": pa.array([{"a": 1, "c": 1.0}])}), str(path))
    writer(pa.table({"id": [2], "s": pa.array([{"b": "x", "a": 2}])}), str(path), mode="append", mergeSchema=True)
    assert load_snapshot(str(path)).schema.get("s").type.simple_string() == "struct<a:long,c:double,b:string>"
    _readers(path, ["id", "s"], [(1, {"a": 1, "c": 1.0, "b": None}), (2, {"a": 2, "c": None, "b": "x"})])


def test_auto_merge_env_var_enables_merge_schema_without_a_session(tmp_path: Path, auto_merge_env: None) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1]}), str(path))
    dvengine.write(pa.table({"id": [2], "x": ["n"]}), str(path), mode="append")
    _readers(path, ["id", "x"], [(1, None), (2, "n")])
    # an explicit mergeSchema=False wins over the conf
    with pytest.raises(SchemaMismatchError):
        dvengine.write(pa.table({"id": [3], "y": ["n"]}), str(path), mode="append", mergeSchema=False)


def test_auto_merge_spark_conf_enables_merge_schema(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(spark.createDataFrame([(1,)], "id long"), str(path))
    spark.conf.set(CONF_AUTO_MERGE, "true")
    try:
        dvengine.write(spark.createDataFrame([(2, "n")], "id long, x string"), str(path), mode="append")
    finally:
        spark.conf.unset(CONF_AUTO_MERGE)
    assert_all_readers(spark, path, ["id", "x"], [(1, None), (2, "n")])


@pytest.mark.parametrize("value", ["yes", 1, "on"])
def test_bad_option_values_are_refused_naming_the_option(tmp_path: Path, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="mergeSchema"):
        dvengine.write(pa.table({"id": [1]}), str(tmp_path / "t"), mergeSchema=value)
    assert not (tmp_path / "t").exists()


def test_merge_schema_on_a_column_mapped_table_assigns_ids_and_physical_names(spark: Any, tmp_path: Path) -> None:
    """The protocol: each new field gets delta.columnMapping.id above maxColumnId (raised) and a
    physical name; files store the physical name. delta-rs created the table (an independent writer)."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2], "v": ["a", "b"]}), configuration={"delta.columnMapping.mode": "name"})
    before = load_snapshot(str(path))
    max_id = int(before.configuration["delta.columnMapping.maxColumnId"])
    dvengine.write(pa.table({"id": [3], "v": ["c"], "New Col": [7]}), str(path), mode="append", mergeSchema=True)
    after = load_snapshot(str(path))
    new = after.schema.get("New Col")
    assert new.field_id == max_id + 1
    assert int(after.configuration["delta.columnMapping.maxColumnId"]) == max_id + 1
    assert new.physical_name.startswith("col-") and new.physical_name != "New Col"
    assert [f.metadata for f in after.schema.fields[:2]] == [f.metadata for f in before.schema.fields]
    assert_all_readers(spark, path, ["id", "v", "New Col"], [(1, "a", None), (2, "b", None), (3, "c", 7)])


# --- writes: overwriteSchema -------------------------------------------------------------------


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_overwrite_schema_replaces_schema_and_partitioning(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer(pa.table({"id": [1, 2], "p": ["x", "y"]}), str(path), partitionBy=["p"])
    table_id = load_snapshot(str(path)).metadata.id
    new = pa.table({"k": ["a", "b"], "n": [1.0, 2.0]})
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError):  # a different schema needs the option
        writer(new, str(path), mode="overwrite")
    with pytest.raises(SchemaMismatchError):  # and the option needs mode overwrite (Delta ignores it on append)
        writer(new, str(path), mode="append", overwriteSchema=True)
    assert _folder_state(path) == before
    writer(new, str(path), mode="overwrite", overwriteSchema=True, partitionBy=["k"])
    snapshot = load_snapshot(str(path))
    assert snapshot.schema.field_names == ["k", "n"] and snapshot.partition_columns == ("k",)
    assert snapshot.metadata.id == table_id  # same table, new schema
    _readers(path, ["k", "n"], [("a", 1.0), ("b", 2.0)])
    writer(pa.table({"k": ["c"], "n": [3.0]}), str(path), mode="overwrite", overwriteSchema="true")
    assert load_snapshot(str(path)).partition_columns == ()  # omitted partitionBy: unpartitioned, as in Delta
    _readers(path, ["k", "n"], [("c", 3.0)])


# --- writes: replaceWhere ----------------------------------------------------------------------


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_replace_where_on_a_partition_replaces_only_that_partition(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = [{"id": i, "day": f"d{i % 3}"} for i in range(9)]
    writer(pa.Table.from_pylist(rows), str(path), partitionBy=["day"])
    new = [{"id": 100 + i, "day": "d1"} for i in range(2)]
    writer(pa.Table.from_pylist(new), str(path), mode="overwrite", replaceWhere="day = 'd1'")
    expected = [(r["id"], r["day"]) for r in rows if r["day"] != "d1"] + [(r["id"], r["day"]) for r in new]
    _readers(path, ["id", "day"], expected)
    commit = DeltaTable.forPath(None, path).history(1)[0]
    assert commit["operation"] == "WRITE" and "predicate" in commit["operationParameters"]
    assert int(commit["operationMetrics"]["numDeletedRows"]) == 3


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_replace_where_on_data_columns_replaces_the_matching_rows(writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = [{"id": i, "v": f"v{i}"} for i in range(20)]
    writer(pa.Table.from_pylist(rows), str(path))
    new = [{"id": 5, "v": "new5"}, {"id": 50, "v": "new50"}]
    writer(pa.Table.from_pylist(new), str(path), mode="overwrite", replaceWhere="id = 5 OR id >= 18")
    expected = [(r["id"], r["v"]) for r in rows if not (r["id"] == 5 or r["id"] >= 18)] + [(r["id"], r["v"]) for r in new]
    _readers(path, ["id", "v"], expected)


@pytest.mark.parametrize("writer", ENGINES, indirect=True)
def test_replace_where_refuses_rows_outside_the_predicate_and_leaves_the_table_unchanged(
    writer: Any, tmp_path: Path
) -> None:
    path = tmp_path / "t"
    writer(pa.table({"id": [1, 2, 3], "v": ["a", "b", None]}), str(path))
    before = _folder_state(path)
    with pytest.raises(SchemaViolationError, match="DELTA_REPLACE_WHERE_MISMATCH"):
        writer(pa.table({"id": [1, 9], "v": ["x", "y"]}), str(path), mode="overwrite", replaceWhere="id <= 2")
    with pytest.raises(SchemaViolationError, match="DELTA_REPLACE_WHERE_MISMATCH"):  # NULL is not TRUE
        writer(pa.table({"id": [1], "v": pa.array([None], pa.string())}), str(path), mode="overwrite", replaceWhere="v = 'a'")
    assert _folder_state(path) == before
    _readers(path, ["id", "v"], [(1, "a"), (2, "b"), (3, None)])


def test_replace_where_with_overwrite_schema_ignores_overwrite_schema(tmp_path: Path) -> None:
    """Delta: canOverwriteSchema = overwriteSchema && overwrite && replaceWhere is empty."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2]}), str(path))
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError):
        dvengine.write(pa.table({"k": ["a"]}), str(path), mode="overwrite", overwriteSchema=True, replaceWhere="id = 1")
    assert _folder_state(path) == before


def test_replace_where_with_merge_schema_adds_the_column(tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2, 3]}), str(path))
    dvengine.write(pa.table({"id": [2], "x": ["n"]}), str(path), mode="overwrite", replaceWhere="id = 2", mergeSchema=True)
    _readers(path, ["id", "x"], [(1, None), (2, "n"), (3, None)])


# --- MERGE withSchemaEvolution() ---------------------------------------------------------------


def _merge_source(spark: Any | None, table: pa.Table) -> Any:
    return table if spark is None else spark.createDataFrame(table).alias("s")


def test_merge_schema_evolution_as_in_delta_spark_python_tests(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """delta-spark's test_merge, "Schema evolution": target (key, value), source (key, extra)."""
    engine, spark = merge_engine
    path = tmp_path / "t"
    target = {"a": 1, "b": 2, "c": 3, "d": 4}
    dvengine.write(pa.table({"key": list(target), "value": list(target.values())}), str(path))
    source = {"a": -1, "b": -2, "e": -5, "f": -6}
    src = _merge_source(spark, pa.table({"key": list(source), "extra": list(source.values())}))

    def merge(evolve: bool) -> dict[str, Any]:
        builder = (
            DeltaTable.forPath(spark, path).alias("t").merge(src, "t.key = s.key", source_alias="s")
            .whenMatchedUpdate(set={"extra": "-1"}).whenNotMatchedInsertAll().withEngine(engine)
        )
        return (builder.withSchemaEvolution() if evolve else builder).executeMetrics()

    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError, match="extra"):
        merge(False)
    assert _folder_state(path) == before
    metrics = merge(True)
    assert metrics["executionEngine"] == engine and metrics["version"] == 1
    expected = [(k, v, -1 if k in source else None) for k, v in target.items()]
    expected += [(k, None, v) for k, v in source.items() if k not in target]
    assert expected == [("a", 1, -1), ("b", 2, -1), ("c", 3, None), ("d", 4, None), ("e", None, -5), ("f", None, -6)]
    assert load_snapshot(str(path)).schema.field_names == ["key", "value", "extra"]
    assert_all_readers(spark, path, ["key", "value", "extra"], expected, skip=() if spark else ("dvengine spark",))


def test_merge_update_all_insert_all_with_new_and_missing_source_columns(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """MergeIntoSchemaEvolutionCoreTests: updateAll keeps target columns the source lacks,
    insertAll writes NULL into them; new source columns are added at the end."""
    engine, spark = merge_engine
    path = tmp_path / "t"
    target = [{"id": i, "a": f"a{i}", "b": i * 10} for i in range(6)]
    dvengine.write(pa.Table.from_pylist(target), str(path))
    source = [{"id": i, "b": -i, "c": f"c{i}"} for i in (4, 5, 6, 7)]  # lacks "a", brings "c"
    src = _merge_source(spark, pa.Table.from_pylist(source))
    (
        DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().withEngine(engine).executeMetrics()
    )
    by_id = {r["id"]: (r["id"], r["a"], r["b"], None) for r in target}
    for r in source:
        old = by_id.get(r["id"])
        by_id[r["id"]] = (r["id"], old[1] if old else None, r["b"], r["c"])
    assert load_snapshot(str(path)).schema.field_names == ["id", "a", "b", "c"]
    assert_all_readers(spark, path, ["id", "a", "b", "c"], list(by_id.values()), skip=() if spark else ("dvengine spark",))


def test_merge_without_evolution_refuses_update_all_from_a_narrower_source(tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1], "a": ["x"]}), str(path))
    before = _folder_state(path)
    with pytest.raises(SchemaMismatchError, match="lacks \\['a'\\]"):
        (
            DeltaTable.forPath(None, path).alias("t").merge(pa.table({"id": [1]}), "t.id = s.id", source_alias="s")
            .whenMatchedUpdateAll().executeMetrics()
        )
    assert _folder_state(path) == before


def test_merge_evolution_adds_only_columns_the_clauses_write(tmp_path: Path) -> None:
    """Delta filters the source schema: with explicit assignments only, unassigned source columns stay out."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2], "v": [10, 20]}), str(path))
    src = pa.table({"id": [2, 3], "v": [200, 300], "unused": ["u", "u"], "extra": ["e2", "e3"]})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdate(set={"v": "s.v", "t.extra": "s.extra"})
        .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "extra": "s.extra"})
        .withSchemaEvolution().executeMetrics()
    )
    assert load_snapshot(str(path)).schema.field_names == ["id", "v", "extra"]
    assert sort_rows(rows_delta_rs(path, ["id", "v", "extra"])) == [(1, 10, None), (2, 200, "e2"), (3, 300, "e3")]


def test_merge_auto_merge_conf_evolves_like_with_schema_evolution(tmp_path: Path, auto_merge_env: None) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1], "v": ["a"]}), str(path))
    src = pa.table({"id": [1, 2], "v": ["b", "c"], "w": [True, False]})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics()
    )
    assert rows_duckdb(path, ["id", "v", "w"]) == [(1, "b", True), (2, "c", False)]


def test_merge_evolution_on_a_column_mapped_table(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2], "v": ["a", "b"]}), configuration={"delta.columnMapping.mode": "name"})
    max_id = int(load_snapshot(str(path)).configuration["delta.columnMapping.maxColumnId"])
    src = pa.table({"id": [2, 3], "v": ["B", "C"], "Extra Col": [2.5, 3.5]})
    (
        DeltaTable.forPath(None, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
    )
    new = load_snapshot(str(path)).schema.get("Extra Col")
    assert new.field_id == max_id + 1 and new.physical_name != "Extra Col"
    _readers(path, ["id", "v", "Extra Col"], [(1, "a", None), (2, "B", 2.5), (3, "C", 3.5)])


def test_merge_that_changes_no_row_still_commits_the_new_schema(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    """Delta's MERGE updates the metadata up front and commits even when no clause fires."""
    engine, spark = merge_engine
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2]}), str(path))
    src = _merge_source(spark, pa.table({"id": [3], "x": ["n"]}))
    metrics = (
        DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().withSchemaEvolution().withEngine(engine).executeMetrics()
    )
    assert metrics["version"] == 1 and metrics["numTargetRowsUpdated"] == 0
    assert load_snapshot(str(path)).schema.field_names == ["id", "x"]
    _readers(path, ["id", "x"], [(1, None), (2, None)])


def test_merge_auto_merge_spark_conf_on_the_spark_executor(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1], "v": ["a"]}), str(path))
    src = spark.createDataFrame([(1, "b", 1.5), (2, "c", 2.5)], "id long, v string, w double").alias("s")
    spark.conf.set(CONF_AUTO_MERGE, "true")
    try:
        (
            DeltaTable.forPath(spark, path).alias("t").merge(src, "t.id = s.id")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().withEngine("spark").executeMetrics()
        )
    finally:
        spark.conf.unset(CONF_AUTO_MERGE)
    assert_all_readers(spark, path, ["id", "v", "w"], [(1, "b", 1.5), (2, "c", 2.5)])


def test_a_new_timestamp_ntz_column_enables_the_timestamp_ntz_feature(tmp_path: Path) -> None:
    """PROTOCOL.md: a table with a timestamp_ntz column must support timestampNtz (Delta enables
    it automatically on the schema change). Legacy (1, 2) tables go to (3, 7) keeping their implied features."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1]}), str(path), configuration={"delta.enableDeletionVectors": "false"})
    assert (load_snapshot(str(path)).protocol.min_reader_version, load_snapshot(str(path)).protocol.min_writer_version) == (1, 2)
    ts = dt.datetime(2024, 5, 6, 7, 8, 9)
    dvengine.write(pa.table({"id": [2], "ts": pa.array([ts], pa.timestamp("us"))}), str(path), mode="append", mergeSchema=True)
    protocol = load_snapshot(str(path)).protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert "timestampNtz" in (protocol.reader_features or ()) and "timestampNtz" in (protocol.writer_features or ())
    assert {"appendOnly", "invariants"} <= set(protocol.writer_features or ())
    _readers(path, ["id", "ts"], [(1, None), (2, ts)])
    # the same through MERGE
    merged = tmp_path / "m"
    dvengine.write(pa.table({"id": [1]}), str(merged))
    src = pa.table({"id": [1, 2], "ts": pa.array([ts, ts], pa.timestamp("us"))})
    (
        DeltaTable.forPath(None, merged).alias("t").merge(src, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().executeMetrics()
    )
    assert "timestampNtz" in (load_snapshot(str(merged)).protocol.reader_features or ())
    _readers(merged, ["id", "ts"], [(1, ts), (2, ts)])
