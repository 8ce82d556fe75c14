"""ALTER TABLE forms dvengine does not run (RENAME TO, SET LOCATION, RECOVER PARTITIONS ...): a typed
refusal on a Delta table, with the table untouched, instead of Spark's misleading "table or view
not found" (Spark alone cannot run them without Delta's jar); Spark's own tables still get them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from raw_log import commit_actions, latest_version, metadata_at

import dvengine
from dvengine.errors import DvengineError, TableNotFoundError, UnsupportedFeatureError
from dvengine.sqlcmd.parse import parse_statement
from dvengine.sqlcmd.run import runs_without_spark
from dvengine.sqlcmd.statements import OtherAlterTable, PassThrough, TableRef


def _fingerprint(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("ALTER TABLE delta.`/t` SET SERDE 'x'", "SET SERDE"),
        ("alter table delta.`/t` rename to other", "RENAME TO"),
        ("ALTER TABLE db.t SET LOCATION '/x'", "SET LOCATION"),
        ("ALTER TABLE t RECOVER PARTITIONS", "RECOVER PARTITIONS"),
    ],
)
def test_other_alter_table_forms_are_recognised(text: str, form: str) -> None:
    stmt = parse_statement(text)
    assert isinstance(stmt, OtherAlterTable) and stmt.form == form
    assert runs_without_spark(stmt) == (stmt.table.path is not None)


def test_dvengine_forms_and_other_alters_keep_their_routes() -> None:
    assert not isinstance(parse_statement("ALTER TABLE delta.`/t` ADD COLUMNS (b INT)"), OtherAlterTable)
    assert not isinstance(parse_statement("ALTER TABLE delta.`/t` REPLACE COLUMNS (b INT)"), OtherAlterTable)
    assert isinstance(parse_statement("ALTER VIEW v AS SELECT 1"), PassThrough)
    assert not isinstance(parse_statement("ALTER TABLE delta.`/t` SET TBLPROPERTIES ('a' = 'b')"), OtherAlterTable)
    # a malformed statement of one of dvengine's own forms gets Spark's syntax error, not a refusal
    assert isinstance(parse_statement("ALTER TABLE db.t ALTER COLUMN a b INT"), PassThrough)
    assert parse_statement("ALTER TABLE db.t RENAME TO u") == OtherAlterTable(TableRef(name="db.t"), "RENAME TO",
                                                                             "ALTER TABLE db.t RENAME TO u")


def test_refused_on_a_path_table_without_spark_and_nothing_changes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(pa.table({"a": [1, 2]}), str(root))
    before = _fingerprint(root)
    with pytest.raises(UnsupportedFeatureError, match=r"RENAME TO.*nothing was changed") as refused:
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` RENAME TO other")
    assert str(root) in str(refused.value)
    assert _fingerprint(root) == before
    with pytest.raises(TableNotFoundError):
        dvengine.sql(None, f"ALTER TABLE delta.`{tmp_path / 'missing'}` RENAME TO x")


def test_refused_on_a_catalog_table_and_spark_tables_keep_working(spark: Any, tmp_path: Path) -> None:
    dvengine.sql(spark, f"CREATE TABLE other_alter_t (a INT) USING delta LOCATION '{tmp_path / 't'}'")
    before = _fingerprint(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match="RENAME TO"):
        dvengine.sql(spark, "ALTER TABLE other_alter_t RENAME TO other_alter_u")
    assert _fingerprint(tmp_path / "t") == before
    assert dvengine.DeltaTable.forName(spark, "other_alter_t").toArrow().num_rows == 0
    dvengine.sql(spark, "ALTER TABLE other_alter_t REPLACE COLUMNS (a INT COMMENT 'c')")  # dvengine's own, via a session
    root = tmp_path / "t"
    assert [a["commitInfo"]["operation"] for a in commit_actions(root, latest_version(root)) if "commitInfo" in a] == [
        "REPLACE COLUMNS"]
    assert json.loads(metadata_at(root, latest_version(root))["schemaString"])["fields"] == [
        {"name": "a", "type": "integer", "nullable": True, "metadata": {"comment": "c"}}]
    spark.sql(f"CREATE TABLE other_alter_plain (a INT) USING parquet LOCATION '{tmp_path / 'plain'}'")
    try:
        with pytest.raises(Exception, match="REPLACE COLUMNS") as spark_refused:  # Spark's table: Spark's own answer
            dvengine.sql(spark, "ALTER TABLE other_alter_plain REPLACE COLUMNS (a INT, b INT)")
        assert not isinstance(spark_refused.value, DvengineError)
        dvengine.sql(spark, "ALTER TABLE other_alter_plain RENAME TO other_alter_plain2")  # Spark's table: Spark runs it
        assert spark.catalog.tableExists("other_alter_plain2") and not spark.catalog.tableExists("other_alter_plain")
    finally:
        spark.sql("DROP TABLE IF EXISTS other_alter_plain")
        spark.sql("DROP TABLE IF EXISTS other_alter_plain2")
