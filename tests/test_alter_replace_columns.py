"""``ALTER TABLE t REPLACE COLUMNS (...)`` through ``dvengine.sql`` (no JVM).

What Delta does (delta-spark ``AbstractDeltaCatalog.alterTable`` -> ``AlterTableReplaceColumnsDeltaCommand``,
``SchemaUtils.canChangeDataType`` / ``changeDataType``, ``DeltaOperations.ReplaceColumns``,
DeltaAlterTableReplaceTests; Spark's parser, checked against pyspark 4.3's): one commit of a new
``metaData`` with operation ``REPLACE COLUMNS`` and ``columns`` = the statement's list as
``structFieldToMap``; reorder, add (nullable), loosen nullability, comment, drop under column
mapping only, widen on a type-widening table; everything else refused.

Truth from outside dvengine: the raw ``_delta_log`` JSON (schema, operationParameters decoded and
compared with Python types, file actions), and rows read by dvengine, delta-rs and DuckDB against an
in-memory model. Refusals leave the table folder byte-identical (same version, same files).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from dml_helpers import assert_every_reader_sees, folder_state
from interop import rows_arrow, rows_duckdb, sort_rows
from raw_log import commit_actions, latest_version, metadata_at

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    NestedNotNullConstraintError,
    OperationNotAllowedError,
    SqlParseError,
    UnsupportedFeatureError,
)
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import AddColumnDefinition, OtherAlterTable, ReplaceColumnsStatement, TableRef

NOTHING = "nothing was changed"
ST = pa.struct([pa.field("v1", pa.int32()), pa.field("v2", pa.string())])


def _f(name: str, type_: Any, nullable: bool = True, **metadata: Any) -> dict[str, Any]:
    """A field as Delta's schemaString spells it."""
    return {"name": name, "type": type_, "nullable": nullable, "metadata": metadata}


def _struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def _schema(root: Path) -> list[dict[str, Any]]:
    return json.loads(metadata_at(root, latest_version(root))["schemaString"])["fields"]  # type: ignore[no-any-return]


def _without_mapping(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schema with column mapping ids / physical names removed (compared separately)."""
    def clean(t: Any) -> Any:
        if isinstance(t, dict) and t.get("type") == "struct":
            return _struct(*[{**f, "type": clean(f["type"]), "metadata": {k: v for k, v in f["metadata"].items()
                                                                         if not k.startswith("delta.columnMapping")}}
                             for f in t["fields"]])
        if isinstance(t, dict) and t.get("type") == "array":
            return {**t, "elementType": clean(t["elementType"])}
        if isinstance(t, dict) and t.get("type") == "map":
            return {**t, "keyType": clean(t["keyType"]), "valueType": clean(t["valueType"])}
        return t
    return clean(_struct(*fields))["fields"]  # type: ignore[no-any-return]


def _assert_replace_commit(root: Path, logged: list[dict[str, Any]]) -> None:
    """The latest commit is Delta's ReplaceColumns: commitInfo + metaData only, ``columns`` the
    statement's list (Delta's compact JSON of structFieldToMap), every other metaData field as before
    except column mapping's maxColumnId."""
    version = latest_version(root)
    actions = commit_actions(root, version)
    assert sorted(k for a in actions for k in a) == ["commitInfo", "metaData"]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "REPLACE COLUMNS"
    assert set(info["operationParameters"]) == {"columns"}
    raw = info["operationParameters"]["columns"]
    assert isinstance(raw, str) and raw == json.dumps(logged, separators=(",", ":"))
    decoded = json.loads(raw)
    assert [type(c["nullable"]) for c in decoded] == [bool] * len(logged)  # a JSON boolean, not "true"
    new, old = ({k: v for k, v in m.items() if k not in ("schemaString", "configuration") and v is not None}
                for m in (metadata_at(root, version), metadata_at(root, version - 1)))
    assert new == old
    config = [{k: v for k, v in metadata_at(root, v).get("configuration", {}).items()
               if k != "delta.columnMapping.maxColumnId"} for v in (version, version - 1)]
    assert config[0] == config[1]


def _alter(root: Path, statement: str) -> None:
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` {statement}")


def _refused(root: Path, statement: str, error: type[Exception], *words: str) -> None:
    before, version = folder_state(root), latest_version(root)
    with pytest.raises(error) as caught:
        _alter(root, statement)
    for word in words:
        assert word in str(caught.value), (statement, str(caught.value))
    assert latest_version(root) == version and folder_state(root) == before, statement


def _plain_table(root: Path, extra: str = "") -> list[tuple[Any, ...]]:
    """v1 INT NOT NULL, v2 STRING, s STRUCT<v1, v2>, a ARRAY<STRUCT<v1, v2>>, m MAP<STRING, STRUCT<v1, v2>>; two files."""
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (v1 INT NOT NULL, v2 STRING, s STRUCT<v1: INT, v2: STRING>,
        a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>) USING delta {extra}""")
    rows = []
    for i in (1, 2):
        item = {"v1": i, "v2": f"x{i}"}
        dvengine.write(pa.table({
            "v1": pa.array([i], pa.int32()), "v2": [f"x{i}"], "s": pa.array([item], ST),
            "a": pa.array([[item]], pa.list_(ST)), "m": pa.array([[(f"k{i}", item)]], pa.map_(pa.string(), ST)),
        }), str(root), mode="append")
        rows.append((i, f"x{i}", item, [item], [(f"k{i}", item)]))
    return rows


INNER = _struct(_f("v1", "integer"), _f("v2", "string"))


def test_reorder_add_comment_and_loosen_in_one_commit(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = _plain_table(root)
    before = _schema(root)
    assert before[0] == _f("v1", "integer", False)
    _alter(root, """REPLACE COLUMNS (
        s STRUCT<v2: STRING COMMENT 'c s.v2', v1: INT, v3: BIGINT> COMMENT 'c s',
        v2 STRING COMMENT 'c v2',
        m MAP<STRING, STRUCT<v2: STRING, v1: INT>>,
        V1 INT,
        a ARRAY<STRUCT<v1: INT, v2: STRING, v3: BIGINT COMMENT 'c a.v3'>>,
        n BIGINT COMMENT 'c n')""")
    inner_s = _struct(_f("v2", "string", comment="c s.v2"), _f("v1", "integer"), _f("v3", "long"))
    inner_a = _struct(_f("v1", "integer"), _f("v2", "string"), _f("v3", "long", comment="c a.v3"))
    assert _schema(root) == [
        _f("s", inner_s, comment="c s"),
        _f("v2", "string", comment="c v2"),
        _f("m", {"type": "map", "keyType": "string",
                 "valueType": _struct(_f("v2", "string"), _f("v1", "integer")), "valueContainsNull": True}),
        _f("v1", "integer"),  # the table's spelling stays (a case-only rename does nothing); NOT NULL loosened
        _f("a", {"type": "array", "elementType": inner_a, "containsNull": True}),
        _f("n", "long", comment="c n"),
    ]
    _assert_replace_commit(root, [
        {"name": "s", "type": "struct", "nullable": True, "metadata": {"comment": "c s"}},
        {"name": "v2", "type": "string", "nullable": True, "metadata": {"comment": "c v2"}},
        {"name": "m", "type": "map", "nullable": True, "metadata": {}},
        {"name": "V1", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "a", "type": "array", "nullable": True, "metadata": {}},
        {"name": "n", "type": "long", "nullable": True, "metadata": {"comment": "c n"}},
    ])
    model = [(v1, {"v2": s["v2"], "v1": s["v1"], "v3": None}, v2, [(k, {"v2": x["v2"], "v1": x["v1"]}) for k, x in m],
              [{**e, "v3": None} for e in a], None) for v1, v2, s, a, m in rows]
    assert [f.name for f in RsTable(str(root)).schema().fields] == ["s", "v2", "m", "v1", "a", "n"]
    assert_every_reader_sees(root, ["v1", "s", "v2", "m", "a", "n"], model)
    # a NULL written into the loosened column now reads back
    dvengine.sql(None, f"INSERT INTO delta.`{root}` (v2) VALUES ('z')")
    assert sorted(DeltaTable.forPath(None, str(root)).toArrow().column("v1").to_pylist(), key=str) == [1, 2, None]


def test_replace_keeps_comments_and_metadata_it_is_not_given(tmp_path: Path) -> None:
    """DeltaAlterTableReplaceTests "add a comment": a second REPLACE without comments removes none."""
    root = tmp_path / "t"
    _plain_table(root)
    _alter(root, "REPLACE COLUMNS (v1 INT COMMENT 'one', v2 STRING, s STRUCT<v1: INT COMMENT 'inner', v2: STRING>, "
                 "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)")
    commented = _schema(root)
    assert commented[0]["metadata"] == {"comment": "one"}
    assert commented[2]["type"]["fields"][0]["metadata"] == {"comment": "inner"}
    _alter(root, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v1: INT, v2: STRING>, "
                 "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)")
    assert _schema(root) == commented
    _assert_replace_commit(root, [{"name": n, "type": t, "nullable": True, "metadata": {}}
                                  for n, t in (("v1", "integer"), ("v2", "string"), ("s", "struct"), ("a", "array"),
                                               ("m", "map"))])


def _mapped_table(root: Path, extra: str = "") -> list[tuple[Any, ...]]:
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT, v STRING, w INT, p STRING, s STRUCT<x: INT, y: STRING>)
        USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.columnMapping.mode' = 'name'{extra})""")
    xy = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])
    rows = [(i, f"v{i}", i * 10, f"p{i % 2}", {"x": i, "y": f"y{i}"}) for i in (1, 2, 3)]
    dvengine.write(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "v": [r[1] for r in rows],
                             "w": pa.array([r[2] for r in rows], pa.int32()), "p": [r[3] for r in rows],
                             "s": pa.array([r[4] for r in rows], xy)}), str(root), mode="append")
    return rows


def test_drop_columns_and_nested_fields_under_column_mapping(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = _mapped_table(root)
    before = {f["name"]: f for f in _schema(root)}
    max_id = int(metadata_at(root, latest_version(root))["configuration"]["delta.columnMapping.maxColumnId"])
    _alter(root, "REPLACE COLUMNS (p STRING, s STRUCT<y: STRING>, id BIGINT)")  # v, w and s.x dropped
    after = _schema(root)
    assert [f["name"] for f in after] == ["p", "s", "id"]
    for f in (after[0], after[2]):  # kept fields keep their ids and physical names
        assert f == before[f["name"]]
    assert after[1]["metadata"] == before["s"]["metadata"]
    assert after[1]["type"]["fields"] == [before["s"]["type"]["fields"][1]]
    assert metadata_at(root, latest_version(root))["partitionColumns"] == ["p"]
    assert metadata_at(root, latest_version(root))["configuration"]["delta.columnMapping.maxColumnId"] == str(max_id)
    _assert_replace_commit(root, [{"name": "p", "type": "string", "nullable": True, "metadata": {}},
                                  {"name": "s", "type": "struct", "nullable": True, "metadata": {}},
                                  {"name": "id", "type": "long", "nullable": True, "metadata": {}}])
    model = [(p, {"y": s["y"]}, i) for i, _v, _w, p, s in rows]
    assert sorted(r["id"] for r in DeltaTable.forPath(None, str(root)).toArrow().to_pylist()) == [1, 2, 3]
    assert {f.name for f in RsTable(str(root)).schema().fields} == {"p", "s", "id"}
    assert_every_reader_sees(root, ["id", "s"], [(i, s) for _p, s, i in model])  # DuckDB reads mapped partitions as NULL
    assert sorted(DeltaTable.forPath(None, str(root)).toArrow().select(["p", "id"]).to_pylist(), key=str) == sorted(
        [{"p": p, "id": i} for p, _s, i in model], key=str)
    # then an add: the new column gets the next id and a fresh physical name, and old data does not come back
    _alter(root, "REPLACE COLUMNS (p STRING, s STRUCT<y: STRING>, id BIGINT, w INT)")
    w = _schema(root)[3]
    assert w["metadata"]["delta.columnMapping.id"] == max_id + 1
    assert w["metadata"]["delta.columnMapping.physicalName"].startswith("col-")
    assert w["metadata"]["delta.columnMapping.physicalName"] != before["w"]["metadata"]["delta.columnMapping.physicalName"]
    assert metadata_at(root, latest_version(root))["configuration"]["delta.columnMapping.maxColumnId"] == str(max_id + 1)
    assert_every_reader_sees(root, ["id", "w"], [(i, None) for i, *_ in rows])


def test_type_widening_table_widens_and_records_the_change(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id SMALLINT, s STRUCT<n: INT>, p INT, arr ARRAY<INT>)
        USING delta PARTITIONED BY (p) TBLPROPERTIES ('delta.enableTypeWidening' = 'true')""")
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int16()),
                             "s": pa.array([{"n": 10}, {"n": 20}], pa.struct([pa.field("n", pa.int32())])),
                             "p": pa.array([0, 0], pa.int32()), "arr": pa.array([[1], [2]], pa.list_(pa.int32()))}),
                   str(root), mode="append")
    _refused(root, "REPLACE COLUMNS (id SMALLINT, s STRUCT<n: INT>, p INT, arr ARRAY<BIGINT>)", UnsupportedFeatureError,
             "arr.element", "not supported yet", NOTHING)
    _refused(root, "REPLACE COLUMNS (id SMALLINT, s STRUCT<n: INT>, p BIGINT, arr ARRAY<INT>)", UnsupportedFeatureError,
             "p is a partition column", NOTHING)
    _alter(root, "REPLACE COLUMNS (id INT, s STRUCT<n: BIGINT>, p INT, arr ARRAY<INT>)")
    assert _schema(root) == [
        _f("id", "integer", **{"delta.typeChanges": [{"fromType": "short", "toType": "integer"}]}),
        _f("s", _struct(_f("n", "long", **{"delta.typeChanges": [{"fromType": "integer", "toType": "long"}]}))),
        _f("p", "integer"),
        _f("arr", {"type": "array", "elementType": "integer", "containsNull": True}),
    ]
    _assert_replace_commit(root, [{"name": "id", "type": "integer", "nullable": True, "metadata": {}},
                                  {"name": "s", "type": "struct", "nullable": True, "metadata": {}},
                                  {"name": "p", "type": "integer", "nullable": True, "metadata": {}},
                                  {"name": "arr", "type": "array", "nullable": True, "metadata": {}}])
    dvengine.write(pa.table({"id": pa.array([70000], pa.int32()),
                             "s": pa.array([{"n": 5000000000}], pa.struct([pa.field("n", pa.int64())])),
                             "p": pa.array([1], pa.int32()), "arr": pa.array([[3]], pa.list_(pa.int32()))}),
                   str(root), mode="append")
    want = sort_rows([(1, {"n": 10}, [1]), (2, {"n": 20}, [2]), (70000, {"n": 5000000000}, [3])])
    assert rows_arrow(root, ["id", "s", "arr"]) == want  # delta-rs 1.x does not read typeWidening tables
    assert rows_duckdb(root, ["id", "s", "arr"]) == want
    _refused(root, "REPLACE COLUMNS (id BIGINT, s STRUCT<n: INT>, p INT, arr ARRAY<INT>)", UnsupportedFeatureError,
             "changing data type of s.n from LongType to IntegerType", NOTHING)


def test_refusals_name_the_column_and_leave_the_table_unchanged(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    _plain_table(plain)
    cols = ("s STRUCT<v1: INT, v2: STRING>, a ARRAY<STRUCT<v1: INT, v2: STRING>>, "
            "m MAP<STRING, STRUCT<v1: INT, v2: STRING>>")
    wrap = "DELTA_UNSUPPORTED_ALTER_TABLE_REPLACE_COL_OP"
    _refused(plain, f"REPLACE COLUMNS (v2 STRING, {cols})", UnsupportedFeatureError, wrap, "dropping column(s) [v1]", NOTHING)
    _refused(plain, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v2: STRING>, "
                    "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)",
             UnsupportedFeatureError, "dropping column(s) [v1] from s")
    _refused(plain, f"REPLACE COLUMNS (v1 BIGINT, v2 STRING, {cols})", UnsupportedFeatureError,
             "changing data type of v1 from IntegerType to LongType")
    _refused(plain, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v1: INT, v2: STRING>, "
                    "a ARRAY<STRUCT<v1: BIGINT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)",
             UnsupportedFeatureError, "changing data type of a.element.v1 from IntegerType to LongType")
    _refused(plain, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v1: INT NOT NULL, v2: STRING>, "
                    "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)",
             UnsupportedFeatureError, "tightening nullability of s.v1")
    _refused(plain, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v1: INT, v2: STRING>, "
                    "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING, v3: INT NOT NULL>>)",
             UnsupportedFeatureError, "adding non-nullable column m.value.v3")
    _refused(plain, f"REPLACE COLUMNS (v1 STRUCT<x: INT>, v2 STRING, {cols})", UnsupportedFeatureError,
             "changing data type of v1 from IntegerType to StructType(StructField(x,IntegerType,true))")
    _refused(plain, f"REPLACE COLUMNS (v1 INT, v2 STRING, {cols}, V2 STRING)", InvalidArgumentError, "V2",
             "COLUMN_ALREADY_EXISTS")
    _refused(plain, "REPLACE COLUMNS (v1 INT, v2 STRING, s STRUCT<v1: INT, V1: INT, v2: STRING>, "
                    "a ARRAY<STRUCT<v1: INT, v2: STRING>>, m MAP<STRING, STRUCT<v1: INT, v2: STRING>>)",
             InvalidArgumentError, "s.v1", "DELTA_DUPLICATE_COLUMNS_FOUND")
    _refused(plain, f"REPLACE COLUMNS (v1 INT, v2 STRING, {cols}, `b c` INT)", InvalidArgumentError, "b c",
             "DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES")
    _refused(plain, f"REPLACE COLUMNS (v1 INT, v2 STRING, {cols}, x ARRAY<STRUCT<q: INT NOT NULL>>)",
             NestedNotNullConstraintError, "x")
    dvengine.sql(None, f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    _refused(plain, f"REPLACE COLUMNS (v1 INT, v2 STRING, {cols}, _commit_version BIGINT)", OperationNotAllowedError,
             "_commit_version", "RESERVED_CDC_COLUMNS_ON_WRITE", NOTHING)
    _refused(plain, f"REPLACE COLUMNS (v1 INT, v2 STRING, {cols}, x STRUCT<q: INT COMMENT unquoted>)",
             SqlParseError, "expected a quoted string")

    mapped = tmp_path / "mapped"
    _mapped_table(mapped, ", 'delta.enableTypeWidening' = 'true'")
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, x STRING, w INT, p STRING, s STRUCT<x: INT, y: STRING>)",
             UnsupportedFeatureError, "DELTA_AMBIGUOUS_DATA_TYPE_CHANGE", "['v'] would be dropped and ['x'] added")
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, v STRING, w INT, p STRING, s STRUCT<x: INT, z: STRING>)",
             UnsupportedFeatureError, "Cannot change data type of s", "['s.y'] would be dropped and ['s.z'] added")
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, v STRING, w INT, s STRUCT<x: INT, y: STRING>)",
             UnsupportedFeatureError, "partition column(s) ['p']", NOTHING)
    dvengine.sql(None, f"ALTER TABLE delta.`{mapped}` ADD CONSTRAINT w_pos CHECK (w > 0)")
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, v STRING, p STRING, s STRUCT<x: INT, y: STRING>)",
             OperationNotAllowedError, "'w'", "w_pos", NOTHING)
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, v STRING, w BIGINT, p STRING, s STRUCT<x: INT, y: STRING>)",
             OperationNotAllowedError, "'w'", "w_pos", NOTHING)
    _refused(mapped, "REPLACE COLUMNS (id BIGINT, v STRING, w INT, p STRING, s STRUCT<x: INT, y: STRING>) x",
             SqlParseError, "unexpected 'x'")

    stats = tmp_path / "stats"
    _mapped_table(stats, ", 'delta.dataSkippingStatsColumns' = 'v, `s`.x'")
    _refused(stats, "REPLACE COLUMNS (id BIGINT, v STRING, w INT, p STRING, s STRUCT<y: STRING>)",
             OperationNotAllowedError, "`s`.x", "delta.dataSkippingStatsColumns", NOTHING)
    _alter(stats, "REPLACE COLUMNS (id BIGINT, v STRING, p STRING, s STRUCT<x: INT, y: STRING>)")  # w is not listed
    assert [f["name"] for f in _schema(stats)] == ["id", "v", "p", "s"]


def test_refused_on_tables_with_generated_and_identity_columns(tmp_path: Path) -> None:
    generated = tmp_path / "generated"
    dvengine.sql(None, f"""CREATE TABLE delta.`{generated}` (a INT, b INT, g INT GENERATED ALWAYS AS (a + 1)) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name')""")
    dvengine.sql(None, f"INSERT INTO delta.`{generated}` (a, b) VALUES (1, 2)")
    _refused(generated, "REPLACE COLUMNS (b INT, g INT)", OperationNotAllowedError, "'a'", "g", NOTHING)
    _alter(generated, "REPLACE COLUMNS (g INT, a INT)")  # b dropped; g keeps its expression
    assert [f["name"] for f in _schema(generated)] == ["g", "a"]
    assert _schema(generated)[0]["metadata"]["delta.generationExpression"] == "a + 1"
    assert_every_reader_sees(generated, ["g", "a"], [(2, 1)])
    _alter(generated, "REPLACE COLUMNS (a INT)")  # dropping the generated column itself is fine
    assert [f["name"] for f in _schema(generated)] == ["a"]
    assert_every_reader_sees(generated, ["a"], [(1,)])
    identity = tmp_path / "identity"
    dvengine.sql(None, f"CREATE TABLE delta.`{identity}` (id BIGINT GENERATED ALWAYS AS IDENTITY, v INT) USING delta")
    _refused(identity, "REPLACE COLUMNS (id BIGINT, v INT)", UnsupportedFeatureError,
             "DELTA_IDENTITY_COLUMNS_REPLACE_COLUMN_NOT_SUPPORTED", "'id'", NOTHING)


def test_parse() -> None:
    (stmt,) = parse_sql("ALTER TABLE delta.`/t` REPLACE COLUMNS (a INT, `b.c` STRUCT<x: INT NOT NULL COMMENT 'q'> "
                        "COMMENT 'it\\'s', d DECIMAL(10, 2))")
    assert stmt == ReplaceColumnsStatement(TableRef(path="/t"), (
        AddColumnDefinition(("a",), "INT"),
        AddColumnDefinition(("b.c",), "STRUCT<x: INT NOT NULL COMMENT 'q'>", comment="it's"),
        AddColumnDefinition(("d",), "DECIMAL(10, 2)"),
    ), stmt.text)
    (named,) = parse_sql("alter table db.t replace columns (a int)")
    assert isinstance(named, ReplaceColumnsStatement) and named.table == TableRef(name="db.t")
    for bad, words in [
        ("ALTER TABLE t REPLACE COLUMNS (a INT NOT NULL)", "NOT NULL is not supported in Hive-style REPLACE COLUMNS"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT FIRST)", "Column position is not supported"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT AFTER b)", "Column position is not supported"),
        ("ALTER TABLE t REPLACE COLUMNS (s.a INT)", "Replacing with a nested column is not supported"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT DEFAULT 1)", "UNSUPPORTED_DEFAULT_VALUE"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT COMMENT 'x' COMMENT 'y')", "ALTER_TABLE_COLUMN_DESCRIPTOR_DUPLICATE"),
        ("ALTER TABLE t REPLACE COLUMNS a INT", "expected '('"),
        ("ALTER TABLE t REPLACE COLUMNS ()", "expected a column name"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT,)", "expected a column name"),
        ("ALTER TABLE t REPLACE COLUMNS (a INT", "expected ',' or ')'"),
        ("ALTER TABLE t REPLACE COLUMNS (a)", "expected the column's type"),
        ("ALTER TABLE t REPLACE COLUMNS (a NOPE)", "unknown type 'nope'"),
        ("ALTER TABLE t REPLACE COLUMN (a INT)", "expected REPLACE COLUMNS"),
    ]:
        with pytest.raises(SqlParseError) as caught:
            parse_sql(bad)
        assert words in str(caught.value), bad
    # a later statement's syntax error runs nothing
    with pytest.raises(SqlParseError):
        parse_sql("ALTER TABLE delta.`/t` REPLACE COLUMNS (a INT); ALTER TABLE delta.`/t` REPLACE COLUMNS (a INT NOT NULL)")
    assert not isinstance(parse_sql("ALTER TABLE delta.`/t` REPLACE COLUMNS (a INT)")[0], OtherAlterTable)


def test_catalog_name_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVENGINE_CATALOG_WAREHOUSEDIR", str(tmp_path / "warehouse"))
    name = f"rc_{uuid.uuid4().hex[:8]}"
    dvengine.sql(None, f"CREATE TABLE {name} (id BIGINT, v STRING) USING delta")
    dvengine.sql(None, f"INSERT INTO {name} VALUES (1, 'a'); ALTER TABLE {name} REPLACE COLUMNS (v STRING COMMENT 'c', "
                       f"id BIGINT, n INT); INSERT INTO {name} VALUES ('b', 2, 3)")
    root = Path(DeltaTable.forName(None, name).path)
    assert [(f.name, f.metadata) for f in RsTable(str(root)).schema().fields] == [("v", {"comment": "c"}), ("id", {}),
                                                                                 ("n", {})]
    assert_every_reader_sees(root, ["v", "id", "n"], [("a", 1, None), ("b", 2, 3)])
