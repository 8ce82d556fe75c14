"""VACUUM FULL's folders on S3 (moto's server on 127.0.0.1), as Delta's ``gc`` over S3A.

A store's folders are key prefixes. A prefix holding nothing older than the cutoff and no valid
file is in Delta's diff (one row: the listed directory), so ``numFilesToDelete`` and a dry run's
listing count it; S3A's non-recursive delete of a non-empty directory fails, so it is not deleted
and not in ``numDeletedFiles``. Truth: the keys in the bucket (boto3), the raw commits, delta-rs
and DuckDB reading every version.
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
from dvengine.maintenance.vacuum import vacuum

LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"


def test_a_prefix_holding_only_young_objects_is_counted_not_deleted(
    s3_server: S3Server,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LOGGING_ENV, "true")
    bucket = s3_server.new_bucket()
    uri, opts = f"s3://{bucket}/t", s3_server.options
    client = s3_server.client()
    rows: dict[int, list[Row]] = {0: [(i, "a") for i in range(5)]}
    table = pa.table({"id": pa.array([r[0] for r in rows[0]], pa.int64()), "p": [r[1] for r in rows[0]]})
    assert dvengine.write(table, uri, partitionBy=["p"], storage_options=opts) == 0
    client.put_object(Bucket=bucket, Key="t/old/part-00000-orphan.c000.snappy.parquet", Body=b"orphan")
    time.sleep(1.1)  # S3's LastModified has whole seconds
    cutoff = int(time.time() * 1000)
    time.sleep(1.1)
    client.put_object(Bucket=bucket, Key="t/young/part-00001-in-flight.c000.snappy.parquet", Body=b"young")

    dry = vacuum(uri, retention_hours=0, enforce_retention=False, now_ms=cutoff, dry_run=True)
    # "old" holds an old file (count 2), "p=a" a valid one; "young" nothing old: in the diff
    assert sorted(dry["files"]) == ["old/part-00000-orphan.c000.snappy.parquet", "young"]
    assert dry["numFilesToDelete"] == 2

    done = vacuum(uri, retention_hours=0, enforce_retention=False, now_ms=cutoff)
    assert done["files"] == ["old/part-00000-orphan.c000.snappy.parquet"] and done["numFilesDeleted"] == 1
    keys = s3_server.keys(bucket, "t/")
    assert "t/young/part-00001-in-flight.c000.snappy.parquet" in keys
    assert "t/old/part-00000-orphan.c000.snappy.parquet" not in keys

    def commit_info(version: int) -> dict[str, Any]:
        body = client.get_object(Bucket=bucket, Key=f"t/_delta_log/{version:020d}.json")["Body"].read()
        info: dict[str, Any] = json.loads(body.decode().splitlines()[0])["commitInfo"]
        return info

    start, end = commit_info(1), commit_info(2)
    assert (start["operation"], end["operation"]) == ("VACUUM START", "VACUUM END")
    assert json.dumps(start["operationMetrics"], sort_keys=True) == json.dumps(
        {"numFilesToDelete": "2", "sizeOfDataToDelete": str(len(b"orphan"))}, sort_keys=True)
    # the folders: p=a, old, young, plus the table root
    assert json.dumps(end["operationMetrics"], sort_keys=True) == json.dumps(
        {"numDeletedFiles": "1", "numVacuumedDirectories": "4"}, sort_keys=True)
    rows[1] = rows[2] = rows[0]
    assert_versions_read(uri, rows, [0, 1, 2], ["id", "p"], opts)
