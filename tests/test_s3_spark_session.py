"""A Spark user's S3 settings reach the store: ``fs.s3a.*`` in a plain SparkSession, no AWS_* variables.

A Spark job configures S3 once, as Hadoop settings of its session (``spark.hadoop.fs.s3a.endpoint``,
keys, path style, SSL off for a local endpoint). ``DeltaTable.forPath(spark, "s3a://...")`` DML run
by the embedded executor must reach the store with exactly those settings. The job runs in a child
process with its own plain SparkSession (built by pyspark's builder, not dvengine's helper) and an
environment whose AWS_* variables are decoys (endpoint and metadata service on a closed loopback
port, wrong keys): the settings can only come from the session, and a translation that dropped
one fails on loopback instead of reaching anything else.
delta-rs then reads the table from the same server and must see the rows of the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pyarrow as pa
from interop import sort_rows
from s3_support import ACCESS_KEY, SECRET_KEY, S3Server, free_port, rows_delta_rs_s3, s3_server  # noqa: F401

import dvengine

COLUMNS = ["id", "val"]

_JOB = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    from dvengine import DeltaTable

    port, bucket, key, secret = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    spark = (
        SparkSession.builder.master("local[1]").appName("s3a-settings")
        .config("spark.ui.enabled", "false")
        .config("spark.hadoop.fs.s3a.endpoint", "127.0.0.1:" + port)
        .config("spark.hadoop.fs.s3a.access.key", key)
        .config("spark.hadoop.fs.s3a.secret.key", secret)
        .config("spark.hadoop.fs.s3a.path.style.access", "true")
        .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "false")
        .getOrCreate()
    )
    try:
        table = DeltaTable.forPath(spark, "s3a://" + bucket + "/events")
        deleted = table.deleteMetrics("id % 4 = 0")
        updated = table.updateMetrics("id = 5", {"val": "-5"})
        print(json.dumps({"delete": [deleted["version"], deleted["executionEngine"]],
                          "update": [updated["version"], updated["executionEngine"]]}))
    finally:
        spark.stop()
    """
)


def test_session_fs_s3a_settings_reach_the_store(s3_server: S3Server) -> None:  # noqa: F811
    bucket = s3_server.new_bucket()
    uri = f"s3://{bucket}/events"
    rows = [(i, i * 10) for i in range(12)]
    dvengine.write(
        pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "val": pa.array([r[1] for r in rows], pa.int64())}),
        uri,
        storage_options=s3_server.options,
    )
    # No AWS_* setting of the server: only decoys on a closed loopback port, so the rows can only
    # reach moto through the session's settings (and a dropped one fails here, on loopback).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}", "AWS_ACCESS_KEY_ID": "unconfigured",
        "AWS_SECRET_ACCESS_KEY": "unconfigured", "AWS_METADATA_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "AWS_EC2_METADATA_DISABLED": "true",
    })  # fmt: skip
    job = subprocess.run(
        [sys.executable, "-c", _JOB, str(s3_server.port), bucket, ACCESS_KEY, SECRET_KEY],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert job.returncode == 0, job.stderr[-4000:]
    result: dict[str, Any] = json.loads(job.stdout.strip().splitlines()[-1])
    assert result == {"delete": [1, "local"], "update": [2, "local"]}
    model = {r[0]: r for r in rows if r[0] % 4 != 0}
    model[5] = (5, -5)
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == sort_rows(list(model.values()))
