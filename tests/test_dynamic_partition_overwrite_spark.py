"""Dynamic partition overwrite from Spark: ``format("delta")`` with the option or the session conf
``spark.sql.sources.partitionOverwriteMode``, ``dvengine.write`` of a Spark DataFrame, and SQL
``INSERT OVERWRITE`` (Delta runs it as a dynamic overwrite when the conf says so). Rows are checked
against a model by dvengine's Arrow and Spark readers, delta-rs and DuckDB; commits in the raw log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dpo_support import COLUMNS, Row, commit, files_state, live_files, seed
from interop import assert_all_readers
from raw_log import latest_version

import dvengine
from dvengine.commands.partition_overwrite import CONF_PARTITION_OVERWRITE_MODE
from dvengine.errors import InvalidArgumentError

SCHEMA = "id long, p string, v long"


@pytest.fixture
def dynamic_conf(spark: Any) -> Iterator[None]:
    spark.conf.set(CONF_PARTITION_OVERWRITE_MODE, "dynamic")
    try:
        yield
    finally:
        spark.conf.unset(CONF_PARTITION_OVERWRITE_MODE)


def _replaced(model: list[Row], new: list[Row]) -> list[Row]:
    written = {r[1] for r in new}
    return [r for r in model if r[1] not in written] + new


def _check_commit(root: Path, version: int, new: list[Row], mode: str = "Overwrite") -> None:
    """The commit removes exactly the live files of the written partitions and logs Delta's flag."""
    live = live_files(root, version - 1)
    info, removes, adds = commit(root, version)
    written = {r[1] for r in new}
    assert {r["path"] for r in removes} == {p for p, f in live.items() if f["partitionValues"]["p"] in written}
    assert {a["partitionValues"]["p"] for a in adds} == written
    assert info["operationParameters"]["isDynamicPartitionOverwrite"] is True
    assert info["operationParameters"]["mode"] == mode
    assert info["operationMetrics"]["numRemovedFiles"] == str(len(removes))


def test_format_delta_option_and_session_conf(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root)
    new: list[Row] = [(100, "a", 1), (101, "d", 2)]
    spark.createDataFrame(new, SCHEMA).write.format("delta").mode("overwrite") \
        .option("partitionOverwriteMode", "dynamic").save(str(root))
    _check_commit(root, latest_version(root), new)
    model = _replaced(model, new)
    assert_all_readers(spark, root, COLUMNS, model)

    spark.conf.set(CONF_PARTITION_OVERWRITE_MODE, "dynamic")
    try:
        new = [(200, "b", 3)]
        spark.createDataFrame(new, SCHEMA).write.format("delta").mode("overwrite").save(str(root))
        _check_commit(root, latest_version(root), new)
        model = _replaced(model, new)
        assert_all_readers(spark, root, COLUMNS, model)

        before = files_state(root)  # refused before anything is written, the table unchanged
        writer = spark.createDataFrame([(300, "a", 1)], SCHEMA).write.format("delta").mode("overwrite")
        with pytest.raises(InvalidArgumentError, match="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE"):
            writer.option("replaceWhere", "p = 'a'").option("partitionOverwriteMode", "dynamic").save(str(root))
        with pytest.raises(InvalidArgumentError, match="DELTA_ILLEGAL_OPTION"):
            spark.createDataFrame([(300, "a", 1)], SCHEMA).write.format("delta").mode("overwrite") \
                .option("partitionOverwriteMode", "adaptive").save(str(root))
        assert files_state(root) == before

        # the option wins over the conf: static replaces the whole table
        new = [(400, "c", 4)]
        spark.createDataFrame(new, SCHEMA).write.format("delta").mode("overwrite") \
            .option("partitionOverwriteMode", "static").save(str(root))
        assert "isDynamicPartitionOverwrite" not in commit(root, latest_version(root))[0]["operationParameters"]
        assert_all_readers(spark, root, COLUMNS, new)
    finally:
        spark.conf.unset(CONF_PARTITION_OVERWRITE_MODE)


def test_dvengine_write_of_a_spark_frame(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root)
    new: list[Row] = [(100, "b", 1), (101, None, 2)]
    version = dvengine.write(spark.createDataFrame(new, SCHEMA), str(root), mode="overwrite",
                             partitionOverwriteMode="DYNAMIC")
    _check_commit(root, version, new)
    assert_all_readers(spark, root, COLUMNS, _replaced(model, new))


def test_sql_insert_overwrite_under_the_dynamic_conf(spark: Any, tmp_path: Path, dynamic_conf: None) -> None:
    root = tmp_path / "t"
    model = seed(root)
    new: list[Row] = [(100, "a", 1)]  # a query: written by Spark
    dvengine.sql(spark, f"INSERT OVERWRITE delta.`{root}` SELECT CAST(100 AS BIGINT) AS id, 'a' AS p, CAST(1 AS BIGINT) AS v")
    _check_commit(root, latest_version(root), new)
    assert commit(root, latest_version(root))[0]["operationParameters"]["partitionBy"] == "[]"
    model = _replaced(model, new)
    new = [(101, "c", 2)]  # VALUES: written in-process, the session's conf still applies
    dvengine.sql(spark, f"INSERT OVERWRITE delta.`{root}` VALUES (101, 'c', 2)")
    _check_commit(root, latest_version(root), new)
    assert_all_readers(spark, root, COLUMNS, _replaced(model, new))
