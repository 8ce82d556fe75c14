"""dvengine.sql() statements that dispatch to DeltaTable API from other branches (see
dvengine/sqlcmd/table_statements.py): DESCRIBE DETAIL, RESTORE, OPTIMIZE, CREATE TABLE and catalog names.

These pass once ``DeltaTable.detail``, ``restoreToVersion`` / ``restoreToTimestamp``,
``optimize().where().executeCompaction()``, ``create`` / ``createIfNotExists`` and ``forName`` are
merged; each compares the SQL statement with the DataFrame API call on a copy of the same table,
and the rows with delta-rs.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.errors import DvengineError
from tests.interop import rows_delta_rs, sort_rows

COLUMNS = ["id", "part", "value", "name"]
DDL = "id BIGINT NOT NULL, part STRING, value BIGINT, name STRING COMMENT 'label'"


def _rows(n: int, start: int = 0) -> list[tuple[Any, ...]]:
    return [(i, f"p{i % 2}", i * 10, f"n{i}") for i in range(start, start + n)]


def _frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "id long, part string, value long, name string")


def _rows_at(path: Path, version: int) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    reader = QueryBuilder().register("t", RsTable(str(path), version=version)).execute("select id, part, value, name from t")
    table = pa.table(reader.read_all())
    return sort_rows([tuple(d[c] for c in COLUMNS) for d in table.to_pylist()])


@pytest.fixture
def pair(spark: Any, tmp_path: Path) -> tuple[Path, Path]:
    """Two identical tables, three versions each (write, append, delete), small files."""
    sql_path = tmp_path / "sql"
    _frame(spark, _rows(6)).write.format("delta").partitionBy("part").save(str(sql_path))
    _frame(spark, _rows(6, start=10)).write.format("delta").mode("append").save(str(sql_path))
    DeltaTable.forPath(spark, sql_path).delete("id = 11")
    api_path = tmp_path / "api"
    shutil.copytree(sql_path, api_path)
    return sql_path, api_path


def test_describe_detail_is_the_api_detail(spark: Any, pair: tuple[Path, Path]) -> None:
    from deltalake import DeltaTable as RsTable

    sql_path, _ = pair
    got = dvengine.sql(spark, f"DESCRIBE DETAIL delta.`{sql_path}`").collect()
    api = DeltaTable.forPath(spark, sql_path).detail().collect()
    assert len(got) == 1
    assert got[0].asDict() == api[0].asDict()
    assert got[0]["format"] == "delta"
    assert got[0]["numFiles"] == len(RsTable(str(sql_path)).file_uris())
    assert list(got[0]["partitionColumns"]) == ["part"]


def test_restore_to_version_and_timestamp_match_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    got = dvengine.sql(spark, f"RESTORE TABLE delta.`{sql_path}` TO VERSION AS OF 0").collect()
    api = DeltaTable.forPath(spark, api_path).restoreToVersion(0).collect()
    assert [r.asDict() for r in got] == [r.asDict() for r in api]
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS) == sort_rows(_rows(6))
    stamp = DeltaTable.forPath(None, sql_path).history()[-2]["timestamp"]  # version 1
    text = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    dvengine.sql(spark, f"RESTORE delta.`{sql_path}` TO TIMESTAMP AS OF '{text}'")
    DeltaTable.forPath(spark, api_path).restoreToTimestamp(text)
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS) == _rows_at(sql_path, 1)


def test_optimize_where_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    got = dvengine.sql(spark, f"OPTIMIZE delta.`{sql_path}` WHERE part = 'p0'").collect()
    api = DeltaTable.forPath(spark, api_path).optimize().where("part = 'p0'").executeCompaction().collect()
    assert len(got) == len(api) == 1
    for key in ("numFilesAdded", "numFilesRemoved"):
        assert got[0]["metrics"][key] == api[0]["metrics"][key]
    assert got[0]["metrics"]["numFilesAdded"] == 1
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS) == _rows_at(sql_path, 2)
    live = [a for a in DeltaTable.forPath(None, sql_path).snapshot().files if a.partition_values.get("part") == "p0"]
    assert len(live) == 1


def test_create_table_matches_the_builder(spark: Any, tmp_path: Path) -> None:
    sql_path, api_path = tmp_path / "sql", tmp_path / "api"
    dvengine.sql(spark, f"""CREATE TABLE delta.`{sql_path}` ({DDL}) USING delta PARTITIONED BY (part)
                             TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.appendOnly' = 'false')""")
    (
        DeltaTable.create(spark).location(str(api_path))
        .addColumn("id", "BIGINT", nullable=False).addColumn("part", "STRING").addColumn("value", "BIGINT")
        .addColumn("name", "STRING", comment="label").partitionedBy("part")
        .property("delta.enableDeletionVectors", "true").property("delta.appendOnly", "false").execute()
    )
    made, want = DeltaTable.forPath(None, sql_path).snapshot(), DeltaTable.forPath(None, api_path).snapshot()
    assert made.schema == want.schema
    assert made.partition_columns == want.partition_columns == ("part",)
    assert made.configuration == want.configuration
    assert made.protocol == want.protocol
    assert not made.schema.get("id").nullable
    before = made.version
    dvengine.sql(spark, f"CREATE TABLE IF NOT EXISTS delta.`{sql_path}` ({DDL}) USING delta")
    assert DeltaTable.forPath(None, sql_path).version() == before
    with pytest.raises(DvengineError):
        dvengine.sql(spark, f"CREATE TABLE delta.`{sql_path}` ({DDL}) USING delta")
    assert DeltaTable.forPath(None, sql_path).version() == before


def test_catalog_names_for_target_and_source(spark: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    dvengine.sql(spark, f"CREATE TABLE sql_pending_events ({DDL}) USING delta LOCATION '{location}'")
    _frame(spark, _rows(6)).write.format("delta").mode("append").save(str(location))
    got = dvengine.sql(spark, "DELETE FROM sql_pending_events WHERE id < 2").collect()
    assert got[0]["num_affected_rows"] == 2
    assert DeltaTable.forName(spark, "sql_pending_events").path == str(location)
    target = tmp_path / "target"
    _frame(spark, _rows(3)).write.format("delta").save(str(target))
    merged = dvengine.sql(spark, f"MERGE INTO delta.`{target}` t USING sql_pending_events s ON t.id = s.id "
                                 "WHEN NOT MATCHED THEN INSERT *").collect()
    assert merged[0]["num_inserted_rows"] == 3  # ids 3, 4, 5
    assert rows_delta_rs(target, COLUMNS) == sort_rows(_rows(6))


SCRIPT = """
CREATE TABLE delta.`{p}` ({ddl}) USING delta PARTITIONED BY (part);
"""
STEPS = """
DELETE FROM delta.`{p}` WHERE value < 20;
UPDATE delta.`{p}` SET name = 'big' WHERE value >= 40;
MERGE INTO delta.`{p}` AS t USING pending_src AS s ON t.id = s.id
WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *;
DESCRIBE HISTORY delta.`{p}`
"""


def test_a_delta_spark_sql_script_with_create_matches_the_api(spark: Any, tmp_path: Path) -> None:
    sql_path, api_path = tmp_path / "sql", tmp_path / "api"
    dvengine.sql(spark, SCRIPT.format(p=sql_path, ddl=DDL))
    (
        DeltaTable.create(spark).location(str(api_path))
        .addColumn("id", "BIGINT", nullable=False).addColumn("part", "STRING").addColumn("value", "BIGINT")
        .addColumn("name", "STRING", comment="label").partitionedBy("part").execute()
    )
    for path in (sql_path, api_path):  # INSERT via DataFrame
        _frame(spark, _rows(6)).write.format("delta").mode("append").save(str(path))
    _frame(spark, [(1, "p1", 1, "m"), (9, "p1", 90, "m")]).createOrReplaceTempView("pending_src")
    history = dvengine.sql(spark, STEPS.format(p=sql_path)).collect()
    api = DeltaTable.forPath(spark, api_path)
    api.delete("value < 20")
    api.update("value >= 40", {"name": "'big'"})
    api.alias("t").merge(spark.table("pending_src").alias("s"), "t.id = s.id") \
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS)
    api_ops = [h["operation"] for h in DeltaTable.forPath(None, api_path).history()]
    assert [r["operation"] for r in history] == api_ops
    assert api_ops[:4] == ["MERGE", "UPDATE", "DELETE", "WRITE"]
    expected = {i: (i, p, v, "big" if v >= 40 else n) for i, p, v, n in _rows(6) if v >= 20}
    expected.update({1: (1, "p1", 1, "m"), 9: (9, "p1", 90, "m")})
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows(list(expected.values()))


def _files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def test_alter_table_set_and_unset_tblproperties(spark: Any, tmp_path: Path) -> None:
    from dvengine.protocol.features import writer_features

    path = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), str(path), configuration={"delta.enableDeletionVectors": "false"})
    before = DeltaTable.forPath(None, path).snapshot().protocol
    assert "changeDataFeed" not in writer_features(before)
    dvengine.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', owner.team = 42)")
    snap = DeltaTable.forPath(None, path).snapshot()
    assert snap.configuration["delta.enableChangeDataFeed"] == "true" and snap.configuration["owner.team"] == "42"
    assert "changeDataFeed" in writer_features(snap.protocol)  # the feature comes with the property
    assert DeltaTable.forPath(None, path).historyRecords(1)[0]["operation"] == "SET TBLPROPERTIES"
    # the feed now records changes, read identically by delta-rs
    DeltaTable.forPath(spark, path).updateMetrics("id = 2", {"id": "20"}, mode="rewrite")
    import deltalake

    feed = deltalake.DeltaTable(str(path)).load_cdf(starting_version=snap.version + 1).read_all()
    assert sorted(zip(feed.column("id").to_pylist(), feed.column("_change_type").to_pylist(), strict=True)) == [
        (2, "update_preimage"), (20, "update_postimage")
    ]
    dvengine.sql(spark, f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES (owner.team)")
    assert "owner.team" not in DeltaTable.forPath(None, path).snapshot().configuration
    version = DeltaTable.forPath(None, path).version()
    dvengine.sql(spark, f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES IF EXISTS (owner.team)")
    assert DeltaTable.forPath(None, path).version() == version  # nothing to remove: no commit


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        ("SET TBLPROPERTIES (delta.checkpointInterval = 'often')", "checkpointInterval"),
        ("SET TBLPROPERTIES (delta.columnMapping.mode = 'id')", "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE"),
        ("UNSET TBLPROPERTIES (never.set)", "never.set"),
        ("SET TBLPROPERTIES (delta.appendOnly = )", "value"),
    ],
)
def test_refused_alter_table_changes_nothing(spark: Any, tmp_path: Path, statement: str, fragment: str) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1], pa.int64())}), str(path))
    before = _files(path)
    with pytest.raises(DvengineError, match=fragment):
        dvengine.sql(spark, f"ALTER TABLE delta.`{path}` {statement}")
    assert _files(path) == before
