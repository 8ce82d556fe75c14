"""``ALTER TABLE t ALTER|CHANGE [COLUMN] c {SET | DROP} NOT NULL`` through ``dvengine.sql``.

What Delta does (delta-spark ``AbstractDeltaCatalog.alterTable``, ``AlterTableChangeColumnDeltaCommand``,
Spark's ``CheckAnalysis``; see spec_notes/sql-and-delta-format.md): DROP NOT NULL is one commit of a
new ``metaData`` (operation ``CHANGE COLUMN``), also for nested struct fields; SET NOT NULL on a
nullable column is refused whatever the rows hold; on a column already NOT NULL both commit the
schema unchanged; a map key / value's or an array element's nullability cannot change.

Truth from outside dvengine: delta-rs's own NOT NULL check on append (it refuses a NULL before
DROP NOT NULL and takes it after), delta-rs's ``schema()``, the raw log (schemaString, commitInfo,
no file action), and rows read by dvengine, delta-rs and DuckDB. Refusals leave the table folder,
``_delta_log`` listing included, byte-identical.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake
from deltalake.exceptions import DeltaError
from dml_helpers import assert_every_reader_sees, data_listing, folder_state
from raw_log import commit_actions, latest_version, metadata_at

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    SchemaViolationError,
    SqlParseError,
    UnsupportedFeatureError,
)
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import AlterColumnNullabilityStatement, TableRef

ST = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])


def _fields(root: Path) -> dict[str, dict[str, Any]]:
    schema = json.loads(metadata_at(root, latest_version(root))["schemaString"])
    return {f["name"]: f for f in schema["fields"]}


def _assert_change_column_commit(root: Path, column: dict[str, Any]) -> None:
    """The latest commit is Delta's ChangeColumn: commitInfo + metaData only (no file or protocol
    action), ``column`` as Delta's compact JSON, every other metaData field as before."""
    version = latest_version(root)
    actions = commit_actions(root, version)
    assert sorted(k for a in actions for k in a) == ["commitInfo", "metaData"]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "CHANGE COLUMN"
    assert info["operationParameters"] == {"column": json.dumps(column, separators=(",", ":"))}
    new, old = ({k: v for k, v in m.items() if k != "schemaString" and v is not None}  # null = absent
                for m in (metadata_at(root, version), metadata_at(root, version - 1)))
    assert new == old


def _refused(root: Path, statement: str, error: type[Exception], *words: str) -> None:
    before, listing = folder_state(root), sorted(os.listdir(root / "_delta_log"))
    with pytest.raises(error) as caught:
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` {statement}")
    for word in words:
        assert word in str(caught.value), (statement, str(caught.value))
    assert sorted(os.listdir(root / "_delta_log")) == listing, statement
    assert folder_state(root) == before, statement


def _append(root: Path, ids: list[int], v: list[str | None], w: list[int | None]) -> None:
    dvengine.write(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(v, pa.string()),
                             "w": pa.array(w, pa.int32())}), str(root), mode="append")


def test_drop_not_null_is_metadata_only_and_lets_nulls_in(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id BIGINT NOT NULL, v STRING NOT NULL, w INT) USING delta")
    _append(root, [1, 2], ["a", "b"], [10, 20])
    with_null = pa.table({"id": pa.array([3], pa.int64()), "v": pa.array([None], pa.string()),
                          "w": pa.array([30], pa.int32())})

    # Before: every writer refuses a NULL in v, delta-rs by its own check; nothing is written.
    before = folder_state(root)
    with pytest.raises(SchemaViolationError, match="'v'"):
        dvengine.write(with_null, str(root), mode="append")
    with pytest.raises(SchemaViolationError, match="'v'"):
        dvengine.sql(None, f"INSERT INTO delta.`{root}` VALUES (3, NULL, 30)")
    with pytest.raises(DeltaError):
        write_deltalake(str(root), with_null, mode="append")
    assert folder_state(root) == before
    files = data_listing(root)

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN v DROP NOT NULL")

    assert latest_version(root) == 2
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True, "metadata": {}})
    assert data_listing(root) == files  # no data file touched
    fields = _fields(root)
    assert (fields["id"]["nullable"], fields["v"]["nullable"], fields["w"]["nullable"]) == (False, True, True)
    rs = {f.name: f.nullable for f in RsTable(str(root)).schema().fields}
    assert rs == {"id": False, "v": True, "w": True}

    # After: NULL in v goes in through dvengine, INSERT VALUES and delta-rs; id still refuses it.
    dvengine.write(with_null, str(root), mode="append")
    dvengine.sql(None, f"INSERT INTO delta.`{root}` VALUES (4, NULL, 40)")
    write_deltalake(str(root), pa.table({"id": pa.array([5], pa.int64()), "v": pa.array([None], pa.string()),
                                         "w": pa.array([None], pa.int32())}), mode="append")
    with pytest.raises(SchemaViolationError, match="'id'"):
        dvengine.write(pa.table({"id": pa.array([None], pa.int64()), "v": ["x"], "w": pa.array([1], pa.int32())}),
                       str(root), mode="append")
    assert_every_reader_sees(root, ["id", "v", "w"],
                             [(1, "a", 10), (2, "b", 20), (3, None, 30), (4, None, 40), (5, None, None)])


def test_nested_struct_fields_drop_not_null(tmp_path: Path) -> None:
    """Delta's DeltaDDLSuite 'nullability change in struct type - relaxed': s.x, then s itself."""
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id BIGINT, s STRUCT<x: INT NOT NULL, y: STRING> NOT NULL) USING delta")

    def write(s: Any) -> None:
        dvengine.write(pa.table({"id": pa.array([len(rows) + 1], pa.int64()), "s": pa.array([s], ST)}), str(root),
                       mode="append")
        rows.append((len(rows) + 1, s))

    rows: list[tuple[int, Any]] = []
    write({"x": 1, "y": "a"})
    before = folder_state(root)
    # Delta: DELTA_NOT_NULL_CONSTRAINT_VIOLATED for s.x, as for a top-level column; here the same
    # SchemaViolationError as for 's' below (it was the Arrow cast's SchemaMismatchError before)
    with pytest.raises(SchemaViolationError, match="'s.x'"):
        write({"x": None, "y": "b"})  # refused before it is recorded in rows
    assert folder_state(root) == before

    # CHANGE spelling, no COLUMN keyword, names in another case: resolved as Spark's resolver does.
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CHANGE S.X DROP NOT NULL")
    _assert_change_column_commit(root, {"name": "s.x", "type": "integer", "nullable": True, "metadata": {}})
    s = _fields(root)["s"]
    assert (s["nullable"], s["type"]["fields"][0]["nullable"]) == (False, True)
    write({"x": None, "y": "b"})
    with pytest.raises(SchemaViolationError, match="'s'"):
        write(None)

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN s DROP NOT NULL")
    _assert_change_column_commit(root, {"name": "s", "type": "struct", "nullable": True, "metadata": {}})
    rs = RsTable(str(root)).schema().fields[1]
    assert (rs.nullable, rs.type.fields[0].nullable) == (True, True)
    write(None)
    assert_every_reader_sees(root, ["id", "s"], rows)


def test_set_not_null_is_refused_on_a_nullable_column_whatever_its_rows(tmp_path: Path) -> None:
    """Delta (Spark's analyzer) refuses SET NOT NULL on a nullable column without looking at the
    rows; on a NOT NULL column SET NOT NULL, like DROP NOT NULL on a nullable one, commits the
    schema unchanged."""
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id BIGINT NOT NULL, v STRING, w INT) USING delta")
    _append(root, [1, 2], ["a", "b"], [None, 20])  # v holds no NULL, w does: both refused
    for column in ("v", "w", "W"):
        _refused(root, f"ALTER COLUMN {column} SET NOT NULL", UnsupportedFeatureError,
                 f"cannot change nullable column to non-nullable: {column.lower()} of table {root}", "nothing was changed")
    schema_before = metadata_at(root, latest_version(root))["schemaString"]

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN id SET NOT NULL")
    assert latest_version(root) == 2
    _assert_change_column_commit(root, {"name": "id", "type": "long", "nullable": False, "metadata": {}})
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN v DROP NOT NULL")
    assert latest_version(root) == 3
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True, "metadata": {}})
    assert metadata_at(root, 3)["schemaString"] == schema_before
    with pytest.raises(SchemaViolationError, match="'id'"):
        dvengine.sql(None, f"INSERT INTO delta.`{root}` VALUES (NULL, 'c', 3)")
    assert_every_reader_sees(root, ["id", "v", "w"], [(1, "a", None), (2, "b", 20)])


def test_map_and_array_parts(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'change nullability of map key/value and array element': unchanged
    nullability commits, a change is refused; a struct field inside an element is a field like any
    (Delta creates ``e`` only with constraints.allowUnenforcedNotNull.enabled; relaxing it is allowed)."""
    root = tmp_path / "t"
    # Spark's DDL has no NOT NULL map value: delta-rs makes the table from an Arrow schema.
    not_null = pa.field("value", pa.int32(), nullable=False)
    schema = pa.schema([("id", pa.int64()), ("m", pa.map_(pa.string(), pa.int32())), ("a", pa.list_(pa.int32())),
                        ("e", pa.list_(pa.struct([pa.field("q", pa.int32(), nullable=False)]))),
                        ("n", pa.map_(pa.string(), not_null))])
    write_deltalake(str(root), schema.empty_table())
    fields = _fields(root)
    assert (fields["n"]["type"]["valueContainsNull"], fields["e"]["type"]["elementType"]["fields"][0]["nullable"]) == (
        False, False)
    for statement, logged in [
        ("CHANGE COLUMN m.key SET NOT NULL", {"name": "m.key", "type": "string", "nullable": False, "metadata": {}}),
        ("CHANGE COLUMN m.value DROP NOT NULL", {"name": "m.value", "type": "integer", "nullable": True, "metadata": {}}),
        ("ALTER COLUMN a.element DROP NOT NULL", {"name": "a.element", "type": "integer", "nullable": True, "metadata": {}}),
        ("ALTER COLUMN n.value SET NOT NULL", {"name": "n.value", "type": "integer", "nullable": False, "metadata": {}}),
        ("ALTER COLUMN E.element.Q DROP NOT NULL", {"name": "e.element.q", "type": "integer", "nullable": True,
                                                    "metadata": {}}),
    ]:
        version = latest_version(root)
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` {statement}")
        assert latest_version(root) == version + 1
        _assert_change_column_commit(root, logged)
    fields = _fields(root)
    assert fields["e"]["type"]["elementType"]["fields"][0]["nullable"] is True
    assert (fields["m"]["type"]["valueContainsNull"], fields["n"]["type"]["valueContainsNull"]) == (True, False)

    change = "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
    _refused(root, "CHANGE COLUMN m.key DROP NOT NULL", UnsupportedFeatureError, "m.key", str(root), change)
    _refused(root, "ALTER COLUMN n.value DROP NOT NULL", UnsupportedFeatureError, "n.value", str(root), change)
    _refused(root, "CHANGE COLUMN m.value SET NOT NULL", UnsupportedFeatureError, "m.value", str(root), "non-nullable")
    _refused(root, "CHANGE COLUMN a.element SET NOT NULL", UnsupportedFeatureError, "a.element", str(root),
             "non-nullable")


def test_partition_column_and_other_refusals(tmp_path: Path) -> None:
    """Delta does not single out partition columns: DROP NOT NULL on one commits, and a NULL
    partition value goes in after. Unknown paths and identity columns are refused."""
    root = tmp_path / "t"
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING NOT NULL,
        p STRING NOT NULL, s STRUCT<x: INT>, m MAP<STRING, STRUCT<k: INT>>) USING delta PARTITIONED BY (p)""")
    with pytest.raises(SchemaViolationError, match="'p'"):
        dvengine.sql(None, f"INSERT INTO delta.`{root}` (v, p) VALUES ('a', NULL)")
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN p DROP NOT NULL")
    _assert_change_column_commit(root, {"name": "p", "type": "string", "nullable": True, "metadata": {}})
    assert metadata_at(root, latest_version(root))["partitionColumns"] == ["p"]
    dvengine.sql(None, f"INSERT INTO delta.`{root}` (v, p) VALUES ('a', NULL), ('b', 'q')")
    assert_every_reader_sees(root, ["v", "p"], [("a", None), ("b", "q")])

    nothing = "nothing was changed"
    _refused(root, "ALTER COLUMN nope DROP NOT NULL", InvalidArgumentError, f"table {root} has no column 'nope'", nothing)
    _refused(root, "ALTER COLUMN s.nope DROP NOT NULL", InvalidArgumentError, "'s.nope'", str(root), nothing)
    _refused(root, "ALTER COLUMN v.x DROP NOT NULL", InvalidArgumentError, "'v.x'", str(root), nothing)
    _refused(root, "ALTER COLUMN m.k DROP NOT NULL", InvalidArgumentError, "'m.k'", str(root), nothing)  # not m.value.k
    _refused(root, "ALTER COLUMN m.KEY SET NOT NULL", InvalidArgumentError, "'m.KEY'", str(root))  # exactly key
    _refused(root, "ALTER COLUMN m.key.k DROP NOT NULL", InvalidArgumentError, "'m.key.k'", str(root))  # key is a string
    _refused(root, "ALTER COLUMN id DROP NOT NULL", UnsupportedFeatureError,
             "DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED", f"id of table {root}", nothing)
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN m.value.K DROP NOT NULL")
    _assert_change_column_commit(root, {"name": "m.value.k", "type": "integer", "nullable": True, "metadata": {}})


def test_parse() -> None:
    path = TableRef(path="/t")
    cases = {
        "ALTER TABLE delta.`/t` ALTER COLUMN v DROP NOT NULL": (path, ("v",), True),
        "alter table delta.`/t` change column s.`x` set not null": (path, ("s", "x"), False),
        "ALTER TABLE db.t ALTER `a.b`.c SET NOT NULL;": (TableRef(name="db.t"), ("a.b", "c"), False),
    }
    for text, (table, column, nullable) in cases.items():
        assert parse_sql(text) == [AlterColumnNullabilityStatement(table, column, nullable)]
    for bad in ("ALTER TABLE delta.`/t` ALTER COLUMN v DROP NOT NULL CASCADE",
                "ALTER TABLE delta.`/t` ALTER COLUMN SET NOT NULL"):
        with pytest.raises(SqlParseError):
            parse_sql(bad)


def test_catalog_name_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVENGINE_CATALOG_WAREHOUSEDIR", str(tmp_path / "warehouse"))
    name = f"nn_{uuid.uuid4().hex[:8]}"  # another test's session may be active: its warehouse then holds the name
    dvengine.sql(None, f"CREATE TABLE {name} (id BIGINT NOT NULL, v STRING NOT NULL) USING delta")
    dvengine.sql(None, f"ALTER TABLE {name} ALTER COLUMN v DROP NOT NULL; INSERT INTO {name} VALUES (1, NULL)")
    root = Path(DeltaTable.forName(None, name).path)
    assert [(f.name, f.nullable) for f in RsTable(str(root)).schema().fields] == [("id", False), ("v", True)]
    assert_every_reader_sees(root, ["id", "v"], [(1, None)])


def test_through_a_session(spark: Any) -> None:
    """One run through a SparkSession and a catalog name (the statement's own work needs no JVM)."""
    name = f"nn_spark_{uuid.uuid4().hex[:8]}"
    dvengine.sql(spark, f"CREATE TABLE {name} (id BIGINT NOT NULL, v STRING NOT NULL) USING delta")
    dvengine.sql(spark, f"ALTER TABLE {name} CHANGE COLUMN v DROP NOT NULL")
    dvengine.sql(spark, f"INSERT INTO {name} VALUES (1, NULL)")
    table = DeltaTable.forName(spark, name)
    assert [(f.name, f.nullable) for f in RsTable(table.path).schema().fields] == [("id", False), ("v", True)]
    assert [tuple(r) for r in table.toDF().collect()] == [(1, None)]
    with pytest.raises(UnsupportedFeatureError, match="non-nullable"):
        dvengine.sql(spark, f"ALTER TABLE {name} ALTER COLUMN v SET NOT NULL")
