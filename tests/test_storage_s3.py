"""Tables on an S3-compatible store (moto on 127.0.0.1), with no SparkSession.

Every version dvengine writes is read back by dvengine, delta-rs (same endpoint) and DuckDB
(httpfs + delta) and compared with an in-memory model; failures of the store (missing bucket,
refused credentials, unreachable endpoint, no conditional put) must raise typed errors naming
the URI and leave the table as it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from interop import sort_rows
from s3_support import (  # noqa: F401
    S3Server,
    free_port,
    no_ambient_credentials,
    rows_delta_rs_s3,
    rows_duckdb_s3,
    s3_server,
    set_moto_auth,
)
from store_rows import COLUMNS, Model, arrow_rows, dvengine_rows, make_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    ConditionalPutUnsupportedError,
    StorageAccessError,
    StorageError,
    StorageUnreachableError,
    TableNotFoundError,
    UnsupportedStorageError,
)
from dvengine.log import latest_version, load_snapshot


def _check_all_readers(server: S3Server, uri: str, model: Model) -> None:
    want = sort_rows(list(model.values()))
    assert dvengine_rows(uri, server.options) == want, "dvengine"
    assert rows_delta_rs_s3(server, uri, COLUMNS) == want, "delta-rs"
    assert rows_duckdb_s3(server, uri, COLUMNS) == want, "duckdb"


@pytest.fixture
def bucket(s3_server: S3Server) -> str:  # noqa: F811
    return s3_server.new_bucket()


def test_lifecycle_every_version_matches_model(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """create, append, DELETE (inline DV, file DV), UPDATE, MERGE, overwrite, OPTIMIZE, RESTORE, VACUUM."""
    server = s3_server
    uri = f"s3a://{bucket}/tables/events"  # s3a:// and s3:// name the same table
    canonical = f"s3://{bucket}/tables/events"
    opts = server.options
    versions: dict[int, Model] = {}

    def record(version: int, model: Model) -> None:
        versions[version] = dict(model)
        assert latest_version(canonical) == version
        _check_all_readers(server, canonical, model)

    model: Model = {r[0]: r for r in make_rows(range(200))}
    v = dvengine.write(
        arrow_rows(list(model.values())), uri, partitionBy=["part"], storage_options=opts,
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    record(v, model)

    model.update({r[0]: r for r in make_rows(range(200, 260))})
    record(dvengine.write(arrow_rows(make_rows(range(200, 260))), uri, mode="append", storage_options=opts), model)

    table = DeltaTable.forPath(None, uri, storage_options=opts)
    metrics = table.delete("id = 5", mode="dv")  # one row: an inline DV
    assert metrics["numDeletionVectorsAdded"] == 1
    model.pop(5)
    record(metrics["version"], model)

    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")  # every DV to a file
    metrics = table.delete("id % 20 = 3", mode="dv")
    for i in [k for k in model if k % 20 == 3]:
        model.pop(i)
    dv_keys = [k for k in server.keys(bucket, "tables/events/") if "deletion_vector_" in k]
    assert dv_keys, "file DVs were written to the store"
    record(metrics["version"], model)
    monkeypatch.delenv("DVENGINE_DV_INLINEMAXBYTES")

    metrics = table.update("id < 10", {"val": "val + 1000"})
    for i in [k for k in model if k < 10]:
        model[i] = (i, model[i][1], model[i][2] + 1000)
    update_version = metrics["version"]
    record(update_version, model)

    source = arrow_rows([(i, f"p{i % 3}", -i) for i in range(250, 270)])
    merged = (
        table.alias("t").merge(source, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    )
    model.update({i: (i, f"p{i % 3}", -i) for i in range(250, 270)})
    record(merged["version"], model)

    compaction = table.optimize().executeCompaction()
    assert compaction["metrics"]["numFilesAdded"] >= 1
    record(latest_version(canonical), model)

    restored_to = update_version
    table.restoreToVersion(restored_to)
    model = dict(versions[restored_to])
    record(latest_version(canonical), model)

    over = make_rows(range(1000, 1010), val=7)
    record(dvengine.write(arrow_rows(over), uri, mode="overwrite", storage_options=opts), {r[0]: r for r in over})
    model = {r[0]: r for r in over}

    # time travel: every version through dvengine and delta-rs (DuckDB reads the latest only)
    for version, expected in versions.items():
        want = sort_rows(list(expected.values()))
        assert dvengine_rows(canonical, opts, version) == want, f"dvengine v{version}"
        assert rows_delta_rs_s3(server, canonical, COLUMNS, version) == want, f"delta-rs v{version}"

    history = table.history()
    ops = [h["operation"] for h in sorted(history, key=lambda h: h["version"])]
    assert ops == ["WRITE", "WRITE", "DELETE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE", "RESTORE", "WRITE"]

    # change data feed of the UPDATE: pre- and post-images of the 10 rows (id 5 was deleted before)
    changes = table.changes(startingVersion=update_version, endingVersion=update_version).to_pylist()
    pre = sort_rows([(c["id"], c["val"]) for c in changes if c["_change_type"] == "update_preimage"])
    post = sort_rows([(c["id"], c["val"]) for c in changes if c["_change_type"] == "update_postimage"])
    assert pre == sort_rows([(i, i * 10) for i in range(10) if i != 5 and i % 20 != 3])
    assert post == sort_rows([(i, i * 10 + 1000) for i in range(10) if i != 5 and i % 20 != 3])
    assert any("/_change_data/" in k for k in server.keys(bucket, "tables/events/"))

    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_RETENTIONDURATIONCHECK_ENABLED", "false")
    before = server.keys(bucket, "tables/events/")
    report = table.vacuumReport(0)
    after = server.keys(bucket, "tables/events/")
    deleted = set(before) - set(after)
    assert report["numFilesDeleted"] == len(deleted) > 0
    assert {f"tables/events/{f}" for f in report["files"]} == deleted
    assert all(not k.startswith("tables/events/_delta_log/") for k in deleted)
    # what is left: the log plus exactly the files the latest version reads
    live = {f"tables/events/{a.path}" for a in load_snapshot(canonical).files}
    assert {k for k in after if "/_delta_log/" not in k} == live
    _check_all_readers(server, canonical, model)


def test_environment_variables_configure_the_store(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No storage_options at all: the standard AWS_* variables are enough (as for delta-rs)."""
    for key, value in s3_server.options.items():
        monkeypatch.setenv(key, value)
    uri = f"s3://{bucket}/env-table"
    dvengine.write(arrow_rows(make_rows(range(5))), uri)
    DeltaTable.forPath(None, uri).delete("id = 1")
    assert dvengine_rows(uri, {}) == sort_rows([r for r in make_rows(range(5)) if r[0] != 1])


def test_hadoop_conf_s3a_settings(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    """forPath's hadoopConf fs.s3a.* keys (as a Spark user sets them) reach the store."""
    uri = f"s3a://{bucket}/hadoop-table"
    dvengine.write(arrow_rows(make_rows(range(4))), uri, storage_options=s3_server.options)
    conf = {
        "fs.s3a.endpoint": f"127.0.0.1:{s3_server.port}",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "testing-key",
        "fs.s3a.secret.key": "testing-secret",
        "fs.s3a.endpoint.region": "us-east-1",
    }
    table = DeltaTable.forPath(None, f"s3a://{bucket}/hadoop-table/", hadoopConf=conf)
    assert table.toArrow().num_rows == 4


# --- errors: typed, naming the URI, table unchanged ------------------------------------------------


def test_missing_bucket(s3_server: S3Server) -> None:  # noqa: F811
    uri = "s3://no-such-bucket-here/t"
    with pytest.raises(StorageError, match="no-such-bucket-here") as info:
        DeltaTable.forPath(None, uri, storage_options=s3_server.options)
    assert "does not exist" in str(info.value)
    with pytest.raises(StorageError, match="no-such-bucket-here"):
        dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=s3_server.options)


def test_table_not_found_in_existing_bucket(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    with pytest.raises(TableNotFoundError, match=f"s3://{bucket}/nothing"):
        DeltaTable.forPath(None, f"s3://{bucket}/nothing", storage_options=s3_server.options)


def test_refused_credentials(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    uri = f"s3://{bucket}/auth"
    dvengine.write(arrow_rows(make_rows(range(6))), uri, storage_options=s3_server.options)
    table = DeltaTable.forPath(None, uri, storage_options=s3_server.options)
    keys = s3_server.keys(bucket)
    set_moto_auth(s3_server, enforce=True)  # moto now checks credentials: ours name no IAM user
    try:
        with pytest.raises(StorageAccessError, match=uri):
            table.delete("id = 2")
        bad = {**s3_server.options, "AWS_SECRET_ACCESS_KEY": "wrong"}
        with pytest.raises(StorageAccessError, match=uri):
            DeltaTable.forPath(None, uri + "/", storage_options=bad)
    finally:
        set_moto_auth(s3_server, enforce=False)
    assert s3_server.keys(bucket) == keys
    assert dvengine_rows(uri, s3_server.options) == sort_rows(make_rows(range(6)))


def test_unreachable_endpoint(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: connection refused, retried briefly, then typed
    opts = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "max_retries": "1", "retry_timeout": "2",
    }
    uri = f"s3://closed-port-{port}/t"
    with pytest.raises(StorageUnreachableError, match=uri):
        DeltaTable.forPath(None, uri, storage_options=opts)
    with pytest.raises(StorageUnreachableError, match=uri):
        dvengine.write(arrow_rows(make_rows(range(2))), uri, storage_options=opts)


class _DropConditionalHeaders(BaseHTTPRequestHandler):
    """A loopback proxy to moto that strips If-None-Match: a store without conditional put."""

    target_port = 0

    def _forward(self) -> None:
        import http.client

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("if-none-match", "if-match")}
        conn = http.client.HTTPConnection("127.0.0.1", self.target_port, timeout=10)
        conn.request(self.command, self.path, body=body or None, headers=headers)
        reply = conn.getresponse()
        data = reply.read()
        self.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def no_conditional_put(s3_server: S3Server) -> Iterator[dict[str, str]]:  # noqa: F811
    handler = type("Handler", (_DropConditionalHeaders,), {"target_port": s3_server.port})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield {**s3_server.options, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.server_address[1]}"}
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_store_without_conditional_put_refused_before_writing(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    no_conditional_put: dict[str, str],
) -> None:
    uri = f"s3://{bucket}/noput"
    dvengine.write(arrow_rows(make_rows(range(8))), uri, storage_options=s3_server.options)
    keys = s3_server.keys(bucket)
    table = DeltaTable.forPath(None, uri, storage_options=no_conditional_put)
    with pytest.raises(ConditionalPutUnsupportedError, match="AWS_S3_ALLOW_UNSAFE_RENAME") as info:
        table.delete("id = 3")
    assert uri in str(info.value)
    assert isinstance(info.value, UnsupportedStorageError)
    assert s3_server.keys(bucket) == keys  # not even the probe is left behind
    assert latest_version(uri) == 0
    # the documented single-writer escape hatch
    unsafe = {**no_conditional_put, "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    assert DeltaTable.forPath(None, uri, storage_options=unsafe).delete("id = 3")["version"] == 1
    assert dvengine_rows(uri, s3_server.options) == sort_rows([r for r in make_rows(range(8)) if r[0] != 3])


def test_conditional_put_disabled_by_configuration(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    uri = f"s3://{bucket}/disabled"
    opts = {**s3_server.options, "AWS_CONDITIONAL_PUT": "disabled"}
    with pytest.raises(ConditionalPutUnsupportedError, match=uri):
        dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=opts)
    assert s3_server.keys(bucket) == []


# --- concurrency and crashes -----------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import json, os, sys
    import pyarrow as pa
    import dvengine
    uri, who, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    opts = json.loads(os.environ["S3_TEST_OPTIONS"])
    from dvengine.errors import MaxCommitAttemptsExceededError
    versions = []
    for i in range(count):
        row = pa.table({"id": pa.array([who * 1000 + i], pa.int64()), "part": ["w%d" % who],
                        "val": pa.array([i], pa.int64())})
        while True:
            try:
                versions.append(dvengine.write(row, uri, mode="append", storage_options=opts))
                break
            except MaxCommitAttemptsExceededError:  # lost 10 races in a row: nothing was committed, try again
                continue
    print(json.dumps(versions))
    """
)


def _child_env(options: dict[str, str]) -> dict[str, str]:
    import json

    env = dict(os.environ)
    env["S3_TEST_OPTIONS"] = json.dumps(options)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return env


def test_four_processes_race_on_one_table(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    import json

    uri = f"s3://{bucket}/race"
    dvengine.write(arrow_rows([]), uri, storage_options=s3_server.options)
    writers, commits = 4, 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, uri, str(w), str(commits)],
            env=_child_env(s3_server.options), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(writers)
    ]
    reported: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        reported.extend(json.loads(out.strip().splitlines()[-1]))
    total = writers * commits
    assert sorted(reported) == list(range(1, total + 1))  # each op committed exactly once, no gaps
    commit_keys = [k for k in s3_server.keys(bucket, "race/_delta_log/") if k.endswith(".json")]
    assert [int(k.rsplit("/", 1)[1][:20]) for k in commit_keys] == list(range(total + 1))
    want = sort_rows([(w * 1000 + i, f"w{w}", i) for w in range(writers) for i in range(commits)])
    assert dvengine_rows(uri, s3_server.options) == want
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == want


@pytest.mark.parametrize(("stage", "advances"), [("commit.before_link", False), ("commit.after_link", True)])
def test_writer_killed_mid_commit(s3_server: S3Server, bucket: str, stage: str, advances: bool) -> None:  # noqa: F811
    uri = f"s3://{bucket}/killed"
    dvengine.write(arrow_rows(make_rows(range(10))), uri, storage_options=s3_server.options)
    env = {**_child_env(s3_server.options), "DVENGINE_FAULT_INJECT": stage}
    script = (
        "import json, os; from dvengine import DeltaTable; "
        f"DeltaTable.forPath(None, {uri!r}, storage_options=json.loads(os.environ['S3_TEST_OPTIONS'])).delete('id = 4')"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr[-2000:]
    expected = [r for r in make_rows(range(10)) if not (advances and r[0] == 4)]
    assert latest_version(uri) == (1 if advances else 0)
    _check_all_readers(s3_server, uri, {r[0]: r for r in expected})


def test_cli_with_storage_options(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--storage-option KEY=VALUE`` on create / delete / show; no Spark is started for any of them."""
    import pyarrow.parquet as pq

    import dvengine.engine.spark.session
    from dvengine.cli.main import main

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("no SparkSession is needed for an object-store table from the CLI")

    monkeypatch.setattr(dvengine.engine.spark.session, "quiet_session", refuse)

    source = tmp_path / "rows.parquet"
    pq.write_table(arrow_rows(make_rows(range(6))), source)
    uri = f"s3://{bucket}/cli"
    flags = [arg for k, v in s3_server.options.items() for arg in ("--storage-option", f"{k}={v}")]
    assert main(["create", uri, "--from", str(source), *flags]) == 0
    assert main(["delete", uri, "--where", "id = 2", *flags]) == 0
    capsys.readouterr()
    assert main(["show", uri, "--format", "jsonl", *flags]) == 0
    import json

    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sort_rows([tuple(d[c] for c in COLUMNS) for d in shown]) == sort_rows([r for r in make_rows(range(6)) if r[0] != 2])
    assert main(["show", uri, "--storage-option", "no-equals-sign"]) == 2


def test_clone_between_folder_and_store(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Deep clones copy data and DV files across stores; a shallow clone points at the source's URIs."""
    opts = s3_server.options
    source = f"s3://{bucket}/clone-src"
    dvengine.write(arrow_rows(make_rows(range(40))), source, storage_options=opts)
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    DeltaTable.forPath(None, source, storage_options=opts).delete("id % 10 = 1", mode="dv")  # a file DV
    want = sort_rows([r for r in make_rows(range(40)) if r[0] % 10 != 1])
    table = DeltaTable.forPath(None, source, storage_options=opts)
    deep_s3 = f"s3://{bucket}/clone-deep"
    table.clone(deep_s3, isShallow=False)
    assert dvengine_rows(deep_s3, opts) == want
    assert rows_delta_rs_s3(s3_server, deep_s3, COLUMNS) == want
    assert any(k.startswith("clone-deep/deletion_vector_") for k in s3_server.keys(bucket, "clone-deep/"))
    deep_local = str(tmp_path / "deep-local")
    table.clone(deep_local, isShallow=False)
    assert dvengine_rows(deep_local, {}) == want
    shallow = f"s3://{bucket}/clone-shallow"
    table.clone(shallow, isShallow=True)
    assert dvengine_rows(shallow, opts) == want
    assert [k for k in s3_server.keys(bucket, "clone-shallow/") if "/_delta_log/" not in k] == []


def test_not_yet_served_on_stores_refused(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    uri = f"s3://{bucket}/refused"
    dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=s3_server.options)
    keys = s3_server.keys(bucket)
    table = DeltaTable.forPath(None, uri, storage_options=s3_server.options)
    with pytest.raises(UnsupportedStorageError, match=uri):
        table.generate("symlink_format_manifest")
    with pytest.raises(UnsupportedStorageError, match=f"s3://{bucket}/parquet"):
        DeltaTable.convertToDelta(None, f"parquet.`s3://{bucket}/parquet`")
    assert s3_server.keys(bucket) == keys


def test_endpoint_that_never_answers_times_out() -> None:
    """A loopback server that accepts connections and stays silent: the request timeout fires, typed."""
    import socket
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    opts = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "AWS_TIMEOUT": "1s", "max_retries": "0",
    }
    uri = f"s3://silent-{port}/t"
    try:
        started = time.monotonic()
        with pytest.raises(StorageUnreachableError, match=uri):
            DeltaTable.forPath(None, uri, storage_options=opts)
        assert time.monotonic() - started < 10
    finally:
        listener.close()
