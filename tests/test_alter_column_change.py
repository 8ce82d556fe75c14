"""``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {COMMENT 'text' | FIRST | AFTER x}`` and Hive-style
``ALTER TABLE t CHANGE [COLUMN] c c type [COMMENT 'text'] [FIRST | AFTER x]`` through ``dvengine.sql``.

What Delta does (delta-spark ``AbstractDeltaCatalog.alterTable``, ``AlterTableChangeColumnDeltaCommand``,
``DeltaOperations.ChangeColumn``, DeltaAlterTableTests "CHANGE COLUMN - ...", Spark 3.5's parser;
see spec_notes/sql-and-delta-format.md): one commit of a new ``metaData`` (operation ``CHANGE COLUMN``,
parameters ``column`` and, for a move, ``position``); the comment is the field's ``comment``
metadata; a move reorders the fields of the struct holding the column (partition columns too);
Hive-style CHANGE with the column's own type changes nothing, with another one it is a type change;
a new name there is refused by Spark's parser.

Truth from outside dvengine: the raw ``_delta_log`` JSON, delta-rs's ``schema()`` and the column
order delta-rs and DuckDB return for ``SELECT *``, and rows read by dvengine, delta-rs and DuckDB.
Refusals leave the table folder byte-identical.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder, write_deltalake
from dml_helpers import assert_every_reader_sees, data_listing, folder_state
from interop import duckdb_delta_extension, rows_arrow, rows_duckdb
from raw_log import commit_actions, latest_version, metadata_at

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    OperationNotAllowedError,
    SchemaMismatchError,
    SqlParseError,
    UnsupportedFeatureError,
)
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import (
    AlterColumnChangeStatement,
    AlterColumnDefaultStatement,
    AlterColumnNullabilityStatement,
    AlterColumnTypeStatement,
    PassThrough,
    TableRef,
)

ST = pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.string())])
NOTHING = "nothing was changed"


def _schema(root: Path) -> list[dict[str, Any]]:
    return json.loads(metadata_at(root, latest_version(root))["schemaString"])["fields"]  # type: ignore[no-any-return]


def _field(root: Path, *path: str) -> dict[str, Any]:
    fields = _schema(root)
    found: dict[str, Any] = {}
    for name in path:
        found = next(f for f in fields if f["name"] == name)
        fields = found["type"]["fields"] if isinstance(found["type"], dict) and "fields" in found["type"] else []
    return found


def _assert_change_column_commit(root: Path, column: dict[str, Any], position: str | None = None) -> None:
    """The latest commit is Delta's ChangeColumn: commitInfo + metaData only, ``column`` as Delta's
    compact JSON (``position`` when the column moved), every other metaData field as before."""
    version = latest_version(root)
    actions = commit_actions(root, version)
    assert sorted(k for a in actions for k in a) == ["commitInfo", "metaData"]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "CHANGE COLUMN"
    expected = {"column": json.dumps(column, separators=(",", ":"))}
    if position is not None:
        expected["position"] = position
    assert info["operationParameters"] == expected
    new, old = ({k: v for k, v in m.items() if k != "schemaString" and v is not None}  # null = absent
                for m in (metadata_at(root, version), metadata_at(root, version - 1)))
    assert new == old


def _alter(root: Path, statement: str) -> None:
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` {statement}")


def _refused(root: Path, statement: str, error: type[Exception], *words: str) -> None:
    before = folder_state(root)
    with pytest.raises(error) as caught:
        _alter(root, statement)
    for word in words:
        assert word in str(caught.value), (statement, str(caught.value))
    assert folder_state(root) == before, statement


def _star_columns(root: Path) -> dict[str, list[str]]:
    """The column names ``SELECT *`` returns, per reader, nested ``s`` fields as ``s.x``."""
    def names(schema: pa.Schema) -> list[str]:
        out: list[str] = []
        for f in schema:
            out.append(f.name)
            if pa.types.is_struct(f.type):
                out.extend(f"{f.name}.{f.type.field(i).name}" for i in range(f.type.num_fields))
        return out

    rs = pa.table(QueryBuilder().register("t", RsTable(str(root))).execute("select * from t").read_all())
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        con.execute(f"LOAD '{duckdb_delta_extension()}'")
        dd = con.execute(f"select * from delta_scan('{root}')").fetch_arrow_table()
    finally:
        con.close()
    return {"dvengine": names(DeltaTable.forPath(None, str(root)).toArrow().schema), "delta-rs": names(rs.schema),
            "duckdb": names(dd.schema)}


def _assert_order(root: Path, expected: list[str]) -> None:
    top = [n for n in expected if "." not in n]
    assert [f["name"] for f in _schema(root)] == top
    assert [f.name for f in RsTable(str(root)).schema().fields] == top
    assert _star_columns(root) == {"dvengine": expected, "delta-rs": expected, "duckdb": expected}


def _table(root: Path, extra: str = "") -> list[tuple[Any, ...]]:
    """id, v, s STRUCT<x, y>, p (partition column); two appends, so two data files."""
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT, v STRING, s STRUCT<x: INT, y: STRING>, p STRING)
        USING delta PARTITIONED BY (p) {extra}""")
    rows: list[tuple[Any, ...]] = []
    for i in (1, 2):
        row = (i, f"v{i}", {"x": i * 10, "y": f"y{i}"}, "a" if i == 1 else "b")
        dvengine.write(pa.table({"id": pa.array([i], pa.int64()), "v": [row[1]], "s": pa.array([row[2]], ST),
                                 "p": [row[3]]}), str(root), mode="append")
        rows.append(row)
    return rows


def test_comment_is_the_fields_comment_metadata(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'CHANGE COLUMN - add a comment' (also on a partition column and a nested
    field): the comment is metadata ``comment``, set or replaced; nothing else moves."""
    root = tmp_path / "t"
    rows = _table(root)
    files = data_listing(root)

    _alter(root, "ALTER COLUMN v COMMENT 'the v'")
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True, "metadata": {"comment": "the v"}})
    _alter(root, "CHANGE v COMMENT 'it\\'s v'")  # CHANGE spelling, no COLUMN keyword: the comment is replaced
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True, "metadata": {"comment": "it's v"}})
    _alter(root, "ALTER COLUMN P COMMENT ''")  # a partition column; an empty comment is a comment
    _assert_change_column_commit(root, {"name": "p", "type": "string", "nullable": True, "metadata": {"comment": ""}})
    _alter(root, "CHANGE COLUMN s.X COMMENT 'nested'")
    _assert_change_column_commit(root, {"name": "s.x", "type": "integer", "nullable": True,
                                        "metadata": {"comment": "nested"}})
    _alter(root, "ALTER COLUMN s COMMENT 'the struct'")
    _assert_change_column_commit(root, {"name": "s", "type": "struct", "nullable": True,
                                        "metadata": {"comment": "the struct"}})

    assert latest_version(root) == 7
    assert data_listing(root) == files
    assert [f.get("metadata") for f in _schema(root)] == [{}, {"comment": "it's v"}, {"comment": "the struct"},
                                                         {"comment": ""}]
    assert _field(root, "s", "x")["metadata"] == {"comment": "nested"}
    assert metadata_at(root, 7)["partitionColumns"] == ["p"]
    rs = RsTable(str(root)).schema()
    assert [f.metadata for f in rs.fields] == [{}, {"comment": "it's v"}, {"comment": "the struct"}, {"comment": ""}]
    assert rs.fields[2].type.fields[0].metadata == {"comment": "nested"}
    _assert_order(root, ["id", "v", "s", "s.x", "s.y", "p"])
    assert_every_reader_sees(root, ["id", "v", "s", "p"], rows)


def test_comment_on_a_column_mapped_table_keeps_the_mapping(tmp_path: Path) -> None:
    """Delta keeps the old field's metadata (column mapping id and physical name) and logs it."""
    root = tmp_path / "t"
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT, v STRING) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name')""")
    dvengine.sql(None, f"INSERT INTO delta.`{root}` VALUES (1, 'a')")
    mapping = _field(root, "v")["metadata"]
    assert set(mapping) == {"delta.columnMapping.id", "delta.columnMapping.physicalName"}
    _alter(root, "ALTER COLUMN v COMMENT 'mapped' ")
    _alter(root, "ALTER COLUMN v FIRST")
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True,
                                        "metadata": {**mapping, "comment": "mapped"}}, "FIRST")
    assert _field(root, "v")["metadata"] == {**mapping, "comment": "mapped"}
    _assert_order(root, ["v", "id"])
    assert_every_reader_sees(root, ["id", "v"], [(1, "a")])


def test_reorder_top_level_columns(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'move to first', 'move to after some column', 'move a partitioned column',
    'move to after the same column' (in place, still a commit), 'after the last column'."""
    root = tmp_path / "t"
    rows = _table(root)
    files = data_listing(root)
    steps = [
        ("ALTER COLUMN v FIRST", "v", "string", "FIRST", ["v", "id", "s", "p"]),
        ("CHANGE COLUMN ID AFTER s", "id", "long", "AFTER s", ["v", "s", "id", "p"]),
        ("ALTER p AFTER V", "p", "string", "AFTER v", ["v", "p", "s", "id"]),  # the partition column
        ("ALTER COLUMN s AFTER S", "s", "struct", "AFTER s", ["v", "p", "s", "id"]),  # after itself: in place
        ("CHANGE COLUMN v AFTER id", "v", "string", "AFTER id", ["p", "s", "id", "v"]),  # after the last one
    ]
    for statement, name, type_name, position, order in steps:
        version = latest_version(root)
        _alter(root, statement)
        assert latest_version(root) == version + 1
        _assert_change_column_commit(root, {"name": name, "type": type_name, "nullable": True, "metadata": {}}, position)
        assert [f["name"] for f in _schema(root)] == order
    assert metadata_at(root, latest_version(root))["partitionColumns"] == ["p"]
    assert data_listing(root) == files
    _assert_order(root, ["p", "s", "s.x", "s.y", "id", "v"])
    assert_every_reader_sees(root, ["id", "v", "s", "p"], rows)

    # Writers take the new order: dvengine's INSERT (a column list in the new order), delta-rs.
    dvengine.sql(None, f"INSERT INTO delta.`{root}` (p, id, v) VALUES ('c', 3, 'v3')")
    write_deltalake(str(root), pa.table({"p": ["d"], "s": pa.array([{"x": 40, "y": "y4"}], ST),
                                         "id": pa.array([4], pa.int64()), "v": ["v4"]}), mode="append")
    assert_every_reader_sees(root, ["id", "v", "s", "p"],
                             [*rows, (3, "v3", None, "c"), (4, "v4", {"x": 40, "y": "y4"}, "d")])


def test_reorder_nested_struct_fields(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'move to first (nested)', 'move to after some column (nested)', 'special
    column names (nested) with positions': the fields of the struct move, files written in the old
    order still read by name."""
    root = tmp_path / "t"
    rows = _table(root)
    _alter(root, "ALTER COLUMN s.y FIRST")
    _assert_change_column_commit(root, {"name": "s.y", "type": "string", "nullable": True, "metadata": {}}, "FIRST")
    assert [f["name"] for f in _field(root, "s")["type"]["fields"]] == ["y", "x"]
    _alter(root, "CHANGE COLUMN S.Y AFTER X")
    _assert_change_column_commit(root, {"name": "s.y", "type": "string", "nullable": True, "metadata": {}}, "AFTER x")
    _alter(root, "ALTER COLUMN s.x AFTER y")
    _assert_order(root, ["id", "v", "s", "s.y", "s.x", "p"])
    assert [f.name for f in RsTable(str(root)).schema().fields[2].type.fields] == ["y", "x"]
    assert_every_reader_sees(root, ["id", "v", "s", "p"], rows)

    dotted = tmp_path / "dotted"  # names holding dots, backquoted
    dvengine.sql(None, f"CREATE TABLE delta.`{dotted}` (`x.x` INT, `y.y` STRING, `z.z` STRUCT<`x.x`: INT, `y.y`: STRING>) "
                       "USING delta")
    _alter(dotted, "CHANGE COLUMN `z.z`.`x.x` AFTER `y.y`")
    _assert_change_column_commit(dotted, {"name": "`z.z`.`x.x`", "type": "integer", "nullable": True, "metadata": {}},
                                 "AFTER y.y")
    _alter(dotted, "CHANGE COLUMN `x.x` `x.x` INT AFTER `y.y`")  # Hive-style, Delta's 'special column names with positions'
    assert [f["name"] for f in _schema(dotted)] == ["y.y", "x.x", "z.z"]
    assert [f["name"] for f in _field(dotted, "z.z")["type"]["fields"]] == ["y.y", "x.x"]


def test_hive_style_change_column(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'CHANGE COLUMN - add a comment', 'move to first', 'case insensitive',
    'move to first (nested)': the column's own type changes nothing, so comment and position are
    what changes; written with only its own type the statement asks for nothing and commits nothing
    (Spark drops the unchanged type and hands Delta no change)."""
    root = tmp_path / "t"
    rows = _table(root)
    _alter(root, "CHANGE COLUMN v v STRING COMMENT 'vv' FIRST")
    _assert_change_column_commit(root, {"name": "v", "type": "string", "nullable": True, "metadata": {"comment": "vv"}},
                                 "FIRST")
    _alter(root, "CHANGE S.x X int COMMENT 'sx'")  # names resolve case-insensitively and keep their spelling
    _assert_change_column_commit(root, {"name": "s.x", "type": "integer", "nullable": True,
                                        "metadata": {"comment": "sx"}})
    version = latest_version(root)
    before = folder_state(root)
    _alter(root, "CHANGE COLUMN id ID BIGINT")
    _alter(root, "CHANGE COLUMN p p varchar(3)")  # Delta stores CHAR / VARCHAR as string
    assert (latest_version(root), folder_state(root)) == (version, before)

    plain = tmp_path / "plain"
    dvengine.sql(None, f"CREATE TABLE delta.`{plain}` (v1 INT, s STRUCT<v1: INT, v2: STRING>, v2 STRING) USING delta")
    _alter(plain, "CHANGE COLUMN s s STRUCT<v1: INT, v2: STRING> FIRST")
    _assert_change_column_commit(plain, {"name": "s", "type": "struct", "nullable": True, "metadata": {}}, "FIRST")
    assert [f["name"] for f in _schema(plain)] == ["s", "v1", "v2"]
    for other in ("STRUCT<v2: STRING, v1: INT>", "STRUCT<V1: INT, v2: STRING>", "STRUCT<v1: INT>",
                  "STRUCT<v1: INT, v2: STRING NOT NULL>", "STRUCT<v1: INT, v2: STRING, v3: INT>"):
        _refused(plain, f"CHANGE COLUMN s s {other} AFTER v1", UnsupportedFeatureError, "'s'", "atomic", NOTHING)
    assert_every_reader_sees(root, ["id", "v", "s", "p"], rows)


def test_hive_style_type_change_is_a_type_widening(tmp_path: Path) -> None:
    """DeltaAlterTableTests 'CHANGE COLUMN - incompatible': INT -> BIGINT is refused without type
    widening; with it the new type, comment and position go in one commit, which logs the new type
    (``delta.typeChanges`` is in the schema, not in the logged column)."""
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id BIGINT, n INT, s STRUCT<x: INT>) USING delta")
    dvengine.sql(None, f"INSERT INTO delta.`{root}` VALUES (1, 7, null)")
    _refused(root, "CHANGE COLUMN n n BIGINT", OperationNotAllowedError, "'n'", "delta.enableTypeWidening=true", NOTHING)
    _alter(root, "SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    _refused(root, "CHANGE COLUMN n n STRING", SchemaMismatchError, "'n'", "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP",
             NOTHING)  # not a widening
    _alter(root, "CHANGE COLUMN n n BIGINT COMMENT 'wide' FIRST")
    _assert_change_column_commit(root, {"name": "n", "type": "long", "nullable": True, "metadata": {"comment": "wide"}},
                                 "FIRST")
    n = _field(root, "n")
    assert n["type"] == "long"
    assert n["metadata"]["comment"] == "wide"
    assert n["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    _alter(root, "CHANGE COLUMN s.x x BIGINT")
    _assert_change_column_commit(root, {"name": "s.x", "type": "long", "nullable": True, "metadata": {}})
    assert [(f.name, f.type.type) for f in RsTable(str(root)).schema().fields[:2]] == [("n", "long"), ("id", "long")]
    dvengine.write(pa.table({"n": pa.array([2**40], pa.int64()), "id": pa.array([2], pa.int64()),
                             "s": pa.array([None], pa.struct([pa.field("x", pa.int64())]))}), str(root), mode="append")
    want = [(1, 7), (2, 2**40)]  # delta-rs does not read the typeWidening feature
    assert rows_arrow(root, ["id", "n"]) == want
    assert rows_duckdb(root, ["id", "n"]) == want


def test_a_new_name_is_refused_as_spark_parses(tmp_path: Path) -> None:
    """Spark's parser refuses ``CHANGE COLUMN a b type`` (_LEGACY_ERROR_TEMP_0034, DeltaAlterTableTests
    'CHANGE COLUMN - change name' / 'case sensitive'), column mapping or not: a text holding it runs
    none of its statements. RENAME COLUMN is Delta's rename."""
    root = tmp_path / "t"
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT, v STRING, s STRUCT<x: INT>) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name')""")
    before = folder_state(root)
    for statement in ("CHANGE COLUMN v w STRING", "CHANGE v w STRING COMMENT 'x'", "CHANGE COLUMN s.x y INT"):
        with pytest.raises(SqlParseError, match="Renaming column is not supported in Hive-style ALTER COLUMN, please "
                                                "run RENAME COLUMN instead"):
            dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN v COMMENT 'first'; "
                               f"ALTER TABLE delta.`{root}` {statement}")
    with pytest.raises(SqlParseError, match="NOT NULL is not supported in Hive-style ALTER COLUMN"):
        _alter(root, "CHANGE COLUMN v v STRING NOT NULL")
    assert folder_state(root) == before
    _alter(root, "RENAME COLUMN v TO w")
    assert [f["name"] for f in _schema(root)] == ["id", "w", "s"]


def test_refusals_name_the_column_and_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING,
        s STRUCT<x: INT, y: STRING>, m MAP<STRING, INT>, a ARRAY<INT>) USING delta
        TBLPROPERTIES ('delta.enableTypeWidening' = 'true')""")
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD CONSTRAINT x_pos CHECK (s.x > 0)")
    where = str(root)
    _refused(root, "ALTER COLUMN nope COMMENT 'c'", InvalidArgumentError, f"table {where} has no column 'nope'", NOTHING)
    _refused(root, "ALTER COLUMN s.nope FIRST", InvalidArgumentError, "'s.nope'", where, NOTHING)
    _refused(root, "CHANGE COLUMN v v STRING AFTER nope", InvalidArgumentError, "'nope'", where, NOTHING)
    _refused(root, "ALTER COLUMN s.x AFTER v", InvalidArgumentError, "'s.v'", where, NOTHING)  # not a sibling
    for part in ("m.key", "m.value", "a.element"):  # Delta's 'add a comment to key/value / element'
        _refused(root, f"ALTER COLUMN {part} COMMENT 'c'", UnsupportedFeatureError, part, where,
                 "DELTA_UNSUPPORTED_COMMENT_MAP_ARRAY", NOTHING)
    _refused(root, "CHANGE COLUMN m.value value BIGINT", UnsupportedFeatureError, "m.value", where,
             "not supported yet", NOTHING)  # dvengine's limit: Delta widens a map value on this table
    _refused(root, "CHANGE COLUMN id id DOUBLE", UnsupportedFeatureError, "DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED",
             where, NOTHING)
    _refused(root, "CHANGE COLUMN s.x x BIGINT", OperationNotAllowedError, "x_pos", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE", NOTHING)

    # What Delta allows on these: an identity column's comment and position (the catalog's
    # allow-list), a map part's position (left where it is).
    _alter(root, "ALTER COLUMN id COMMENT 'identity'")
    assert _field(root, "id")["metadata"]["comment"] == "identity"
    _alter(root, "ALTER COLUMN id AFTER a")
    assert [f["name"] for f in _schema(root)] == ["v", "s", "m", "a", "id"]
    schema = metadata_at(root, latest_version(root))["schemaString"]
    _alter(root, "ALTER COLUMN m.key FIRST")
    _assert_change_column_commit(root, {"name": "m.key", "type": "string", "nullable": False, "metadata": {}}, "FIRST")
    assert metadata_at(root, latest_version(root))["schemaString"] == schema


def test_parse() -> None:
    path, name = TableRef(path="/t"), TableRef(name="db.t")
    cases: dict[str, Any] = {
        "ALTER TABLE delta.`/t` ALTER COLUMN v COMMENT 'c'": AlterColumnChangeStatement(path, ("v",), comment="c"),
        "alter table delta.`/t` change s.`x` first": AlterColumnChangeStatement(path, ("s", "x"), position="FIRST"),
        "ALTER TABLE db.t CHANGE COLUMN `a.b`.c AFTER `d e`;": AlterColumnChangeStatement(name, ("a.b", "c"),
                                                                                          position="AFTER d e"),
        "ALTER TABLE db.t CHANGE COLUMN s s STRUCT<type: INT, b: MAP<STRING, STRUCT<c: INT>>> COMMENT 'x' AFTER y":
            AlterColumnChangeStatement(name, ("s",), "x", "AFTER y", "STRUCT<type: INT, b: MAP<STRING, STRUCT<c: INT>>>"),
        "ALTER TABLE db.t CHANGE c C DECIMAL(10, 2)": AlterColumnChangeStatement(name, ("c",), data_type="DECIMAL(10, 2)"),
        # The other ALTER COLUMN actions keep their own statements.
        "ALTER TABLE db.t CHANGE COLUMN c TYPE BIGINT": AlterColumnTypeStatement(name, "c", "BIGINT"),
        "ALTER TABLE db.t ALTER COLUMN c DROP NOT NULL": AlterColumnNullabilityStatement(name, ("c",), True),
        "ALTER TABLE db.t ALTER COLUMN c SET DEFAULT 'first'": AlterColumnDefaultStatement(name, ("c",), "'first'"),
        "ALTER TABLE db.t ALTER COLUMN a b INT": PassThrough("ALTER TABLE db.t ALTER COLUMN a b INT"),  # Spark's error
    }
    for text, statement in cases.items():
        assert parse_sql(text) == [statement], text
    for bad, words in [
        ("ALTER TABLE db.t ALTER COLUMN c", "requires a TYPE, a SET/DROP, a COMMENT, or a FIRST/AFTER"),
        ("ALTER TABLE db.t ALTER COLUMN c FIRST COMMENT 'x'", "unexpected 'COMMENT'"),  # one action, as Spark 3.5
        ("ALTER TABLE db.t ALTER COLUMN c COMMENT c2", "expected a string after COMMENT"),
        ("ALTER TABLE db.t ALTER COLUMN c AFTER a.b", "unexpected '.'"),
        ("ALTER TABLE db.t CHANGE COLUMN c c", "expected the column's type"),
        ("ALTER TABLE db.t CHANGE COLUMN c c NUMBERS", "unknown type"),
        ("ALTER TABLE db.t CHANGE COLUMN s.c s.c INT", "one name"),
        ("ALTER TABLE db.t CHANGE COLUMN c d INT", "Renaming column is not supported"),
    ]:
        with pytest.raises(SqlParseError, match=words):
            parse_sql(bad)


def test_catalog_name_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVENGINE_CATALOG_WAREHOUSEDIR", str(tmp_path / "warehouse"))
    name = f"cc_{uuid.uuid4().hex[:8]}"  # another test's session may be active: its warehouse then holds the name
    dvengine.sql(None, f"CREATE TABLE {name} (id BIGINT, v STRING) USING delta")
    dvengine.sql(None, f"INSERT INTO {name} VALUES (1, 'a'); ALTER TABLE {name} ALTER COLUMN v COMMENT 'c'; "
                       f"ALTER TABLE {name} CHANGE COLUMN v v STRING FIRST; INSERT INTO {name} VALUES ('b', 2)")
    root = Path(DeltaTable.forName(None, name).path)
    assert [(f.name, f.metadata) for f in RsTable(str(root)).schema().fields] == [("v", {"comment": "c"}), ("id", {})]
    assert_every_reader_sees(root, ["id", "v"], [(1, "a"), (2, "b")])


def test_through_a_session(spark: Any) -> None:
    """One run through a SparkSession and a catalog name (the statement's own work needs no JVM)."""
    name = f"cc_spark_{uuid.uuid4().hex[:8]}"
    dvengine.sql(spark, f"CREATE TABLE {name} (id BIGINT, v STRING) USING delta")
    dvengine.sql(spark, f"ALTER TABLE {name} CHANGE COLUMN v v STRING COMMENT 'c' FIRST")
    dvengine.sql(spark, f"INSERT INTO {name} VALUES ('a', 1)")
    table = DeltaTable.forName(spark, name)
    assert [(f.name, f.metadata) for f in RsTable(table.path).schema().fields] == [("v", {"comment": "c"}), ("id", {})]
    assert [tuple(r) for r in table.toDF().collect()] == [("a", 1)]
    with pytest.raises(SqlParseError, match="RENAME COLUMN"):
        dvengine.sql(spark, f"ALTER TABLE {name} CHANGE COLUMN v w STRING")
