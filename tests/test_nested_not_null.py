"""NOT NULL nested inside arrays or maps: refused at every schema change, or dropped with the conf.

What Delta does (delta-io/delta master, read in its source; spec_notes/sql-and-delta-format.md):
``OptimisticTransaction.updateMetadataInternal`` runs ``SchemaUtils.removeUnenforceableNotNullConstraints``
on every new metadata whose ``schemaString`` differs from the read snapshot's (so CREATE / REPLACE,
CTAS, writes that change the schema, ALTER column statements, MERGE evolution, CLONE, RESTORE).
For each struct field that is an array or a map it relaxes the element / key / value type
(``typeAsNullable``); a change is an unenforceable NOT NULL: ``DeltaErrors.nestedNotNullConstraint``
(DELTA_NESTED_NOT_NULL_CONSTRAINT), or, with ``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled``,
the relaxed schema is committed. An unchanged schema is not checked, so DML keeps working on
tables other engines wrote with such flags.

Truth from outside dvengine: the schemas and messages of Delta's own tests
(``InvariantEnforcementSuite`` "not null within array / map key / map value / nested array",
``DeltaAlterTableReplaceTests`` "REPLACE COLUMNS - loosen nullability with unenforced allowed"),
tables written by delta-rs, delta-rs's ``schema()`` and reads, and the raw log. Refusals leave the
table folder byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder, write_deltalake
from dml_helpers import folder_state, spark_conf
from raw_log import commit_actions, latest_version, metadata_at

import dvengine
from dvengine import DeltaTable
from dvengine.commands.options import env_key
from dvengine.errors import AnalysisError, NestedNotNullConstraintError, UnsupportedFeatureError
from dvengine.protocol.nested_not_null import CONF_ALLOW_UNENFORCED_NOT_NULL, remove_unenforceable_not_nulls
from dvengine.protocol.schema import parse_schema

ALLOW_ENV = env_key(CONF_ALLOW_UNENFORCED_NOT_NULL)


@pytest.fixture(autouse=True)
def _sessionless(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests without the ``spark`` fixture set the conf by environment variable, the session-less
    path. In a full run another test's session is active, and the builders (and ``dvengine.sql``'s
    CREATE) take the active session when given none, as delta-spark's do, so its conf would decide
    instead; here there is no active session, as in a process without Spark."""
    if "spark" not in request.fixturenames:
        monkeypatch.setattr("dvengine.engine.spark.session.active_session", lambda: None)

# InvariantEnforcementSuite.testUnenforcedNestedConstraints: (schema, the start of Delta's message)
DELTA_SUITE_CASES = [
    ("arr array<struct<name:string,mailbox:string NOT NULL>> NOT NULL",
     "The element type of the field arr contains a NOT NULL constraint."),
    ("m map<struct<name:string,mailbox:string NOT NULL>, int> NOT NULL",
     "The key type of the field m contains a NOT NULL constraint."),
    ("m map<int, struct<name:string,mailbox:string NOT NULL>> NOT NULL",
     "The value type of the field m contains a NOT NULL constraint."),
    ("s struct<n:int NOT NULL, arr:array<struct<name:string,mailbox:string NOT NULL>> NOT NULL>",
     "The element type of the field s.arr contains a NOT NULL constraint."),
]

# DeltaAlterTableReplaceTests "REPLACE COLUMNS - loosen nullability with unenforced allowed"
LOOSEN_DDL = """v1 int NOT NULL, v2 string, s STRUCT<v1:int NOT NULL, v2:string>,
    a ARRAY<STRUCT<v1:int NOT NULL, v2:string>>,
    m MAP<STRUCT<v1:int NOT NULL, v2:string>, STRUCT<v1:int NOT NULL, v2:string>>"""


def _field(name: str, data_type: Any, nullable: bool = True) -> dict[str, Any]:
    return {"name": name, "type": data_type, "nullable": nullable, "metadata": {}}


def _pair(v1_nullable: bool) -> dict[str, Any]:
    return {"type": "struct", "fields": [_field("v1", "integer", v1_nullable), _field("v2", "string")]}


def _schema(root: Path) -> dict[str, Any]:
    return json.loads(metadata_at(root, latest_version(root))["schemaString"])  # type: ignore[no-any-return]


def _refused(root: Path, run: Any, *words: str) -> NestedNotNullConstraintError:
    before = folder_state(root)
    with pytest.raises(NestedNotNullConstraintError) as caught:
        run()
    for word in words:
        assert word in str(caught.value), str(caught.value)
    assert folder_state(root) == before
    return caught.value


def _rs_rows(root: Path) -> list[dict[str, Any]]:
    reader = QueryBuilder().register("t", RsTable(str(root))).execute("select * from t order by id")
    return pa.table(reader.read_all()).to_pylist()  # type: ignore[no-any-return]


def _dv_rows(root: Path) -> list[dict[str, Any]]:
    return DeltaTable.forPath(None, str(root)).toArrow().sort_by("id").to_pylist()  # type: ignore[no-any-return]


@pytest.mark.parametrize(("ddl", "message"), DELTA_SUITE_CASES)
def test_create_and_replace_refused_as_delta_tests_expect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ddl: str, message: str
) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    root = tmp_path / "t"
    for statement in ("CREATE TABLE", "CREATE OR REPLACE TABLE"):
        error = _refused(root, lambda s=statement: dvengine.sql(None, f"{s} delta.`{root}` ({ddl}) USING delta"),
                         message, CONF_ALLOW_UNENFORCED_NOT_NULL, ALLOW_ENV)
        assert isinstance(error, AnalysisError) and error.delta_error_class == "DELTA_NESTED_NOT_NULL_CONSTRAINT"
        assert not root.exists()
    # Delta's suite then creates the table with the conf on and finds REPLACE with the same DDL refused:
    # the stored schema lost the flags, so the statement's schema is a change
    monkeypatch.setenv(ALLOW_ENV, "true")
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` ({ddl}) USING delta")
    monkeypatch.delenv(ALLOW_ENV)
    for statement in ("REPLACE TABLE", "CREATE OR REPLACE TABLE"):
        _refused(root, lambda s=statement: dvengine.sql(None, f"{s} delta.`{root}` ({ddl}) USING delta"), message)
    monkeypatch.setenv(ALLOW_ENV, "TRUE")
    dvengine.sql(None, f"REPLACE TABLE delta.`{root}` ({ddl}) USING delta")
    assert latest_version(root) == 1


def test_builder_refused_and_bad_conf_value_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    builder = (DeltaTable.createOrReplace().location(str(root)).addColumn("id", "bigint")
               .addColumn("arr", "array<struct<name:string,mailbox:string NOT NULL>>"))
    _refused(root, builder.execute, "The element type of the field arr", "mailbox")
    monkeypatch.setenv(ALLOW_ENV, "yes")
    with pytest.raises(dvengine.errors.InvalidArgumentError, match=CONF_ALLOW_UNENFORCED_NOT_NULL):
        builder.execute()
    assert not root.exists()


def test_conf_removes_only_the_unenforceable_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema Delta's REPLACE COLUMNS test asserts after the conf: array element and map key /
    value structs relaxed, the top-level and struct-only NOT NULL kept. Writes that break the
    dropped flags go in (InvariantEnforcementSuite: "writes should succeed even if they violate
    the constraint"), and delta-rs reads the NULLs."""
    root = tmp_path / "t"
    monkeypatch.setenv(ALLOW_ENV, "true")
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id bigint, {LOOSEN_DDL}) USING delta")
    assert _schema(root)["fields"] == [
        _field("id", "long"), _field("v1", "integer", False), _field("v2", "string"), _field("s", _pair(False)),
        _field("a", {"type": "array", "elementType": _pair(True), "containsNull": True}),
        _field("m", {"type": "map", "keyType": _pair(True), "valueType": _pair(True), "valueContainsNull": True}),
    ]
    rs = {f.name: f for f in RsTable(str(root)).schema().fields}
    assert (rs["v1"].nullable, rs["s"].type.fields[0].nullable, rs["a"].type.element_type.fields[0].nullable) == (
        False, False, True)
    monkeypatch.delenv(ALLOW_ENV)  # the table now carries no unenforceable flag: writes need no conf
    pair = pa.struct([("v1", pa.int32()), ("v2", pa.string())])
    row = pa.table({
        "id": pa.array([1], pa.int64()), "v1": pa.array([1], pa.int32()), "v2": ["x"],
        "s": pa.array([{"v1": 2, "v2": None}], pa.struct([pa.field("v1", pa.int32(), False), ("v2", pa.string())])),
        "a": pa.array([[{"v1": None, "v2": "y"}]], pa.list_(pair)),
        "m": pa.array([[({"v1": None, "v2": "k"}, {"v1": None, "v2": "v"})]], pa.map_(pair, pair)),
    })
    dvengine.write(row, str(root), mode="append")
    got = _rs_rows(root)
    assert [(r["id"], r["a"], r["m"]) for r in got] == [
        (1, [{"v1": None, "v2": "y"}], [({"v1": None, "v2": "k"}, {"v1": None, "v2": "v"})])]


def test_which_flags_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``typeAsNullable`` leaves a top-level array's ``containsNull``, a map's own
    ``valueContainsNull`` and a map of maps of ints alone (so delta-rs tables with them take
    ADD COLUMNS), while an array of arrays whose inner ``containsNull`` is false is refused."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    not_null = pa.field("item", pa.int32(), nullable=False)
    accepted = tmp_path / "accepted"
    write_deltalake(str(accepted), pa.schema([
        ("id", pa.int64()), ("a", pa.list_(not_null)), ("n", pa.map_(pa.string(), pa.field("value", pa.int32(), False))),
        ("mm", pa.map_(pa.string(), pa.map_(pa.string(), pa.field("value", pa.int32(), False)))),
    ]).empty_table())
    fields = {f["name"]: f["type"] for f in _schema(accepted)["fields"]}
    assert (fields["a"]["containsNull"], fields["n"]["valueContainsNull"], fields["mm"]["valueType"]["valueContainsNull"]) == (
        False, False, False)
    dvengine.sql(None, f"ALTER TABLE delta.`{accepted}` ADD COLUMNS (c INT)")
    assert {f["name"]: f["type"] for f in _schema(accepted)["fields"]}["mm"] == fields["mm"]  # kept as it was
    refused = tmp_path / "refused"
    write_deltalake(str(refused), pa.schema([("id", pa.int64()), ("aa", pa.list_(pa.list_(not_null)))]).empty_table())
    _refused(refused, lambda: dvengine.sql(None, f"ALTER TABLE delta.`{refused}` ADD COLUMNS (c INT)"),
             "The element type of the field aa", '"containsNull":false')
    # the walk alone: an array of arrays of arrays is relaxed one level only (typeAsNullable of an
    # array element that is an array sets its containsNull), so the walk goes on inside and names
    # the path as transformColumns builds it, a part holding a dot back-quoted
    values = {"type": "array", "elementType": "integer", "containsNull": False}
    inner = {"type": "struct", "fields": [_field("y.z", {
        "type": "map", "keyType": "string", "valueType": values, "valueContainsNull": True})]}
    for _ in range(3):
        inner = {"type": "array", "elementType": inner, "containsNull": True}
    relaxed, found = remove_unenforceable_not_nulls(parse_schema(json.dumps({"type": "struct", "fields": [
        _field("x", inner)]})))
    assert [(f.parent_name, f.nest, f.nested.to_json()) for f in found] == [
        ("x.element.element.element.`y.z`", "value", values)]
    deepest = json.loads(relaxed.to_json_string())["fields"][0]["type"]["elementType"]["elementType"]["elementType"]
    assert deepest["fields"][0]["type"]["valueType"] == {**values, "containsNull": True}


def test_tables_written_by_others_stay_usable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta checks only when the schema changes: DML, appends and property changes on a delta-rs
    table with NOT NULL inside an array and a map commit; every schema change is refused until the
    flags go (DROP NOT NULL on the last one, or the conf, which drops them all)."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    root = tmp_path / "t"
    a_type = pa.list_(pa.struct([pa.field("x", pa.int32(), nullable=False), ("y", pa.string())]))
    m_type = pa.map_(pa.string(), pa.struct([pa.field("k", pa.int32(), nullable=False)]))
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("a", a_type), ("m", m_type)])

    def rows(ids: list[int], v: str) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids),
                         "a": pa.array([[{"x": i, "y": v}] for i in ids], a_type),
                         "m": pa.array([[("k", {"k": i})] for i in ids], m_type)}, schema=schema)

    write_deltalake(str(root), rows([1, 2, 3], "rs"))
    schema_string = metadata_at(root, 0)["schemaString"]
    assert '"nullable":false' in schema_string
    table = DeltaTable.forPath(None, str(root))
    dvengine.write(rows([4], "dv"), str(root), mode="append")
    table.delete("id = 2")
    table.update("id = 3", {"v": "'upd'"})
    (table.alias("t").merge(rows([1, 5], "src"), "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().withEngine("local").execute())
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.appendOnly' = 'false')")
    assert latest_version(root) == 5
    assert all(metadata_at(root, v)["schemaString"] == schema_string for v in range(6))
    expected = [(1, "src"), (3, "upd"), (4, "dv"), (5, "src")]
    for got in (_rs_rows(root), _dv_rows(root)):
        assert [(r["id"], r["v"]) for r in got] == expected
        assert [r["a"][0]["x"] for r in got] == [1, 3, 4, 5]

    # schema changes: each one refused, the folder untouched (Delta: the whole new schema is checked)
    first = "The element type of the field a"
    for statement in ("ADD COLUMNS (c INT)", "ALTER COLUMN v COMMENT 'note'",
                      "SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"):
        _refused(root, lambda s=statement: dvengine.sql(None, f"ALTER TABLE delta.`{root}` {s}"), first)
    extra = rows([9], "new").append_column("c", pa.array([1], pa.int32()))
    _refused(root, lambda: dvengine.write(extra, str(root), mode="append", mergeSchema=True), first)
    # dropping one flag still leaves the map's: refused; the conf drops both in one commit
    _refused(root, lambda: dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN a.element.x DROP NOT NULL"),
             "The value type of the field m")
    monkeypatch.setenv(ALLOW_ENV, "true")
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMNS (c INT)")
    commit = commit_actions(root, latest_version(root))
    assert sorted(k for a in commit for k in a) == ["commitInfo", "metaData"]
    assert '"nullable":false' not in metadata_at(root, latest_version(root))["schemaString"]
    assert [f.name for f in RsTable(str(root)).schema().fields] == ["id", "v", "a", "m", "c"]
    assert [(r["id"], r["c"]) for r in _rs_rows(root)] == [(1, None), (3, None), (4, None), (5, None)]


def test_drop_not_null_of_the_last_flag_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    root = tmp_path / "t"
    a_type = pa.list_(pa.struct([pa.field("x", pa.int32(), nullable=False)]))
    write_deltalake(str(root), pa.table({"id": pa.array([1], pa.int64()), "a": pa.array([[{"x": 1}]], a_type)}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN a.element.x DROP NOT NULL")
    assert _schema(root)["fields"][1]["type"]["elementType"]["fields"][0]["nullable"] is True
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMNS (c INT)")  # nothing left to refuse
    assert latest_version(root) == 2


def test_writes_drop_the_datas_flags_as_delta_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write takes its schema from the data, which Delta makes ``asNullable`` before its commit
    (``ImplicitMetadataOperation.updateMetadata``): a DataFrame write is never refused for these
    flags. dvengine keeps the data's top-level and struct-only NOT NULL and drops the rest, for a
    new table and for ``overwriteSchema``; CONVERT TO DELTA takes the files' schema ``asNullable``."""
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    element = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        pa.field("a", pa.list_(pa.field("item", element, nullable=False)))])
    data = pa.table({"id": pa.array([1], pa.int64()), "a": pa.array([[{"x": 7}]], schema.field("a").type)}, schema=schema)
    relaxed_a = {"type": "array", "elementType": {"type": "struct", "fields": [_field("x", "integer")]},
                 "containsNull": False}  # the array's own flag is not a nested one (typeAsNullable keeps it)
    new = tmp_path / "new"
    dvengine.write(data, str(new))
    assert _schema(new)["fields"] == [_field("id", "long", False), _field("a", relaxed_a)]
    over = tmp_path / "over"
    dvengine.write(pa.table({"z": [1]}), str(over))
    dvengine.write(data, str(over), mode="overwrite", overwriteSchema=True)
    assert _schema(over)["fields"] == [_field("id", "long", False), _field("a", relaxed_a)]
    for root in (new, over):
        assert [r["a"] for r in _rs_rows(root)] == [[{"x": 7}]]

    folder = tmp_path / "parquet"
    folder.mkdir()
    pq.write_table(data, folder / "part-0.parquet")
    DeltaTable.convertToDelta(None, f"parquet.`{folder}`")
    assert _schema(folder)["fields"] == [_field("id", "long"), _field("a", {
        "type": "array", "elementType": {"type": "struct", "fields": [_field("x", "integer")]}, "containsNull": True})]
    assert [r["a"] for r in _rs_rows(folder)] == [[{"x": 7}]]


def test_add_columns_refuses_not_null_inside_the_new_type(tmp_path: Path) -> None:
    """``AlterTableAddColumnsDeltaCommand`` refuses any NOT NULL field inside the added columns
    (``SchemaUtils.filterRecursively(checkComplexTypes = true)``) before the nested check runs."""
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id INT) USING delta")
    before = folder_state(root)
    for column, inner in [("s STRUCT<x: INT NOT NULL>", "x"), ("a ARRAY<STRUCT<x: INT, y: INT NOT NULL>>", "element.y")]:
        with pytest.raises(UnsupportedFeatureError, match="NOT NULL in ALTER TABLE ADD COLUMNS") as caught:
            dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMNS ({column})")
        assert inner in str(caught.value)
        assert folder_state(root) == before


def test_session_conf_decides_when_a_session_is_given(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a SparkSession the session's conf is read (the environment is not)."""
    root = tmp_path / "t"
    ddl, message = DELTA_SUITE_CASES[0]
    monkeypatch.setenv(ALLOW_ENV, "true")
    with spark_conf(spark, CONF_ALLOW_UNENFORCED_NOT_NULL, "false"):
        _refused(root, lambda: dvengine.sql(spark, f"CREATE TABLE delta.`{root}` ({ddl}) USING delta"), message)
    monkeypatch.delenv(ALLOW_ENV)
    with spark_conf(spark, CONF_ALLOW_UNENFORCED_NOT_NULL, "true"):
        dvengine.sql(spark, f"CREATE TABLE delta.`{root}` ({ddl}) USING delta")
    element = _schema(root)["fields"][0]["type"]["elementType"]
    assert [f["nullable"] for f in element["fields"]] == [True, True]
