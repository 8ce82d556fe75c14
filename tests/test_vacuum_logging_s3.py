"""VACUUM START / END on S3 (moto's server on 127.0.0.1), where Delta's default differs: off.

Delta's ``VacuumCommandImpl.shouldLogVacuum`` logs only on ``supportedFsForLogging`` (``wasbs, wasbss,
abfs, abfss, adl, gs, file, hdfs``) unless ``spark.databricks.delta.vacuum.logging.enabled`` says
otherwise; ``s3``/``s3a`` is not among them. Truth: the keys in the bucket (boto3), the raw commit
files, and delta-rs and DuckDB (httpfs) reading every version.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pyarrow as pa
import pytest
from s3_support import S3Server, no_ambient_credentials, s3_server  # noqa: F401
from vacuum_model import Row, assert_versions_read

import dvengine
from dvengine import DeltaTable
from dvengine.maintenance.vacuum import vacuum

COLUMNS = ["id", "p", "v"]
LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "p": pa.array([r[1] for r in rows], pa.string()),
        "v": pa.array([r[2] for r in rows], pa.int64()),
    })


def test_s3_logs_nothing_by_default_and_start_end_when_the_conf_says_so(
    s3_server: S3Server,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(LOGGING_ENV, raising=False)
    bucket = s3_server.new_bucket()
    uri, opts = f"s3://{bucket}/t", s3_server.options
    client = s3_server.client()
    model = {i: (i, "a" if i < 10 else "b", i) for i in range(20)}
    rows: dict[int, list[Row]] = {0: sorted(model.values())}
    assert dvengine.write(_arrow(rows[0]), uri, partitionBy=["p"], storage_options=opts) == 0
    t = DeltaTable.forPath(None, uri, storage_options=opts)
    for i in [k for k, r in model.items() if r[1] == "b"]:
        del model[i]
    assert t.deleteMetrics("p = 'b'")["version"] == 1  # removes partition b's file
    rows[1] = sorted(model.values())
    client.put_object(Bucket=bucket, Key="t/p=a/part-00000-orphan.c000.snappy.parquet", Body=b"orphan")
    time.sleep(0.05)
    cutoff = int(time.time() * 1000)

    def log_keys() -> list[str]:
        return [k for k in s3_server.keys(bucket, "t/_delta_log/") if k.endswith(".json")]

    commits = log_keys()
    dry = vacuum(uri, retention_hours=0, enforce_retention=False, now_ms=cutoff, dry_run=True)
    assert len(dry["files"]) == 2  # the orphan and partition b's removed file

    # default on S3: no commit, the files are deleted all the same
    done = vacuum(uri, retention_hours=0, enforce_retention=False, now_ms=cutoff)
    assert sorted(done["files"]) == sorted(dry["files"]) and log_keys() == commits

    # conf on: START and END, written with the store's conditional PUT
    client.put_object(Bucket=bucket, Key="t/p=a/part-00001-orphan.c000.snappy.parquet", Body=b"orphan 2")
    client.put_object(Bucket=bucket, Key="t/p=c/part-00002-orphan.c000.snappy.parquet", Body=b"3")
    time.sleep(0.05)
    monkeypatch.setenv(LOGGING_ENV, "true")
    done = vacuum(uri, retention_hours=0, enforce_retention=False)
    assert sorted(done["files"]) == ["p=a/part-00001-orphan.c000.snappy.parquet", "p=c/part-00002-orphan.c000.snappy.parquet"]
    assert log_keys() == [*commits, "t/_delta_log/00000000000000000002.json", "t/_delta_log/00000000000000000003.json"]

    def only_commit_info(version: int) -> dict[str, Any]:
        body = client.get_object(Bucket=bucket, Key=f"t/_delta_log/{version:020d}.json")["Body"].read()
        actions = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        assert [list(a) for a in actions] == [["commitInfo"]]
        info: dict[str, Any] = actions[0]["commitInfo"]
        return info

    start, end = only_commit_info(2), only_commit_info(3)
    assert json.dumps(start["operationParameters"], sort_keys=True) == json.dumps(
        {"retentionCheckEnabled": False, "defaultRetentionMillis": 7 * 24 * 3_600_000, "specifiedRetentionMillis": 0},
        sort_keys=True,
    )
    assert start["operationMetrics"] == {"numFilesToDelete": "2", "sizeOfDataToDelete": str(len(b"orphan 2") + 1)}
    # the "folders" of a store are the key prefixes the listing found (p=a, p=c), plus the table root
    assert end["operationParameters"] == {"status": "COMPLETED"}
    assert end["operationMetrics"] == {"numDeletedFiles": "2", "numVacuumedDirectories": "3"}
    rows[2] = rows[3] = rows[1]
    assert_versions_read(uri, rows, [1, 2, 3], COLUMNS, opts)
