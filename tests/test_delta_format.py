"""spark.read/df.write .format("delta") on dvengine: rows checked by delta-rs and DuckDB, time travel,
modes, partitionBy, and failed writes that leave the table exactly as it was."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from dvengine import DeltaTable
from dvengine.engine.spark.delta_format import CONF_ENABLED
from dvengine.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    SchemaViolationError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from tests.interop import rows_delta_rs, rows_duckdb, sort_rows

COLUMNS = ["id", "part", "name"]
SCHEMA = "id long, part string, name string"


def _rows(n: int, start: int = 0) -> list[tuple[Any, ...]]:
    return [(i, f"p{i % 3}", f"n{i}") for i in range(start, start + n)]


def _frame(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, SCHEMA)


def _read(spark: Any, path: Path, **options: Any) -> list[tuple[Any, ...]]:
    reader = spark.read.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return sort_rows([tuple(r[c] for c in COLUMNS) for r in reader.load(str(path)).collect()])


def _state(path: Path) -> tuple[int, list[str]]:
    """Latest version and every file under the table: a failed write must change neither."""
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    return DeltaTable.forPath(None, path).version(), files


def test_write_partitioned_then_read_back_by_independent_readers(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _rows(12)
    _frame(spark, rows).write.format("delta").partitionBy("part").save(str(path))
    assert rows_delta_rs(path, COLUMNS) == sort_rows(rows)
    assert rows_duckdb(path, COLUMNS) == sort_rows(rows)
    assert _read(spark, path) == sort_rows(rows)
    assert DeltaTable.forPath(None, path).snapshot().partition_columns == ("part",)
    assert {p.name for p in path.iterdir() if p.is_dir()} == {"_delta_log", "part=p0", "part=p1", "part=p2"}


def test_modes_append_overwrite_error_ignore(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    first, second, third = _rows(4), _rows(3, start=10), _rows(2, start=100)
    _frame(spark, first).write.mode("append").format("delta").save(str(path))  # mode before format
    _frame(spark, second).write.format("delta").mode("append").save(str(path))
    assert rows_delta_rs(path, COLUMNS) == sort_rows(first + second)
    before = _state(path)
    with pytest.raises(TableAlreadyExistsError):
        _frame(spark, third).write.format("delta").save(str(path))  # default mode: error if it exists
    with pytest.raises(TableAlreadyExistsError):
        _frame(spark, third).write.format("delta").mode("errorifexists").save(str(path))
    _frame(spark, third).write.format("delta").mode("ignore").save(str(path))
    assert _state(path) == before
    _frame(spark, third).write.format("delta").mode("overwrite").save(str(path))
    assert rows_duckdb(path, COLUMNS) == sort_rows(third)
    assert DeltaTable.forPath(None, path).version() == 2
    ignored = tmp_path / "new"
    _frame(spark, third).write.format("delta").mode("ignore").save(str(ignored))  # ignore creates a missing table
    assert rows_delta_rs(ignored, COLUMNS) == sort_rows(third)


def test_keyword_forms_of_save_and_load(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _rows(5)
    _frame(spark, rows).write.save(str(path), format="delta", mode="overwrite", partitionBy="part")
    _frame(spark, _rows(1, start=50)).write.save(str(path), format="delta", mode="append")
    got = spark.read.load(str(path), format="delta", versionAsOf=0).collect()
    assert sort_rows([tuple(r[c] for c in COLUMNS) for r in got]) == sort_rows(rows)
    by_option = spark.read.format("delta").option("path", str(path)).load().count()
    assert by_option == len(rows) + 1


def test_time_travel_by_version_and_timestamp(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    v0, v1 = _rows(3), _rows(2, start=10)
    _frame(spark, v0).write.format("delta").save(str(path))
    _frame(spark, v1).write.format("delta").mode("append").save(str(path))
    DeltaTable.forPath(spark, path).delete("id = 0")
    assert _read(spark, path, versionAsOf=0) == sort_rows(v0)
    assert _read(spark, path, versionAsOf="1") == sort_rows(v0 + v1)
    assert _read(spark, path) == sort_rows(v0[1:] + v1)
    history = DeltaTable.forPath(None, path).history()
    stamp = dt.datetime.fromtimestamp(history[-2]["timestamp"] / 1000, tz=dt.UTC)  # version 1's commit time
    assert _read(spark, path, timestampAsOf=stamp.strftime("%Y-%m-%d %H:%M:%S.%f")) == sort_rows(v0 + v1)
    with pytest.raises(InvalidArgumentError, match="both versionAsOf"):
        _read(spark, path, versionAsOf=0, timestampAsOf="2020-01-01")
    with pytest.raises(InvalidArgumentError, match="versionAsOf"):
        _read(spark, path, versionAsOf="one")


def test_reads_apply_deletion_vectors_like_delta_rs(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(30)).write.format("delta").save(str(path))
    DeltaTable.forPath(spark, path).delete("id % 4 = 1", mode="dv")
    assert DeltaTable.forPath(None, path).snapshot().files[0].deletion_vector is not None
    assert _read(spark, path) == rows_delta_rs(path, COLUMNS)
    assert len(_read(spark, path)) == 30 - 8


def test_merge_schema_option_adds_a_new_column_and_without_it_nothing_changes(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(3)).write.format("delta").save(str(path))
    before = _state(path)
    wider = spark.createDataFrame([(7, "p1", "x", 1.5)], SCHEMA + ", extra double")
    with pytest.raises(SchemaMismatchError, match="extra"):
        wider.write.format("delta").mode("append").save(str(path))
    assert _state(path) == before
    wider.write.format("delta").mode("append").option("mergeSchema", "true").save(str(path))
    expected = sort_rows([(*r, None) for r in _rows(3)] + [(7, "p1", "x", 1.5)])
    assert rows_delta_rs(path, [*COLUMNS, "extra"]) == expected
    assert rows_duckdb(path, [*COLUMNS, "extra"]) == expected


def test_replace_where_and_overwrite_schema_options_reach_the_write(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(6)).write.format("delta").partitionBy("part").save(str(path))
    replacement = [(100, "p0", "new")]
    _frame(spark, replacement).write.format("delta").mode("overwrite").option("replaceWhere", "part = 'p0'").save(str(path))
    expected = sort_rows([r for r in _rows(6) if r[1] != "p0"] + replacement)
    assert rows_delta_rs(path, COLUMNS) == expected
    other = spark.createDataFrame([(1, 2.5)], "id long, score double")
    other.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(path))
    assert rows_delta_rs(path, ["id", "score"]) == [(1, 2.5)]
    assert DeltaTable.forPath(None, path).snapshot().partition_columns == ()


def test_read_change_feed_option_reads_the_change_data_feed(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(6)).write.format("delta").save(str(path))
    DeltaTable.forPath(spark, path).detail()  # the table exists; now enable the feed on a fresh one
    cdf = tmp_path / "cdf"
    import dvengine

    dvengine.write(_frame(spark, _rows(6)), str(cdf), configuration={"delta.enableChangeDataFeed": "true"}, spark=spark)
    DeltaTable.forPath(spark, cdf).updateMetrics("id = 2", {"name": "'two'"}, mode="dv")
    read = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(str(cdf))
    )
    got = sort_rows([(r["id"], r["name"], r["_change_type"], r["_commit_version"]) for r in read.collect()])
    via_api = DeltaTable.forPath(None, cdf).changes(1)
    assert got == sort_rows(
        list(zip(*(via_api.column(c).to_pylist() for c in ("id", "name", "_change_type", "_commit_version")), strict=True))
    )
    assert got == [(2, "n2", "update_preimage", 1), (2, "two", "update_postimage", 1)]
    with pytest.raises(InvalidArgumentError, match="startingVersion"):
        spark.read.format("delta").option("readChangeFeed", "true").load(str(cdf))


@pytest.mark.parametrize(
    ("configure", "error"),
    [
        (lambda w: w.partitionBy("name"), SchemaMismatchError),  # differs from the table's partitioning
        (lambda w: w.option("replaceWhere", "part = 'p0'"), SchemaViolationError),  # written rows outside it
        (lambda w: w.option("dataChange", "maybe"), InvalidArgumentError),  # Delta's DELTA_ILLEGAL_OPTION
        (lambda w: w.option("mergeSchema", "maybe"), InvalidArgumentError),
        (lambda w: w.bucketBy(2, "id"), UnsupportedFeatureError),
    ],
)
def test_a_refused_write_leaves_the_table_exactly_as_it_was(
    spark: Any, tmp_path: Path, configure: Any, error: type[Exception]
) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(6)).write.format("delta").partitionBy("part").save(str(path))
    before = _state(path)
    writer = configure(_frame(spark, _rows(2, start=40)).write.format("delta").mode("overwrite"))
    with pytest.raises(error):
        writer.save(str(path))
    assert _state(path) == before
    assert rows_delta_rs(path, COLUMNS) == sort_rows(_rows(6))


def test_a_write_failing_inside_spark_leaves_no_commit_and_no_files(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _frame(spark, _rows(3)).write.format("delta").save(str(path))
    before = _state(path)
    # one of three tasks fails after the others may have written their files
    failing = _frame(spark, _rows(30, start=10)).repartition(3).selectExpr(
        "id", "part", "CASE WHEN id = 25 THEN CAST(raise_error('boom') AS STRING) ELSE name END AS name"
    )
    with pytest.raises(Exception, match="boom"):
        failing.write.format("delta").mode("append").save(str(path))
    assert _state(path) == before


def test_reading_a_missing_table_or_with_a_schema_fails_typed(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        spark.read.format("delta").load(str(tmp_path / "missing"))
    path = tmp_path / "t"
    _frame(spark, _rows(2)).write.format("delta").save(str(path))
    with pytest.raises(InvalidArgumentError, match="schema"):
        spark.read.format("delta").schema(SCHEMA).load(str(path))
    with pytest.raises(InvalidArgumentError, match="readChangeFeed"):
        spark.read.format("delta").option("readChangeFeed", "maybe").load(str(path))
    with pytest.raises(InvalidArgumentError, match="path"):
        spark.read.format("delta").load()


def test_other_formats_and_unregistered_sessions_keep_spark_behaviour(spark: Any, tmp_path: Path) -> None:
    parquet = tmp_path / "plain"
    _frame(spark, _rows(4)).write.format("parquet").save(str(parquet))
    assert spark.read.format("parquet").load(str(parquet)).count() == 4
    assert not (parquet / "_delta_log").exists()
    path = tmp_path / "t"
    _frame(spark, _rows(2)).write.format("delta").save(str(path))
    spark.conf.set(CONF_ENABLED, "false")
    try:
        with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND"):  # no Delta source in this JVM: Spark's own error
            spark.read.format("delta").load(str(path))
    finally:
        spark.conf.set(CONF_ENABLED, "true")
    assert len(_read(spark, path)) == 2
    assert os.path.isdir(path / "_delta_log")


def test_timestamp_as_of_is_read_in_the_session_time_zone(spark: Any, tmp_path: Path) -> None:
    """As in Delta, a timestampAsOf without an offset is local time of spark.sql.session.timeZone."""
    from zoneinfo import ZoneInfo

    path = tmp_path / "t"
    v0, v1 = _rows(2), _rows(2, start=10)
    _frame(spark, v0).write.format("delta").save(str(path))
    _frame(spark, v1).write.format("delta").mode("append").save(str(path))
    _frame(spark, _rows(1, start=50)).write.format("delta").mode("append").save(str(path))
    committed = DeltaTable.forPath(None, path).history()[-2]["timestamp"]  # version 1, epoch ms
    local = dt.datetime.fromtimestamp(committed / 1000, tz=ZoneInfo("America/New_York")).replace(tzinfo=None)
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        assert _read(spark, path, timestampAsOf=local.isoformat(sep=" ")) == sort_rows(v0 + v1)
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    utc = dt.datetime.fromtimestamp(committed / 1000, tz=dt.UTC)
    assert _read(spark, path, timestampAsOf=utc.isoformat()) == sort_rows(v0 + v1)  # an explicit offset wins


def test_writes_run_auto_compaction_with_the_session_confs(spark: Any, tmp_path: Path) -> None:
    """df.write.format("delta") is a write like dvengine.write: the session's autoCompact confs
    make it compact the table's small files in a follow-up OPTIMIZE commit (auto: true)."""
    from dml_helpers import spark_conf

    from dvengine.log import load_snapshot, read_commit_actions
    from dvengine.maintenance import auto_compact as ac
    from dvengine.protocol.actions import CommitInfo

    def last_operation() -> tuple[str | None, Any]:
        actions = read_commit_actions(str(path), load_snapshot(str(path)).version)
        info = next(a for a in actions if isinstance(a, CommitInfo))
        return info.operation, dict(info.values.get("operationParameters") or {}).get("auto")

    path = tmp_path / "t"
    written: list[tuple[Any, ...]] = []
    for i in range(3):  # the confs unset: appends never compact
        batch = _rows(3, start=10 * i)
        written += batch
        _frame(spark, batch).coalesce(1).write.format("delta").mode("append").save(str(path))
    assert len(load_snapshot(str(path)).files) == 3
    assert last_operation()[0] == "WRITE"
    with spark_conf(spark, ac.CONF_ENABLED, "true"), spark_conf(spark, ac.CONF_MIN_NUM_FILES, "4"):
        batch = _rows(3, start=100)
        written += batch
        _frame(spark, batch).coalesce(1).write.format("delta").mode("append").save(str(path))
    assert last_operation() == ("OPTIMIZE", True)  # DeltaOperations.Optimize: "auto" -> auto, a JSON boolean
    snapshot = load_snapshot(str(path))
    assert (snapshot.version, len(snapshot.files)) == (4, 1)  # 4 appends, then the compaction
    assert _read(spark, path) == rows_delta_rs(path, COLUMNS) == rows_duckdb(path, COLUMNS) == sort_rows(written)
