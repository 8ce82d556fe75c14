"""``format("delta")`` writes with ``userMetadata`` / ``dataChange`` and the session conf
``spark.databricks.delta.commitInfo.userMetadata`` on a SparkSession, read back from the raw log,
``dvengine.sql`` DESCRIBE HISTORY and delta-rs. The in-process cases (every refusal, the change
data feed, DuckDB) are in tests/test_user_metadata_data_change.py; these need the JVM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as DeltaRsTable
from dml_helpers import spark_conf
from interop import rows_delta_rs, sort_rows
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.commit.commit_info import CONF_USER_METADATA
from dvengine.errors import ReplaceWhereDataChangeFalseError

COLUMNS = ["id", "part", "name"]
SCHEMA = "id long, part string, name string"


def _rows(ids: range) -> list[tuple[int, str, str]]:
    return [(i, f"p{i % 2}", f"n{i}") for i in ids]


def _info(root: Path, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in commit_actions(root, version) if "commitInfo" in a)  # type: ignore[no-any-return]


def test_user_metadata_option_and_session_conf_reach_history(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    spark.createDataFrame(_rows(range(6)), SCHEMA).write.format("delta").partitionBy("part") \
        .option("userMetadata", "load #1").save(str(root))
    with spark_conf(spark, CONF_USER_METADATA, "session tag"):
        spark.createDataFrame(_rows(range(6, 8)), SCHEMA).write.format("delta").mode("append").save(str(root))
        spark.createDataFrame(_rows(range(8, 9)), SCHEMA).write.format("delta").mode("append") \
            .option("userMetadata", "option wins").save(str(root))
        DeltaTable.forPath(spark, root).delete("id = 1")
    DeltaTable.forPath(spark, root).delete("id = 2")  # conf unset again: nothing logged
    assert spark.conf.get(CONF_USER_METADATA, None) is None

    expected = {0: "load #1", 1: "session tag", 2: "option wins", 3: "session tag", 4: None}
    assert {v: _info(root, v).get("userMetadata") for v in range(latest_version(root) + 1)} == expected
    history = dvengine.sql(spark, f"DESCRIBE HISTORY delta.`{root}`").collect()
    assert {r["version"]: r["userMetadata"] for r in history} == expected
    assert {h["version"]: h.get("userMetadata") for h in DeltaRsTable(str(root)).history()} == expected


def test_data_change_false_option_rewrites_a_partition_without_a_data_change(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = _rows(range(8))
    frame = spark.createDataFrame(model, SCHEMA)
    frame.write.format("delta").partitionBy("part").save(str(root))
    spark.createDataFrame(_rows(range(8, 10)), SCHEMA).write.format("delta").mode("append").save(str(root))
    model += _rows(range(8, 10))
    p0 = [r for r in model if r[1] == "p0"]
    live = pa.table(DeltaRsTable(str(root)).get_add_actions(flatten=True)).column("path").to_pylist()
    old_p0 = {f for f in live if f.startswith("part=p0")}  # delta-rs's live files
    assert len(old_p0) >= 2
    spark.createDataFrame(p0, SCHEMA).coalesce(1).write.format("delta").mode("overwrite") \
        .option("replaceWhere", "part = 'p0'").option("dataChange", "false").save(str(root))
    version = latest_version(root)
    files = [(k, a[k]) for a in commit_actions(root, version) for k in ("add", "remove", "cdc") if k in a]
    assert {k for k, _ in files} == {"add", "remove"} and all(f["dataChange"] is False for _, f in files)
    assert {f["path"] for k, f in files if k == "remove"} == old_p0
    assert [f["path"][:8] for k, f in files if k == "add"] == ["part=p0/"]  # one compacted file
    assert rows_delta_rs(root, COLUMNS) == sort_rows(model)

    before = latest_version(root)
    with pytest.raises(ReplaceWhereDataChangeFalseError, match="Filters: `id` > 3"):
        spark.createDataFrame(p0, SCHEMA).write.format("delta").mode("overwrite") \
            .option("replaceWhere", "part = 'p0' AND id > 3").option("dataChange", "false").save(str(root))
    assert latest_version(root) == before
