"""dvengine.sql(): each statement gives the same table, the same committed metrics and the same
returned counts as the DataFrame API call it stands for, run on a copy of the same table; rows
are read back by delta-rs and checked against rows computed here from the input."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    SqlParseError,
    UnsupportedFeatureError,
)
from dvengine.sqlcmd.parse import parse_sql, split_statements
from dvengine.sqlcmd.statements import (
    DeleteStatement,
    HistoryStatement,
    MergeStatement,
    MergeWhen,
    OptimizeStatement,
    PassThrough,
    RestoreStatement,
    TableRef,
    UpdateStatement,
    VacuumStatement,
)
from tests.interop import rows_delta_rs, sort_rows

COLUMNS = ["id", "part", "value", "name"]
# Metrics that are timings or depend on the run, not on the work done.
TIMING = ("TimeMs", "timeMs", "executionTime")


def _base_rows() -> list[tuple[Any, ...]]:
    return [(i, f"p{i % 3}", i * 10, f"n{i}") for i in range(20)]


def _make(path: Path) -> None:
    rows = _base_rows()
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)})
    dvengine.write(table.cast(pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64()),
                                         ("name", pa.string())])), str(path), partitionBy=["part"])


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two identical tables: one for SQL, one for the DataFrame API."""
    sql_path, api_path = tmp_path / "sql", tmp_path / "api"
    _make(sql_path)
    shutil.copytree(sql_path, api_path)
    return sql_path, api_path


def _committed(path: Path) -> dict[str, Any]:
    """The last commit's operation, parameters and metrics, timings left out."""
    last = DeltaTable.forPath(None, path).history(1)[0]
    metrics = {k: v for k, v in (last.get("operationMetrics") or {}).items() if not any(t in k for t in TIMING)}
    return {"operation": last["operation"], "parameters": last.get("operationParameters"), "metrics": metrics}


def _assert_same(sql_path: Path, api_path: Path) -> None:
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS)
    assert _committed(sql_path) == _committed(api_path)
    assert DeltaTable.forPath(None, sql_path).version() == DeltaTable.forPath(None, api_path).version()


def _one(df: Any) -> dict[str, Any]:
    rows = df.collect()
    assert len(rows) == 1
    return dict(rows[0].asDict())


# --- DML ------------------------------------------------------------------------------------------


def test_delete_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    got = _one(dvengine.sql(spark, f"DELETE FROM delta.`{sql_path}` WHERE value >= 50 AND part <> 'p1'"))
    metrics = DeltaTable.forPath(spark, api_path).deleteMetrics("value >= 50 AND part <> 'p1'")
    assert got == {"num_affected_rows": metrics["numDeletedRows"]}
    _assert_same(sql_path, api_path)
    expected = [r for r in _base_rows() if not (r[2] >= 50 and r[1] != "p1")]
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows(expected)
    assert got["num_affected_rows"] == 20 - len(expected)


def test_delete_without_where_empties_the_table(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    got = _one(dvengine.sql(spark, f"delete from delta.`{sql_path}`"))
    DeltaTable.forPath(spark, api_path).delete()
    assert got == {"num_affected_rows": 20}
    _assert_same(sql_path, api_path)
    assert rows_delta_rs(sql_path, COLUMNS) == []


def test_update_with_alias_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    text = f"UPDATE delta.`{sql_path}` AS t SET t.value = t.value + 1, name = concat(name, '!') WHERE t.id % 4 = 0"
    got = _one(dvengine.sql(spark, text))
    metrics = DeltaTable.forPath(spark, api_path).updateMetrics("id % 4 = 0", {"value": "value + 1", "name": "concat(name, '!')"})
    assert got == {"num_affected_rows": metrics["numUpdatedRows"]} == {"num_affected_rows": 5}
    _assert_same(sql_path, api_path)
    expected = [(i, p, v + 1, n + "!") if i % 4 == 0 else (i, p, v, n) for i, p, v, n in _base_rows()]
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows(expected)


def _source(spark: Any) -> Any:
    rows = [(3, "p0", 333, "s3"), (4, "p1", 444, "s4"), (7, "p1", 777, "s7"), (100, "p1", 1000, "s100")]
    return spark.createDataFrame(rows, "id long, part string, value long, name string")


def test_merge_upsert_from_a_temp_view_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    _source(spark).createOrReplaceTempView("updates")
    got = _one(dvengine.sql(spark, f"""
        MERGE INTO delta.`{sql_path}` AS t USING updates AS s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *"""))
    metrics = (
        DeltaTable.forPath(spark, api_path).alias("t").merge(_source(spark).alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics()
    )
    assert got == {"num_affected_rows": 4, "num_updated_rows": 3, "num_deleted_rows": 0, "num_inserted_rows": 1}
    assert got["num_updated_rows"] == metrics["numTargetRowsUpdated"]
    assert got["num_inserted_rows"] == metrics["numTargetRowsInserted"]
    _assert_same(sql_path, api_path)
    by_id = {r[0]: r for r in _base_rows()}
    by_id.update({r[0]: r for r in _source(spark).collect()})
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows([tuple(r) for r in by_id.values()])


def test_merge_with_every_clause_kind_and_a_subquery_source(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    _source(spark).createOrReplaceTempView("changes")
    got = _one(dvengine.sql(spark, f"""
        MERGE INTO delta.`{sql_path}` t
        USING (SELECT id, part, value, name FROM changes WHERE id <> 4) s
        ON t.id = s.id
        WHEN MATCHED AND s.value > 500 THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.value = s.value, t.name = 'upd'
        WHEN NOT MATCHED BY TARGET AND s.id > 50 THEN INSERT (id, part, value, name) VALUES (s.id, s.part, s.value * 2, 'new')
        WHEN NOT MATCHED BY SOURCE AND t.part = 'p2' THEN UPDATE SET value = -1
        WHEN NOT MATCHED BY SOURCE AND t.id < 2 THEN DELETE"""))
    source = _source(spark).where("id <> 4").alias("s")
    metrics = (
        DeltaTable.forPath(spark, api_path).alias("t").merge(source, "t.id = s.id")
        .whenMatchedDelete("s.value > 500")
        .whenMatchedUpdate(set={"t.value": "s.value", "t.name": "'upd'"})
        .whenNotMatchedInsert("s.id > 50", {"id": "s.id", "part": "s.part", "value": "s.value * 2", "name": "'new'"})
        .whenNotMatchedBySourceUpdate("t.part = 'p2'", {"value": "-1"})
        .whenNotMatchedBySourceDelete("t.id < 2")
        .executeMetrics()
    )
    assert got["num_deleted_rows"] == metrics["numTargetRowsDeleted"]
    assert got["num_updated_rows"] == metrics["numTargetRowsUpdated"]
    assert got["num_inserted_rows"] == metrics["numTargetRowsInserted"]
    _assert_same(sql_path, api_path)
    # the model: 3 updated, 7 deleted (matched, value 777), 100 inserted, p2 rows not in the source -> -1,
    # ids 0 and 1 (not in the source, not p2) deleted
    expected = []
    for i, p, v, n in _base_rows():
        if i == 3:
            expected.append((i, p, 333, "upd"))
        elif i == 7 or (i < 2 and p != "p2"):
            continue
        elif p == "p2":
            expected.append((i, p, -1, n))
        else:
            expected.append((i, p, v, n))
    expected.append((100, "p1", 2000, "new"))
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows(expected)
    assert got["num_affected_rows"] == got["num_updated_rows"] + got["num_deleted_rows"] + got["num_inserted_rows"]


def test_merge_from_another_delta_table_by_path(spark: Any, pair: tuple[Path, Path], tmp_path: Path) -> None:
    sql_path, api_path = pair
    src = tmp_path / "src"
    _source(spark).write.format("delta").save(str(src))
    got = _one(dvengine.sql(spark, f"MERGE INTO delta.`{sql_path}` t USING delta.`{src}` s ON t.id = s.id "
                                   "WHEN MATCHED THEN DELETE"))
    DeltaTable.forPath(spark, api_path).alias("t").merge(
        DeltaTable.forPath(spark, src).toDF().alias("s"), "t.id = s.id").whenMatchedDelete().execute()
    assert got["num_deleted_rows"] == 3
    _assert_same(sql_path, api_path)


# --- utility statements ---------------------------------------------------------------------------


def test_describe_history_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, _ = pair
    dvengine.sql(spark, f"DELETE FROM delta.`{sql_path}` WHERE id = 1; UPDATE delta.`{sql_path}` SET value = 0 WHERE id = 2")
    rows = dvengine.sql(spark, f"DESCRIBE HISTORY delta.`{sql_path}` LIMIT 2").collect()
    api = DeltaTable.forPath(None, sql_path).history(2)
    assert [(r["version"], r["operation"], r["readVersion"]) for r in rows] == [
        (h["version"], h["operation"], h.get("readVersion")) for h in api
    ] == [(2, "UPDATE", 1), (1, "DELETE", 0)]
    assert rows[1]["operationMetrics"]["numDeletedRows"] == str(api[1]["operationMetrics"]["numDeletedRows"]) == "1"
    assert int(rows[0]["timestamp"].timestamp() * 1000) == api[0]["timestamp"]
    assert len(dvengine.sql(spark, f"DESC HISTORY delta.`{sql_path}`").collect()) == 3


def test_vacuum_matches_the_api(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    for path in pair:
        DeltaTable.forPath(spark, path).update("part = 'p0'", {"value": "0"}, mode="rewrite")
    with pytest.raises(InvalidArgumentError):  # below the retention window without Delta's switch
        dvengine.sql(spark, f"VACUUM delta.`{sql_path}` RETAIN 0 HOURS")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        dry = dvengine.sql(spark, f"VACUUM delta.`{sql_path}` RETAIN 0 HOURS DRY RUN").collect()
        api_dry = DeltaTable.forPath(None, api_path).vacuum(0, dryRun=True, enforceRetention=False)
        assert sorted(os.path.relpath(r["path"], sql_path) for r in dry) == sorted(api_dry["files"])
        assert len(dry) > 0 and all(os.path.exists(r["path"]) for r in dry)
        done = dvengine.sql(spark, f"VACUUM delta.`{sql_path}` RETAIN 0 HOURS").collect()
        assert [r["path"] for r in done] == [str(sql_path)]
        assert not any(os.path.exists(r["path"]) for r in dry)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert rows_delta_rs(sql_path, COLUMNS) == rows_delta_rs(api_path, COLUMNS)


def test_vacuum_start_and_end_show_in_describe_history(spark: Any, pair: tuple[Path, Path]) -> None:
    """Delta's VacuumCommandImpl logs VACUUM START / END on a local table (``file`` is in
    supportedFsForLogging); DESCRIBE HISTORY shows their parameters as map<string,string>. The
    session's spark.databricks.delta.vacuum.logging.enabled=false turns them off; DRY RUN logs nothing."""
    sql_path, api_path = pair
    DeltaTable.forPath(spark, sql_path).update("part = 'p0'", {"value": "0"}, mode="rewrite")
    version, api_version = DeltaTable.forPath(None, sql_path).version(), DeltaTable.forPath(None, api_path).version()
    folders = 1 + sum(1 for d in os.listdir(sql_path) if d.startswith("part="))  # Delta's dirCounts: the root too
    dvengine.sql(spark, f"VACUUM delta.`{sql_path}` DRY RUN")
    dvengine.sql(spark, f"VACUUM delta.`{sql_path}`")  # no RETAIN: no specifiedRetentionMillis
    rows = dvengine.sql(spark, f"DESCRIBE HISTORY delta.`{sql_path}` LIMIT 2").collect()
    assert [(r["version"], r["operation"]) for r in rows] == [(version + 2, "VACUUM END"), (version + 1, "VACUUM START")]
    assert dict(rows[1]["operationParameters"]) == {"retentionCheckEnabled": "true", "defaultRetentionMillis": "604800000"}
    assert dict(rows[1]["operationMetrics"]) == {"numFilesToDelete": "0", "sizeOfDataToDelete": "0"}
    assert dict(rows[0]["operationParameters"]) == {"status": "COMPLETED"}
    assert dict(rows[0]["operationMetrics"]) == {"numDeletedFiles": "0", "numVacuumedDirectories": str(folders)}
    assert (rows[0]["isolationLevel"], rows[0]["isBlindAppend"]) == ("SnapshotIsolation", True)
    spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "false")
    try:
        dvengine.sql(spark, f"VACUUM delta.`{sql_path}`")
        DeltaTable.forPath(spark, api_path).vacuum()
    finally:
        spark.conf.unset("spark.databricks.delta.vacuum.logging.enabled")
    assert DeltaTable.forPath(None, sql_path).version() == version + 2
    assert DeltaTable.forPath(None, api_path).version() == api_version


def test_other_statements_go_to_spark_unchanged(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, _ = pair
    dvengine.sql(spark, "CREATE OR REPLACE TEMP VIEW sql_pass AS SELECT 1 AS a, 'x;y' AS b")
    assert [tuple(r) for r in dvengine.sql(spark, "SELECT a, b FROM sql_pass").collect()] == [(1, "x;y")]
    DeltaTable.forPath(spark, sql_path).toDF().createOrReplaceTempView("sql_target")
    total = dvengine.sql(spark, "SELECT count(*) AS n FROM sql_target WHERE part = 'p1'").collect()[0]["n"]
    assert total == sum(1 for r in _base_rows() if r[1] == "p1")


# --- errors: typed, naming the part, and nothing runs ----------------------------------------------


def _unchanged(path: Path) -> tuple[int, list[tuple[Any, ...]]]:
    return DeltaTable.forPath(None, path).version(), rows_delta_rs(path, COLUMNS)


@pytest.mark.parametrize(
    ("text", "error", "names"),
    [
        ("DELETE FROM delta.`{p}` WHERE id = 1; UPDATE delta.`{p}` SET WHERE", SqlParseError, "UPDATE"),
        ("DELETE FROM delta.`{p}` WHERE nope = 1", InvalidPredicateError, "nope"),
        ("UPDATE delta.`{p}` SET missing = 1", InvalidPredicateError, "missing"),
        ("UPDATE delta.`{p}` SET value = 1, value = 2", SqlParseError, "assigned twice"),
        ("OPTIMIZE delta.`{p}` ZORDER BY (nope)", InvalidArgumentError, "Z-Ordering column nope does not exist"),
        ("VACUUM delta.`{p}` USING INVENTORY inv", UnsupportedFeatureError, "USING INVENTORY"),
        ("VACUUM delta.`{p}` LITE RETAIN 0 HOURS FULL", SqlParseError, "duplicate clauses: LITE/FULL"),
        ("VACUUM delta.`{p}` RETAIN 1 DAYS", SqlParseError, "HOURS"),
        ("DESCRIBE HISTORY delta.`{p}` LIMIT x", SqlParseError, "LIMIT"),
        ("MERGE INTO delta.`{p}` t USING (SELECT 1 AS id) ON t.id = id WHEN MATCHED THEN DELETE", SqlParseError, "alias"),
        ("MERGE INTO delta.`{p}` t USING (SELECT 1 AS id) s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN INSERT *",
         SqlParseError, "INSERT"),
    ],
)
def test_bad_statements_raise_typed_errors_and_change_nothing(
    spark: Any, pair: tuple[Path, Path], text: str, error: type[Exception], names: str
) -> None:
    sql_path, _ = pair
    before = _unchanged(sql_path)
    with pytest.raises(error, match=names):
        dvengine.sql(spark, text.format(p=sql_path))
    assert _unchanged(sql_path) == before


def test_missing_table_is_a_typed_error(spark: Any, tmp_path: Path) -> None:
    from dvengine.errors import TableNotFoundError

    with pytest.raises(TableNotFoundError):
        dvengine.sql(spark, f"DELETE FROM delta.`{tmp_path / 'nothing'}` WHERE id = 1")


# --- the parser on its own (no Spark) ---------------------------------------------------------------


def test_split_keeps_semicolons_inside_strings_and_names() -> None:
    text = "SELECT ';' AS a; DELETE FROM delta.`/x;y` WHERE s = 'a;b' ;; "
    assert split_statements(text) == ["SELECT ';' AS a", "DELETE FROM delta.`/x;y` WHERE s = 'a;b'"]
    commented = "-- why\n/* note */ VACUUM delta.`/p` RETAIN 1 HOURS -- tail\n; DESC HISTORY delta.`/p` /* c */ LIMIT 1"
    assert parse_sql(commented) == [VacuumStatement(TableRef(path="/p"), 1.0, False), HistoryStatement(TableRef(path="/p"), 1)]


def test_only_create_using_delta_is_dvengines() -> None:
    assert parse_sql("CREATE TABLE x (a INT) USING parquet LOCATION '/tmp/delta'") == [
        PassThrough("CREATE TABLE x (a INT) USING parquet LOCATION '/tmp/delta'")
    ]
    with pytest.raises(SqlParseError, match="CREATE TABLE"):
        parse_sql("CREATE TABLE delta.`/x` (a INT USING delta")
    with pytest.raises(SqlParseError, match="'a' has no type"):
        parse_sql("CREATE TABLE delta.`/x` (a) USING delta")


def test_parsed_statements_keep_expressions_as_sql_text() -> None:
    parsed = parse_sql(
        "DELETE FROM db.events WHERE day < '2024-01-01' AND user_id IN (1, 2);"
        "UPDATE delta.`/t` AS x SET x.a = upper(x.b) WHERE x.c IS NULL;"
        "DESCRIBE HISTORY delta.`/t` LIMIT 5;"
        "RESTORE TABLE delta.`/t` TO VERSION AS OF 3;"
        "RESTORE db.t TO TIMESTAMP AS OF '2024-05-01 10:00:00';"
        "OPTIMIZE delta.`/t` WHERE day >= '2024-01-01' and  part = 'a';"
        "VACUUM '/t' RETAIN 12.5 HOURS DRY RUN;"
        "SHOW TABLES"
    )
    assert parsed == [
        DeleteStatement(TableRef(name="db.events"), "day < '2024-01-01' AND user_id IN (1, 2)"),
        UpdateStatement(TableRef(path="/t"), {"a": "UPPER(b)"}, "c IS NULL"),
        HistoryStatement(TableRef(path="/t"), 5),
        RestoreStatement(TableRef(path="/t"), 3, None),
        RestoreStatement(TableRef(name="db.t"), None, "2024-05-01 10:00:00"),
        OptimizeStatement(TableRef(path="/t"), "day >= '2024-01-01' and  part = 'a'"),
        VacuumStatement(TableRef(path="/t"), 12.5, True),
        PassThrough("SHOW TABLES"),
    ]


def test_merge_clauses_parse_in_order() -> None:
    (stmt,) = parse_sql(
        "MERGE INTO cat.db.t USING src ON t.k = src.k "
        "WHEN MATCHED AND src.d THEN DELETE WHEN MATCHED THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN UPDATE SET t.v = 0"
    )
    assert isinstance(stmt, MergeStatement)
    assert stmt.table == TableRef(name="cat.db.t") and stmt.target_alias == "t"
    assert stmt.source.alias == "src" and stmt.source.table == TableRef(name="src")
    assert stmt.condition == "t.k = src.k"
    assert stmt.clauses == (
        MergeWhen("matched", "delete", "src.d", None),
        MergeWhen("matched", "update", None, None),
        MergeWhen("not_matched", "insert", None, None),
        MergeWhen("not_matched_by_source", "update", None, {"v": "0"}),
    )


# --- a delta-spark SQL script, end to end --------------------------------------------------------

SCRIPT = """
DELETE FROM delta.`{p}` WHERE value < 30;
UPDATE delta.`{p}` SET name = 'big' WHERE value >= 150;
MERGE INTO delta.`{p}` AS t
USING (SELECT id, part, value + 1 AS value, 'merged' AS name FROM script_src) AS s
ON t.id = s.id
WHEN MATCHED THEN UPDATE SET *
WHEN NOT MATCHED THEN INSERT *;
DESCRIBE HISTORY delta.`{p}`
"""


def _script_api(spark: Any, path: Path) -> None:
    table = DeltaTable.forPath(spark, path)
    table.delete("value < 30")
    table.update("value >= 150", {"name": "'big'"})
    source = spark.sql("SELECT id, part, value + 1 AS value, 'merged' AS name FROM script_src").alias("s")
    table.alias("t").merge(source, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()


def test_a_delta_spark_sql_script_gives_what_the_dataframe_api_gives(spark: Any, tmp_path: Path) -> None:
    """The table is made and filled through format("delta") (INSERT via DataFrame), then the script's
    DELETE, UPDATE, MERGE INTO and DESCRIBE HISTORY run as one dvengine.sql call."""
    sql_path, api_path = tmp_path / "sql", tmp_path / "api"
    data = spark.createDataFrame(_base_rows(), "id long, part string, value long, name string")
    for path in (sql_path, api_path):
        data.limit(0).write.format("delta").partitionBy("part").save(str(path))
        data.write.format("delta").mode("append").save(str(path))
    spark.createDataFrame([(5, "p2", 5, "x"), (30, "p0", 300, "y")], "id long, part string, value long, name string") \
        .createOrReplaceTempView("script_src")
    history = dvengine.sql(spark, SCRIPT.format(p=sql_path)).collect()
    _script_api(spark, api_path)
    assert [r["operation"] for r in history] == ["MERGE", "UPDATE", "DELETE", "WRITE", "WRITE"]
    assert [h["operation"] for h in DeltaTable.forPath(None, api_path).history()] == [r["operation"] for r in history]
    _assert_same(sql_path, api_path)
    expected = {i: (i, p, v, "big" if v >= 150 else n) for i, p, v, n in _base_rows() if v >= 30}
    expected[30] = (30, "p0", 301, "merged")
    expected[5] = (5, "p2", 6, "merged")  # deleted by the DELETE, so inserted again by the MERGE
    assert rows_delta_rs(sql_path, COLUMNS) == sort_rows(list(expected.values()))


def test_create_table_parses_columns_partitioning_location_and_properties() -> None:
    from dvengine.sqlcmd.statements import ColumnDefinition, CreateTableAsSelectStatement, CreateTableStatement

    (stmt, other) = parse_sql(
        "CREATE TABLE IF NOT EXISTS db.ev (id BIGINT NOT NULL, amount DECIMAL(10,2), tag STRING COMMENT 'a tag') "
        "USING DELTA PARTITIONED BY (tag) LOCATION '/data/ev' TBLPROPERTIES ('delta.appendOnly' = 'true');"
        "CREATE TABLE pq (a INT) USING parquet"
    )
    assert stmt == CreateTableStatement(
        TableRef(name="db.ev"), True,
        (ColumnDefinition("id", "BIGINT", False), ColumnDefinition("amount", "DECIMAL(10, 2)"),
         ColumnDefinition("tag", "STRING", True, "a tag")),
        ("tag",), "/data/ev", {"delta.appendOnly": "true"},
    )
    assert other == PassThrough("CREATE TABLE pq (a INT) USING parquet")
    (ctas,) = parse_sql("CREATE TABLE delta.`/x` USING delta AS SELECT 1 AS a")  # CTAS: tests/test_sql_ctas.py
    assert ctas == CreateTableAsSelectStatement(TableRef(path="/x"), "SELECT 1 AS a")


def test_vacuum_modifiers_parse_in_any_order_once_each() -> None:
    """Delta's grammar: ``vacuumModifiers : (vacuumType | inventory | retain | dryRun)*`` with
    ``checkDuplicateClauses`` refusing a repeated one ("Found duplicate clauses: ...")."""
    table = TableRef(path="/t")
    assert parse_sql("VACUUM delta.`/t` LITE") == [VacuumStatement(table, None, False, "LITE")]
    assert parse_sql("vacuum '/t' dry run full retain 2 hours") == [VacuumStatement(table, 2.0, True, "FULL")]
    assert parse_sql("VACUUM delta.`/t` RETAIN 0 HOURS LITE DRY RUN") == [VacuumStatement(table, 0.0, True, "LITE")]
    assert parse_sql("VACUUM delta.`/t`") == [VacuumStatement(table, None, False, None)]
    for text, clause in (("VACUUM delta.`/t` DRY RUN DRY RUN", "DRY RUN"),
                         ("VACUUM delta.`/t` RETAIN 1 HOURS RETAIN 1 HOURS", "RETAIN"),
                         ("VACUUM delta.`/t` FULL LITE", "LITE/FULL")):
        with pytest.raises(SqlParseError, match=f"Found duplicate clauses: {clause}"):
            parse_sql(text)
    with pytest.raises(SqlParseError, match="unexpected 'QUICK'"):
        parse_sql("VACUUM delta.`/t` QUICK")
    with pytest.raises(UnsupportedFeatureError, match="USING INVENTORY"):
        parse_sql("VACUUM delta.`/t` USING INVENTORY (SELECT * FROM inv)")


def test_vacuum_lite_and_full_in_sql_and_delta_conf(spark: Any, tmp_path: Path) -> None:
    """LITE leaves files no commit named (here an orphan) to FULL; without LITE/FULL Delta's conf
    ``spark.databricks.delta.vacuum.lite.enabled`` picks the type, and a written type overrides it."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array(range(10), pa.int64())}), str(path))
    DeltaTable.forPath(None, path).delete("id < 5", mode="rewrite")
    (path / "orphan.parquet").write_bytes(b"never committed")
    removed = DeltaTable.forPath(None, path).vacuum(0, dryRun=True, enforceRetention=False, vacuumType="LITE")["files"]
    assert len(removed) == 1 and "orphan.parquet" not in removed

    def dry(modifiers: str) -> list[str]:
        rows = dvengine.sql(spark, f"VACUUM delta.`{path}` {modifiers} RETAIN 0 HOURS DRY RUN").collect()
        return sorted(os.path.relpath(r["path"], path) for r in rows)

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        assert dry("LITE") == removed
        assert dry("") == dry("FULL") == sorted([*removed, "orphan.parquet"])
        spark.conf.set("spark.databricks.delta.vacuum.lite.enabled", "true")
        assert dry("") == removed and dry("FULL") == sorted([*removed, "orphan.parquet"])
        done = dvengine.sql(spark, f"VACUUM delta.`{path}` LITE RETAIN 0 HOURS").collect()
        assert [r["path"] for r in done] == [str(path)]
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
        spark.conf.unset("spark.databricks.delta.vacuum.lite.enabled")
    assert not (path / removed[0]).exists() and (path / "orphan.parquet").exists()
    assert (path / "_delta_log" / "_last_vacuum_info").read_bytes() == b'{"latestCommitVersionOutsideOfRetentionWindow":1}\n'
    assert rows_delta_rs(path, ["id"]) == [(i,) for i in range(5, 10)]


def test_vacuum_without_retain_uses_the_tables_retention(spark: Any, tmp_path: Path) -> None:
    """Delta's default for VACUUM is delta.deletedFileRetentionDuration, not a fixed week."""
    path = tmp_path / "t"
    data = pa.table({"id": pa.array(range(10), pa.int64())})
    dvengine.write(data, str(path), configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"})
    DeltaTable.forPath(None, path).delete("id < 5", mode="rewrite")
    removed = DeltaTable.forPath(None, path).vacuum(0, dryRun=True, enforceRetention=False)["files"]
    assert len(removed) == 1
    dry = dvengine.sql(spark, f"VACUUM delta.`{path}` DRY RUN").collect()
    assert [os.path.relpath(r["path"], path) for r in dry] == removed


# --- delta.`path` inside queries Spark runs -------------------------------------------------------


def test_path_tables_are_found_only_where_a_table_is_read() -> None:
    from dvengine.sqlcmd.path_tables import PathTable, find_path_tables

    text = ("SELECT delta.`x`, 'FROM delta.`/s`' FROM delta.`/a b` t JOIN delta.`/c` VERSION AS OF 2 c ON t.k = c.k "
            "JOIN (SELECT * FROM delta.`/d` TIMESTAMP AS OF '2024-01-01') d ON true")
    found = find_path_tables(text)
    assert [(f.path, f.version, f.timestamp) for f in found] == [
        ("/a b", None, None), ("/c", 2, None), ("/d", None, "2024-01-01")
    ]
    assert [text[f.start:f.end] for f in found] == [
        "delta.`/a b`", "delta.`/c` VERSION AS OF 2", "delta.`/d` TIMESTAMP AS OF '2024-01-01'"
    ]
    assert isinstance(found[0], PathTable)


def test_select_and_merge_sources_read_delta_paths_through_dvengine(spark: Any, pair: tuple[Path, Path]) -> None:
    sql_path, api_path = pair
    DeltaTable.forPath(spark, sql_path).delete("id >= 15")  # version 1, with a DV: the read must apply it
    now = dvengine.sql(spark, f"SELECT id, part, value, name FROM delta.`{sql_path}`").collect()
    assert sort_rows([tuple(r) for r in now]) == sort_rows([r for r in _base_rows() if r[0] < 15])
    then = dvengine.sql(spark, f"SELECT count(*) AS n FROM delta.`{sql_path}` VERSION AS OF 0").collect()
    assert then[0]["n"] == 20
    joined = dvengine.sql(spark, f"SELECT count(*) AS n FROM delta.`{sql_path}` a JOIN delta.`{api_path}` b "
                                 "ON a.id = b.id").collect()
    assert joined[0]["n"] == 15
    got = _one(dvengine.sql(spark, f"""MERGE INTO delta.`{api_path}` t
        USING (SELECT id, part, value * 2 AS value, name FROM delta.`{sql_path}` WHERE id < 3) s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET value = s.value"""))
    assert got["num_updated_rows"] == 3
    expected = [(i, p, v * 2 if i < 3 else v, n) for i, p, v, n in _base_rows()]
    assert rows_delta_rs(api_path, COLUMNS) == sort_rows(expected)
