"""Idempotent writes: txnAppId / txnVersion on writes, the session confs on DML and MERGE.

Truth: the commit files themselves (a ``txn`` action with appId, version, lastUpdated; no new
commit for a repeat), the rows against a model, and delta-rs's ``transaction_version``, which
reads the watermark through its own log replay (checkpoint included).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from dml_helpers import spark_conf
from interop import rows_arrow, rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import ConcurrentTransactionError, InvalidArgumentError
from dvengine.log import load_snapshot
from dvengine.log.checkpoint_writer import write_checkpoint

COLS = ["id", "v"]


def _data(ids: list[int], v: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def _versions(path: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (path / "_delta_log").glob("*.json"))


def _txns(path: Path, version: int) -> list[dict[str, Any]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line)["txn"] for line in lines if "txn" in json.loads(line)]


def test_write_records_txn_and_a_repeat_commits_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    before = int(time.time() * 1000)
    assert dvengine.write(_data([1, 2]), str(path), txnAppId="stream-a", txnVersion=0) == 0
    (txn,) = _txns(path, 0)
    assert txn["appId"] == "stream-a" and txn["version"] == 0 and txn["lastUpdated"] >= before
    assert dvengine.write(_data([3]), str(path), mode="append", txnAppId="stream-a", txnVersion="1") == 1
    # repeats (same or older version) return the current version and write nothing
    assert dvengine.write(_data([3]), str(path), mode="append", txnAppId="stream-a", txnVersion=1) == 1
    assert dvengine.write(_data([1, 2]), str(path), mode="error", txnAppId="stream-a", txnVersion=0) == 1
    assert _versions(path) == [0, 1]
    assert sorted(p.name for p in path.glob("*.parquet")) == sorted(a.path for a in load_snapshot(str(path)).files)
    # another application is independent
    assert dvengine.write(_data([4]), str(path), mode="append", txnAppId="stream-b", txnVersion=0) == 2
    assert rows_arrow(path, COLS) == sort_rows([(i, 0) for i in (1, 2, 3, 4)])
    rs = RsTable(str(path))
    assert rs.transaction_version("stream-a") == 1 and rs.transaction_version("stream-b") == 0
    assert load_snapshot(str(path)).app_transactions["stream-a"].version == 1


@pytest.mark.parametrize(
    ("app_id", "version", "fragment"),
    [("a", None, "txnAppId was given without txnVersion"), (None, 3, "txnVersion was given without txnAppId"),
     ("a", -1, "integer >= 0"), ("a", "x", "integer >= 0"), ("", 1, "non-empty"), ("a", True, "integer >= 0")],
)
def test_bad_txn_options_are_refused_before_writing(tmp_path: Path, app_id: Any, version: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgumentError, match=fragment):
        dvengine.write(_data([1]), str(tmp_path / "t"), txnAppId=app_id, txnVersion=version)
    assert not (tmp_path / "t").exists()


def _dml_txn(monkeypatch: pytest.MonkeyPatch, app_id: str, version: int) -> None:
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_WRITE_TXNAPPID", app_id)
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_WRITE_TXNVERSION", str(version))


def test_dml_and_merge_honour_the_txn_confs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    dvengine.write(_data(list(range(10))), str(path))
    t = DeltaTable.forPath(None, path)
    _dml_txn(monkeypatch, "job", 5)
    first = t.delete("id = 1")
    assert first["version"] == 1 and first["txnSkipped"] is False
    assert _txns(path, 1)[0]["version"] == 5
    repeat = t.delete("id = 2")  # same (appId, version): the batch already ran, nothing happens
    assert repeat["version"] is None and repeat["txnSkipped"] is True and repeat["numDeletedRows"] == 0
    _dml_txn(monkeypatch, "job", 6)
    assert t.update("id = 3", {"v": "30"})["version"] == 2
    assert t.update("id = 3", {"v": "31"})["txnSkipped"] is True
    _dml_txn(monkeypatch, "job", 7)
    source = _data([4, 100], 40)
    merged = t.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert merged["version"] == 3 and merged["numTargetRowsInserted"] == 1
    again = t.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert again["txnSkipped"] is True and again["version"] is None and again["numTargetRowsInserted"] == 0
    assert _versions(path) == [0, 1, 2, 3]
    expected = [(i, 30 if i == 3 else 40 if i == 4 else 0) for i in range(10) if i != 1] + [(100, 40)]
    assert rows_arrow(path, COLS) == sort_rows(expected)
    assert rows_delta_rs(path, COLS) == sort_rows(expected)
    assert RsTable(str(path)).transaction_version("job") == 7
    # a command that changes nothing records no watermark either (nothing to repeat)
    _dml_txn(monkeypatch, "job", 8)
    assert t.delete("id = 999")["version"] is None and _versions(path) == [0, 1, 2, 3]


def test_write_falls_back_to_the_txn_confs_and_options_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _dml_txn(monkeypatch, "ingest", 1)
    assert dvengine.write(_data([1]), str(path)) == 0
    assert dvengine.write(_data([1]), str(path), mode="append") == 0  # the conf's (ingest, 1) again: skipped
    assert dvengine.write(_data([2]), str(path), mode="append", txnAppId="ingest", txnVersion=2) == 1  # options win
    assert [t["version"] for t in _txns(path, 1)] == [2]
    assert rows_arrow(path, COLS) == [(1, 0), (2, 0)]


def test_bad_txn_conf_is_refused_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    dvengine.write(_data([1]), str(path))
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_WRITE_TXNAPPID", "job")
    with pytest.raises(InvalidArgumentError, match="spark.databricks.delta.write.txnAppId was given without"):
        DeltaTable.forPath(None, path).delete("id = 1")
    assert _versions(path) == [0]


def _keep_only_a_checkpoint(path: Path) -> None:
    """Checkpoint the latest version and delete every JSON commit: only the checkpoint can still tell."""
    write_checkpoint(load_snapshot(str(path)))
    for commit in (path / "_delta_log").glob("*.json"):
        commit.unlink()


def test_checkpoints_keep_txn(tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(_data([1]), str(path), txnAppId="a", txnVersion=3)
    dvengine.write(_data([2]), str(path), mode="append", txnAppId="b", txnVersion=9)
    _keep_only_a_checkpoint(path)
    snapshot = load_snapshot(str(path))
    assert {k: t.version for k, t in snapshot.app_transactions.items()} == {"a": 3, "b": 9}
    rs = RsTable(str(path))
    assert rs.transaction_version("a") == 3 and rs.transaction_version("b") == 9
    assert dvengine.write(_data([3]), str(path), mode="append", txnAppId="a", txnVersion=3) == 1  # a repeat


def test_expired_watermark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "t"
    conf = {"delta.setTransactionRetentionDuration": "interval 1 seconds"}
    dvengine.write(_data([1]), str(path), configuration=conf, txnAppId="a", txnVersion=1)
    assert load_snapshot(str(path)).app_transactions["a"].version == 1
    time.sleep(1.1)
    assert "a" not in load_snapshot(str(path)).app_transactions
    assert dvengine.write(_data([1]), str(path), mode="append", txnAppId="a", txnVersion=1) == 1  # not a repeat now
    with pytest.raises(InvalidArgumentError, match="setTransactionRetentionDuration"):
        dvengine.write(_data([1]), str(tmp_path / "u"), configuration={"delta.setTransactionRetentionDuration": "soon"})


def test_a_checkpoint_written_after_expiry_leaves_the_expired_watermark_out(tmp_path: Path) -> None:
    path = tmp_path / "t"
    conf = {"delta.setTransactionRetentionDuration": "interval 1 seconds"}
    dvengine.write(_data([1]), str(path), configuration=conf, txnAppId="old", txnVersion=4)
    time.sleep(1.1)
    dvengine.write(_data([2]), str(path), mode="append", txnAppId="new", txnVersion=7)
    _keep_only_a_checkpoint(path)
    checkpoint = next((path / "_delta_log").glob("*.checkpoint.parquet"))
    txns = [row for row in pq.read_table(checkpoint).column("txn").to_pylist() if row is not None]
    assert [(t["appId"], t["version"]) for t in txns] == [("new", 7)]
    rs = RsTable(str(path))
    assert rs.transaction_version("old") is None and rs.transaction_version("new") == 7
    assert rows_arrow(path, ["id"]) == rows_delta_rs(path, ["id"]) == [(1,), (2,)]


def test_concurrent_writers_of_one_app_id_conflict_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.commands import write as write_module

    path = tmp_path / "t"
    dvengine.write(_data([1]), str(path))
    stale = load_snapshot(str(path))
    dvengine.write(_data([2]), str(path), mode="append", txnAppId="a", txnVersion=1)
    monkeypatch.setattr(write_module, "load_snapshot", lambda root: stale)
    with pytest.raises(ConcurrentTransactionError):
        dvengine.write(_data([3]), str(path), mode="append", txnAppId="a", txnVersion=2)
    assert _versions(path) == [0, 1]


def test_spark_writer_options_and_dml_confs(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 0), (2, 0)], "id long, v long")
    df.write.format("delta").option("txnAppId", "q").option("txnVersion", "0").save(path)
    df.write.format("delta").mode("append").option("txnAppId", "q").option("txnVersion", "0").save(path)  # repeat
    assert _versions(Path(path)) == [0]
    with spark_conf(spark, "spark.databricks.delta.write.txnAppId", "q"), spark_conf(
        spark, "spark.databricks.delta.write.txnVersion", "1"
    ):
        DeltaTable.forPath(spark, path).delete("id = 1")
        DeltaTable.forPath(spark, path).delete("id = 2")  # the same batch again: skipped
    assert _versions(Path(path)) == [0, 1]
    assert rows_arrow(path, COLS) == [(2, 0)]
    assert RsTable(path).transaction_version("q") == 1
