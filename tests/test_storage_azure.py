"""Tables on Azure Blob Storage (Azurite on 127.0.0.1), with no SparkSession.

As tests/test_storage_s3.py does for S3: every version dvengine writes is read back by dvengine,
delta-rs (same endpoint) and DuckDB (azure + delta extensions) and compared with an in-memory
model; two processes race commits (Azure's conditional create: ``If-None-Match: *``); failures of
the store (wrong account key, closed port, missing container) raise typed errors naming the URI
and leave the table as it was. Truth for the store's contents is the azure-storage-blob SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from azure_support import (  # noqa: F401
    ACCOUNT,
    AzureServer,
    azure_loopback_only,
    azure_server,
    azurite_env,
    free_port,
    rows_delta_rs_azure,
    rows_duckdb_azure,
)
from interop import sort_rows
from store_rows import COLUMNS, Model, arrow_rows, dvengine_rows, make_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import StorageAccessError, StorageError, StorageUnreachableError, TableNotFoundError
from dvengine.log import latest_version, load_snapshot, write_checkpoint
from dvengine.storage.base import CONDITIONAL_PUT_PROBE_PREFIX

# A well-formed account key that is not the account's (base64 of 64 bytes of "x").
WRONG_KEY = "eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eA=="


def _check_all_readers(server: AzureServer, uri: str, model: Model) -> None:
    want = sort_rows(list(model.values()))
    assert dvengine_rows(uri, server.options) == want, "dvengine"
    assert rows_delta_rs_azure(server, uri, COLUMNS) == want, "delta-rs"
    assert rows_duckdb_azure(server, uri, COLUMNS) == want, "duckdb"


@pytest.fixture
def container(azure_server: AzureServer) -> str:  # noqa: F811
    return azure_server.new_container()


def test_lifecycle_every_version_matches_model(
    azurite_env: AzureServer,  # noqa: F811
    container: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """create, append, DELETE (inline DV, file DV), UPDATE, MERGE, OPTIMIZE, checkpoint, time travel, VACUUM."""
    server = azurite_env
    uri = f"az://{container}/tables/events"
    opts = server.options
    prefix = "tables/events/"
    versions: dict[int, Model] = {}

    def record(version: int, model: Model) -> None:
        versions[version] = dict(model)
        assert latest_version(uri) == version
        _check_all_readers(server, uri, model)

    model: Model = {r[0]: r for r in make_rows(range(200))}
    v = dvengine.write(
        arrow_rows(list(model.values())), uri, partitionBy=["part"], storage_options=opts,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    record(v, model)

    model.update({r[0]: r for r in make_rows(range(200, 260))})
    record(dvengine.write(arrow_rows(make_rows(range(200, 260))), uri, mode="append", storage_options=opts), model)

    table = DeltaTable.forPath(None, uri, storage_options=opts)
    metrics = table.delete("id = 5", mode="dv")  # one row: an inline DV
    assert metrics["numDeletionVectorsAdded"] == 1
    assert not [k for k in server.keys(container, prefix) if "deletion_vector_" in k]
    model.pop(5)
    record(metrics["version"], model)

    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")  # every DV to a file
    metrics = table.delete("id % 20 = 3", mode="dv")
    for i in [k for k in model if k % 20 == 3]:
        model.pop(i)
    assert [k for k in server.keys(container, prefix) if "deletion_vector_" in k], "file DVs were written to the store"
    record(metrics["version"], model)

    metrics = table.update("id < 10", {"val": "val + 1000"})
    assert metrics["numDeletionVectorsAdded"] + metrics["numDeletionVectorsUpdated"] >= 1
    for i in [k for k in model if k < 10]:
        model[i] = (i, model[i][1], model[i][2] + 1000)
    record(metrics["version"], model)
    monkeypatch.delenv("DVENGINE_DV_INLINEMAXBYTES")

    source = arrow_rows([(i, f"p{i % 3}", -i) for i in range(250, 270)])
    merged = (
        table.alias("t").merge(source, "t.id = s.id", source_alias="s")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    )
    assert merged["executionEngine"] == "local"  # in-process, no Spark
    model.update({i: (i, f"p{i % 3}", -i) for i in range(250, 270)})
    record(merged["version"], model)

    compaction = table.optimize().executeCompaction()
    assert compaction["metrics"]["numFilesAdded"] >= 1
    record(latest_version(uri), model)

    # a checkpoint of the latest version: readers start from it (delta-rs, DuckDB, a cold dvengine load)
    checkpoint = write_checkpoint(load_snapshot(uri))
    assert checkpoint.removeprefix(f"az://{container}/") in server.keys(container, f"{prefix}_delta_log/")
    assert f"{prefix}_delta_log/_last_checkpoint" in server.keys(container, f"{prefix}_delta_log/")
    _check_all_readers(server, uri, model)

    model.update({r[0]: r for r in make_rows(range(300, 310), val=1)})
    record(dvengine.write(arrow_rows(make_rows(range(300, 310), val=1)), uri, mode="append", storage_options=opts), model)

    # time travel: every version through dvengine and delta-rs (DuckDB reads the latest only)
    for version, expected in versions.items():
        want = sort_rows(list(expected.values()))
        assert dvengine_rows(uri, opts, version) == want, f"dvengine v{version}"
        assert rows_delta_rs_azure(server, uri, COLUMNS, version) == want, f"delta-rs v{version}"

    ops = [h["operation"] for h in sorted(table.historyRecords(), key=lambda h: h["version"])]
    assert ops == ["WRITE", "WRITE", "DELETE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE", "WRITE"]

    # VACUUM with no retention: only the files of the latest version stay; az:// is a store Delta
    # logs VACUUM on (VACUUM START / END commits), as it does for abfss://
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_RETENTIONDURATIONCHECK_ENABLED", "false")
    before = server.keys(container, prefix)
    report = table.vacuumReport(0)
    after = server.keys(container, prefix)
    deleted = set(before) - set(after)
    assert report["numFilesDeleted"] == len(deleted) > 0
    assert {f"{prefix}{f}" for f in report["files"]} == deleted
    assert all(not k.startswith(f"{prefix}_delta_log/") for k in deleted)
    live = {f"{prefix}{a.path}" for a in load_snapshot(uri).files}
    assert {k for k in after if "/_delta_log/" not in k} == live
    assert [h["operation"] for h in table.historyRecords(2)] == ["VACUUM END", "VACUUM START"]
    _check_all_readers(server, uri, model)


def test_az_and_abfss_spellings_name_the_same_table(
    azurite_env: AzureServer,  # noqa: F811
    container: str,
) -> None:
    """``abfss://container@account.dfs.core.windows.net/path`` (Hadoop's spelling) and
    ``az://container/path`` (delta-rs's) reach the same blobs; the emulator spelling of the options
    (``use_emulator`` + AZURITE_BLOB_STORAGE_URL) reaches them too."""
    server = azurite_env
    az = f"az://{container}/shared"
    abfss = f"abfss://{container}@{ACCOUNT}.dfs.core.windows.net/shared"
    dvengine.write(arrow_rows(make_rows(range(30))), abfss, storage_options=server.options)
    assert dvengine_rows(az, server.options) == sort_rows(make_rows(range(30)))
    DeltaTable.forPath(None, az, storage_options=server.emulator_options).delete("id < 10", mode="dv")
    want = sort_rows(make_rows(range(10, 30)))
    assert dvengine_rows(abfss, server.options) == want
    assert DeltaTable.forPath(None, abfss, storage_options=server.options).version() == 1
    assert rows_delta_rs_azure(server, abfss, COLUMNS) == want
    assert rows_delta_rs_azure(server, az, COLUMNS) == want
    # DuckDB reads the az:// spelling only: for abfss:// its azure extension opens the data files
    # through the account's DFS host name, ignoring the connection string's BlobEndpoint, so on
    # loopback that spelling cannot be read by it (and must not be tried: it would resolve the name).
    assert rows_duckdb_azure(server, az, COLUMNS) == want
    assert [k for k in server.keys(container) if k.endswith(".json")] == [
        "shared/_delta_log/00000000000000000000.json", "shared/_delta_log/00000000000000000001.json",
    ]


# --- errors: typed, naming the URI, table unchanged ------------------------------------------------


def test_missing_container(azure_server: AzureServer) -> None:  # noqa: F811
    for uri in ("az://no-such-container/t", f"abfss://no-such-container@{ACCOUNT}.dfs.core.windows.net/t"):
        with pytest.raises(StorageError, match="container no-such-container does not exist") as info:
            DeltaTable.forPath(None, uri, storage_options=azure_server.options)
        assert uri in str(info.value)
        with pytest.raises(StorageError, match="container no-such-container does not exist"):
            dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=azure_server.options)
    assert "no-such-container" not in [c.name for c in azure_server.service().list_containers()]


def test_table_not_found_in_existing_container(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    with pytest.raises(TableNotFoundError, match=f"az://{container}/nothing"):
        DeltaTable.forPath(None, f"az://{container}/nothing", storage_options=azure_server.options)


def test_wrong_account_key(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    uri = f"az://{container}/auth"
    dvengine.write(arrow_rows(make_rows(range(6))), uri, storage_options=azure_server.options)
    keys = azure_server.keys(container)
    bad = {**azure_server.options, "account_key": WRONG_KEY}
    with pytest.raises(StorageAccessError, match=uri):
        DeltaTable.forPath(None, uri, storage_options=bad)
    with pytest.raises(StorageAccessError, match=uri):
        dvengine.write(arrow_rows(make_rows(range(6, 8))), uri, mode="append", storage_options=bad)
    assert azure_server.keys(container) == keys
    assert dvengine_rows(uri, azure_server.options) == sort_rows(make_rows(range(6)))


def test_closed_port(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    """The same container through a port nothing listens on: connection refused, retried briefly, typed."""
    uri = f"az://{container}/closed"
    dvengine.write(arrow_rows(make_rows(range(4))), uri, storage_options=azure_server.options)
    keys = azure_server.keys(container)
    closed = {
        **azure_server.options, "endpoint": f"http://127.0.0.1:{free_port()}/{ACCOUNT}",
        "max_retries": "1", "retry_timeout": "2",
    }
    with pytest.raises(StorageUnreachableError, match=uri):
        DeltaTable.forPath(None, uri, storage_options=closed)
    with pytest.raises(StorageUnreachableError, match=uri):
        dvengine.write(arrow_rows(make_rows(range(4, 6))), uri, mode="append", storage_options=closed)
    assert azure_server.keys(container) == keys
    assert dvengine_rows(uri, azure_server.options) == sort_rows(make_rows(range(4)))


# --- concurrency -----------------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import json, os, sys
    import pyarrow as pa
    import dvengine
    from dvengine.commit import commit_lock
    from dvengine.storage import objects
    from dvengine.storage.base import FileAlreadyExists
    commit_lock.lock_path = lambda folder: None  # no host turn: the writers race at the store itself
    refused = []
    put_if_absent = objects.ObjectStorage.put_if_absent
    def counting(self, path, data):
        try:
            return put_if_absent(self, path, data)
        except FileAlreadyExists:
            refused.append(path)
            raise
    objects.ObjectStorage.put_if_absent = counting
    uri, who, count, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    import time
    time.sleep(max(0.0, start - time.time()))  # both start together, after their imports
    opts = json.loads(os.environ["AZURE_TEST_OPTIONS"])
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
    print(json.dumps({"versions": versions, "refused": len(refused)}))
    """
)


def test_two_processes_race_on_one_table(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    """Both commit every append; versions are gap-free and each is one writer's (no lost write).
    The host's commit turn is off in the writers, so they race for each version at the store and
    the loser of a race is refused by the conditional create (counted)."""
    uri = f"az://{container}/race"
    dvengine.write(arrow_rows([]), uri, storage_options=azure_server.options)
    env = dict(os.environ)
    env["AZURE_TEST_OPTIONS"] = json.dumps(azure_server.options)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    writers, commits = 2, 15
    start = time.time() + 4
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, uri, str(w), str(commits), str(start)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(writers)
    ]
    reported: list[int] = []
    refused = 0
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        result = json.loads(out.strip().splitlines()[-1])
        reported.extend(result["versions"])
        refused += result["refused"]
    assert refused > 0, "the writers never collided: the race was not tested"
    total = writers * commits
    assert sorted(reported) == list(range(1, total + 1))  # each append committed exactly once, no gaps
    commit_keys = [k for k in azure_server.keys(container, "race/_delta_log/") if k.endswith(".json")]
    assert [int(k.rsplit("/", 1)[1][:20]) for k in commit_keys] == list(range(total + 1))
    want = sort_rows([(w * 1000 + i, f"w{w}", i) for w in range(writers) for i in range(commits)])
    assert dvengine_rows(uri, azure_server.options) == want
    assert rows_delta_rs_azure(azure_server, uri, COLUMNS) == want


def test_conditional_create_of_an_existing_commit_is_refused(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    """The primitive itself: creating a commit object that exists is FileAlreadyExists and leaves the
    object as it was (Azure answers ``If-None-Match: *`` with 409 BlobAlreadyExists)."""
    from dvengine.storage.base import FileAlreadyExists
    from dvengine.storage.registry import storage_for

    uri = f"az://{container}/cas"
    dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=azure_server.options)
    commit = f"{uri}/_delta_log/00000000000000000000.json"
    store = storage_for(commit)
    before = store.read_bytes_tagged(commit)
    with pytest.raises(FileAlreadyExists):
        store.put_if_absent(commit, b'{"commitInfo":{}}\n')
    assert store.read_bytes_tagged(commit) == before
    assert latest_version(uri) == 0


def test_client_settings_among_storage_options(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    """delta-rs takes HTTP client settings among the storage options, with or without the azure_
    prefix; obstore wants them apart (in its config they made it panic), and dvengine sorts them out.
    A malformed key is InvalidArgumentError before any request."""
    from dvengine.errors import InvalidArgumentError

    opts = {k: v for k, v in azure_server.options.items() if k != "allow_http"}
    uri = f"az://{container}/client"
    prefixed = {**opts, "azure_allow_http": "true", "timeout": "20s", "azure_connect_timeout": "3s"}
    dvengine.write(arrow_rows(make_rows(range(5))), uri, storage_options=prefixed)
    assert dvengine_rows(uri, {**opts, "AZURE_ALLOW_HTTP": "true"}) == sort_rows(make_rows(range(5)))
    with pytest.raises(InvalidArgumentError, match="az://"):
        DeltaTable.forPath(None, uri, storage_options={**azure_server.options, "account_key": "not base64!"})


def test_endpoint_names_the_table_for_host_coordination(azure_server: AzureServer) -> None:  # noqa: F811
    """Two Azurite servers on one host each have a devstoreaccount1 with its own containers: the key
    that names a table for the commit turn and the commit relay includes the endpoint."""
    from dvengine.storage.logstore import normalize_table_path
    from dvengine.storage.settings import host_table_key

    first = normalize_table_path("az://same/t", azure_server.options)
    key_first = host_table_key(first)
    normalize_table_path("az://same/t", {**azure_server.options, "endpoint": f"http://127.0.0.1:1/{ACCOUNT}"})
    assert host_table_key(first) != key_first
    assert azure_server.blob_endpoint in key_first


class _RecordingProxy(BaseHTTPRequestHandler):
    """A loopback proxy to Azurite that forwards every request unchanged and records each PUT's
    path and ``If-None-Match`` header (a proxy cannot strip the header as the S3 tests do: Azure's
    SharedKey signature covers it, so the request would be refused as unauthenticated)."""

    target_port = 0
    puts: ClassVar[list[tuple[str, str | None]]] = []

    def _forward(self) -> None:
        import http.client

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.command == "PUT":
            self.puts.append((self.path.split("?", 1)[0], self.headers.get("If-None-Match")))
        conn = http.client.HTTPConnection("127.0.0.1", self.target_port, timeout=10)
        conn.request(self.command, self.path, body=body or None, headers=dict(self.headers.items()))
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
def recording_proxy(azure_server: AzureServer) -> Iterator[tuple[dict[str, str], list[tuple[str, str | None]]]]:  # noqa: F811
    puts: list[tuple[str, str | None]] = []
    handler = type("Handler", (_RecordingProxy,), {"target_port": azure_server.port, "puts": puts})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield {**azure_server.options, "endpoint": f"http://127.0.0.1:{proxy.server_address[1]}/{ACCOUNT}"}, puts
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_commits_are_sent_as_conditional_creates(
    azure_server: AzureServer,  # noqa: F811
    container: str,
    recording_proxy: tuple[dict[str, str], list[tuple[str, str | None]]],
) -> None:
    """What goes over the wire: every commit object and the probe are PUT with ``If-None-Match: *``
    (object_store's PutMode::Create on Azure); data files are plain PUTs."""
    options, puts = recording_proxy
    uri = f"az://{container}/wire"
    dvengine.write(arrow_rows(make_rows(range(8))), uri, storage_options=options)
    DeltaTable.forPath(None, uri, storage_options=options).delete("id = 1", mode="dv")
    commits = [(p, h) for p, h in puts if "/_delta_log/" in p and p.endswith(".json")]
    assert [p.rsplit("/", 1)[1] for p, _ in commits] == ["00000000000000000000.json", "00000000000000000001.json"]
    assert all(h == "*" for _, h in commits), commits
    probes = [h for p, h in puts if CONDITIONAL_PUT_PROBE_PREFIX in p]
    assert probes and all(h == "*" for h in probes), puts
    assert any(p.endswith(".parquet") and h is None for p, h in puts)
    assert dvengine_rows(uri, azure_server.options) == sort_rows([r for r in make_rows(range(8)) if r[0] != 1])


def test_log_tail_listing_does_not_trust_the_store_offset(azure_server: AzureServer, container: str) -> None:  # noqa: F811
    """object_store lists "after" a name with Azure's ``startFrom``; Azurite ignores it and returns
    the whole prefix. The log tail a reopened table reads must still be only the later versions."""
    from dvengine.storage.registry import storage_for

    uri = f"az://{container}/tail"
    dvengine.write(arrow_rows(make_rows(range(3))), uri, storage_options=azure_server.options)
    for i in range(3):
        dvengine.write(arrow_rows(make_rows(range(10 + i, 11 + i))), uri, mode="append", storage_options=azure_server.options)
    log = f"{uri}/_delta_log"
    tail = storage_for(log).list_dir_after(log, "00000000000000000001.json")
    assert [f.path.rsplit("/", 1)[1] for f in tail] == ["00000000000000000002.json", "00000000000000000003.json"]
