"""A local S3 server for storage tests: moto on 127.0.0.1 only, and the three readers pointed at it.

moto's server answers conditional writes as S3 does (412 on ``If-None-Match: *``); it runs through
``dvengine.bench.moto_server``, which makes the check and the store one atomic step, as on S3.
Every address used here is loopback; nothing leaves the machine.
"""

from __future__ import annotations

import socket
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from interop import sort_rows

ACCESS_KEY = "testing-key"
SECRET_KEY = "testing-secret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def options(self) -> dict[str, str]:
        """delta-rs-named storage options for this server (also what dvengine takes)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(out)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's server in its own process (delta-rs blocks holding the GIL while it reads, which would
    starve a server thread in this process), listening on 127.0.0.1 only."""
    from dvengine.bench.object_store import moto_process

    port = free_port()
    with moto_process(port, subprocess.DEVNULL):
        yield S3Server(port)


@pytest.fixture(autouse=True)
def no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store a test forgot to configure must fail on loopback, never look for credentials
    elsewhere (the instance metadata service) or reach a real endpoint. Autouse in every module
    that imports it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "unconfigured")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unconfigured")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{free_port()}")


def set_moto_auth(server: S3Server, enforce: bool) -> None:
    """Make moto check credentials (it accepts any by default) or stop checking them."""
    import urllib.request

    body = b"0" if enforce else b"inf"
    request = urllib.request.Request(
        f"{server.endpoint}/moto-api/reset-auth", data=body, method="POST", headers={"Content-Type": "text/plain"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200


def rows_duckdb_s3(server: S3Server, uri: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """DuckDB's delta extension (delta-kernel-rs) over httpfs, at the latest version."""
    from dvengine.bench.verify import duckdb_delta_connection

    with duckdb_delta_connection(server.options) as con:
        assert con is not None, "duckdb with duckdb-ext-delta and duckdb-ext-httpfs must be installed"
        cols = ", ".join(f'"{c}"' for c in columns)
        table = con.execute(f"select {cols} from delta_scan('{uri}')").fetch_arrow_table()
    return sort_rows([tuple(d[c] for c in columns) for d in table.to_pylist()])


def rows_delta_rs_s3(server: S3Server, uri: str, columns: Sequence[str], version: int | None = None) -> list[tuple[Any, ...]]:
    """delta-rs through its DV-aware QueryBuilder, on the same endpoint."""
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    table = RsTable(uri, version=version, storage_options=server.options)
    cols = ", ".join(f'"{c}"' for c in columns)
    reader = QueryBuilder().register("t", table).execute(f"select {cols} from t")
    arrow = pa.table(reader.read_all())
    return sort_rows([tuple(d[c] for c in columns) for d in arrow.to_pylist()])
