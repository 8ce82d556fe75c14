"""A local Azure Blob Storage for storage tests: Azurite on 127.0.0.1 only, and the readers pointed at it.

Azurite is the emulator Microsoft ships for Azure Storage (npm package ``azurite``); ``make azurite``
puts it under ``.tools/azurite`` (the Makefile's ``azurite`` target). It answers conditional
writes as Azure does (``If-None-Match: *`` on a blob that exists: 409 BlobAlreadyExists, which
object_store reports as AlreadyExists). It runs with ``--disableTelemetry`` (otherwise it reports
to a Microsoft endpoint) and listens on loopback only; nothing leaves the machine.

Two spellings of the same options reach it:

- ``options``: the account, its key and ``endpoint`` (with the account in the path, as Azurite
  serves it) plus ``allow_http`` - what delta-rs and dvengine both take, no environment needed;
- ``emulator_options``: ``use_emulator`` with the account; object_store then takes the endpoint
  from ``AZURITE_BLOB_STORAGE_URL`` (its default is port 10000), which the autouse fixture sets.
  DuckDB's delta extension reaches the emulator only this way (see ``rows_duckdb_azure``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import sort_rows

ACCOUNT = "devstoreaccount1"
# Azurite's well-known development account key (published in Microsoft's Azurite docs; not a secret).
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_VERSION = "3.35.0"
INSTALL_HINT = (
    f"Azurite (npm package azurite@{AZURITE_VERSION}) is required by the Azure storage tests: run `make azurite` "
    f"(needs npm: apt-get install npm), or `npm install --prefix .tools/azurite azurite@{AZURITE_VERSION} "
    "--no-audit --no-fund`, or point DVENGINE_AZURITE_BLOB at an azurite-blob executable"
)
_REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def azurite_executable() -> str | None:
    """``DVENGINE_AZURITE_BLOB``, else the Makefile's install under ``.tools/azurite``, else PATH."""
    given = os.environ.get("DVENGINE_AZURITE_BLOB")
    if given:
        return given if os.access(given, os.X_OK) else None
    local = _REPO / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    return shutil.which("azurite-blob")


@dataclass
class AzureServer:
    port: int

    @property
    def blob_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def emulator_url(self) -> str:
        """What ``AZURITE_BLOB_STORAGE_URL`` must say (object_store appends the account)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """delta-rs-named storage options for this server (also what dvengine takes)."""
        return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "endpoint": self.blob_endpoint, "allow_http": "true"}

    @property
    def emulator_options(self) -> dict[str, str]:
        """The emulator spelling: object_store finds the port in ``AZURITE_BLOB_STORAGE_URL``."""
        return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "use_emulator": "true"}

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )

    def service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def new_container(self) -> str:
        name = f"c-{uuid.uuid4().hex[:12]}"
        self.service().create_container(name)
        return name

    def keys(self, container: str, prefix: str = "") -> list[str]:
        """Every blob name under ``prefix`` (hidden ones too), as the SDK lists them."""
        client = self.service().get_container_client(container)
        return sorted(b.name for b in client.list_blobs(name_starts_with=prefix or None))

    def put(self, container: str, name: str, data: bytes) -> None:
        self.service().get_blob_client(container, name).upload_blob(data, overwrite=True)


def _wait_until_answering(proc: subprocess.Popen[bytes], server: AzureServer, log: Path) -> None:
    """Until the SDK can list containers (Azurite accepts connections a little before it serves)."""
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"azurite-blob exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                pass
            list(server.service().list_containers(results_per_page=1))
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(f"azurite-blob did not answer on 127.0.0.1:{server.port}: {log.read_text()[-2000:]}") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def azure_server() -> Iterator[AzureServer]:
    """Azurite's blob service in its own process on a free loopback port, telemetry off, its data in
    a temp folder removed at the end. Absent Azurite fails (never skips) with the install hint:
    CI installs it with ``make test`` (its ``azurite`` target)."""
    exe = azurite_executable()
    if exe is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    if shutil.which("node") is None:
        pytest.fail(f"node is not on PATH. {INSTALL_HINT}", pytrace=False)
    location = Path(tempfile.mkdtemp(prefix="dvengine-azurite-"))
    log = location / "azurite.log"
    server = AzureServer(free_port())
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [exe, "--blobHost", "127.0.0.1", "--blobPort", str(server.port), "--location", str(location / "data"),
             "--silent", "--disableTelemetry", "--skipApiVersionCheck"],
            stdout=out, stderr=out,
        )  # fmt: skip
    try:
        _wait_until_answering(proc, server, log)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(location, ignore_errors=True)


@pytest.fixture(autouse=True)
def azure_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ambient Azure settings; the places object_store could look for credentials or an
    endpoint by itself (managed identity, the environment's endpoint) point at closed loopback
    ports, so a test that forgot an option fails here instead of reaching anywhere. Autouse in
    every module that imports it."""
    for key in list(os.environ):
        if key.startswith(("AZURE_", "AZURITE_")):
            monkeypatch.delenv(key)
    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AZURE_STORAGE_ENDPOINT", f"{closed}/{ACCOUNT}")
    monkeypatch.setenv("AZURE_MSI_ENDPOINT", f"{closed}/msi")
    monkeypatch.setenv("AZURE_IDENTITY_ENDPOINT", f"{closed}/identity")
    monkeypatch.setenv("AZURE_AUTHORITY_HOST", closed)


@pytest.fixture
def azurite_env(azure_server: AzureServer, monkeypatch: pytest.MonkeyPatch) -> AzureServer:
    """The server, with ``AZURITE_BLOB_STORAGE_URL`` naming it (emulator mode: DuckDB, ``use_emulator``)."""
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azure_server.emulator_url)
    return azure_server


def rows_duckdb_azure(server: AzureServer, uri: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """DuckDB's delta extension (delta-kernel-rs) at the latest version, with the azure extension
    and an Azure secret holding Azurite's connection string. The delta extension builds its own
    object_store client from the secret: it takes the account ``devstoreaccount1`` as the emulator
    and finds the port only in ``AZURITE_BLOB_STORAGE_URL`` (the connection string's BlobEndpoint
    is not passed on), so that variable must name the server (``azurite_env``)."""
    import duckdb

    from dvengine.bench.verify import _duckdb_extension, duckdb_delta_extension

    assert os.environ.get("AZURITE_BLOB_STORAGE_URL") == server.emulator_url, "use the azurite_env fixture"
    delta = duckdb_delta_extension()
    azure = _duckdb_extension("duckdb-ext-azure", "azure.duckdb_extension")
    assert delta is not None and azure is not None, "duckdb-ext-delta and duckdb-ext-azure must be installed"
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        con.execute(f"LOAD '{azure}'")
        con.execute(f"LOAD '{delta}'")
        con.execute(f"CREATE SECRET azurite (TYPE azure, CONNECTION_STRING '{server.connection_string}')")
        cols = ", ".join(f'"{c}"' for c in columns)
        table = con.execute(f"select {cols} from delta_scan('{uri}')").fetch_arrow_table()
    finally:
        con.close()
    return sort_rows([tuple(d[c] for c in columns) for d in table.to_pylist()])


def rows_delta_rs_azure(
    server: AzureServer, uri: str, columns: Sequence[str], version: int | None = None
) -> list[tuple[Any, ...]]:
    """delta-rs through its DV-aware QueryBuilder, on the same endpoint."""
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    table = RsTable(uri, version=version, storage_options=server.options)
    cols = ", ".join(f'"{c}"' for c in columns)
    reader = QueryBuilder().register("t", table).execute(f"select {cols} from t")
    arrow = pa.table(reader.read_all())
    return sort_rows([tuple(d[c] for c in columns) for d in arrow.to_pylist()])
