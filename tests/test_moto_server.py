"""The test S3 server's conditional creates are atomic, as S3's are (dvengine/bench/moto_server.py).

moto checks ``If-None-Match: *`` and stores the object as two steps; a pause between them (here a
slowed existence check, in real runs a loaded machine) lets two racing creates both succeed. The
race tests rely on the launcher's lock closing that window.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from s3_support import ACCESS_KEY, REGION, SECRET_KEY, free_port


@pytest.fixture
def slow_check_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An in-process moto server whose existence check before a PUT takes 0.3 s."""
    from moto.s3.models import S3Backend
    from moto.server import ThreadedMotoServer

    original = S3Backend.get_object

    def slow_get_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = original(self, *args, **kwargs)
        time.sleep(0.3)
        return found

    monkeypatch.setattr(S3Backend, "get_object", slow_get_object)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def _race_two_creates(endpoint: str) -> list[str]:
    """Two threads create one new key with ``If-None-Match: *`` at the same moment; their outcomes."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    def client() -> Any:
        # No retries: the race can also make moto answer 500 (two writers of one key share a buffer), and
        # botocore's retry of that 500 would then meet the stored key and report 412, hiding the race.
        return boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name=REGION, config=Config(retries={"total_max_attempts": 1}),
        )

    bucket = f"race-{uuid.uuid4().hex[:12]}"  # moto's backend is shared by every server in the process
    client().create_bucket(Bucket=bucket)
    outcomes: list[str] = []
    start = threading.Barrier(2)

    def create(body: bytes) -> None:
        c = client()
        start.wait()
        try:
            c.put_object(Bucket=bucket, Key="_delta_log/00000000000000000031.json", Body=body, IfNoneMatch="*")
            outcomes.append("created")
        except ClientError as error:
            outcomes.append(str(error.response["Error"]["Code"]))

    threads = [threading.Thread(target=create, args=(bytes([i]),)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def test_unpatched_moto_does_not_refuse_the_second_racing_create(slow_check_server: str) -> None:
    """The window exists: without the launcher's lock, neither of two racing creates of one key is
    refused with 412. Both succeed, or (when their stores interleave) one gets moto's 500."""
    from dvengine.bench import moto_server

    if moto_server._PATCHED:
        pytest.skip("moto already patched in this process")
    outcomes = _race_two_creates(slow_check_server)
    assert "PreconditionFailed" not in outcomes
    assert "created" in outcomes
    assert all(o in ("created", "500") for o in outcomes), outcomes


def test_launcher_makes_conditional_create_atomic(slow_check_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.s3.responses import S3Response

    from dvengine.bench import moto_server

    monkeypatch.setattr(S3Response, "put_object", S3Response.put_object)  # undone after the test
    monkeypatch.setattr(moto_server, "_PATCHED", [])
    moto_server.make_object_puts_atomic()
    assert _race_two_creates(slow_check_server) == ["PreconditionFailed", "created"]


# --- the bench's request count ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """The launcher in its own process, logging to a file: (port, request log path)."""
    from dvengine.bench.object_store import moto_process

    port = free_port()
    log_path = str(tmp_path_factory.mktemp("moto") / "requests.log")
    with open(log_path, "w") as log, moto_process(port, log):
        yield port, log_path


# moto answers requests without credentials on existing keys with 403; it does not check signatures.
_AUTHORIZED = {"Authorization": f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20260101/{REGION}/s3/aws4_request, "
                                "SignedHeaders=host, Signature=0"}


def test_bench_counts_every_request_the_server_logs(launched: tuple[int, str]) -> None:
    """``object_store._server_requests`` counts one per request, also the non-2xx answers Werkzeug
    prints in colour (a 204 DELETE, a 404 GET, a 412 conditional create), which it once missed."""
    import http.client

    from dvengine.bench.object_store import _server_requests

    port, log_path = launched
    before = _server_requests(log_path)
    bucket = f"log-{uuid.uuid4().hex[:12]}"
    sent = [("PUT", f"/{bucket}", b"", {}), ("PUT", f"/{bucket}/k", b"v", {}), ("HEAD", f"/{bucket}/k", b"", {}),
            ("GET", f"/{bucket}/k", b"", {}), ("PUT", f"/{bucket}/k", b"w", {"If-None-Match": "*"}),
            ("DELETE", f"/{bucket}/k", b"", {}), ("GET", f"/{bucket}/k", b"", {})]
    statuses = []
    for method, path, body, headers in sent:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)  # moto closes after each answer
        conn.request(method, path, body=body, headers={**_AUTHORIZED, **headers})
        reply = conn.getresponse()
        reply.read()
        statuses.append(reply.status)
        conn.close()
    assert statuses == [200, 200, 200, 200, 412, 204, 404]
    deadline = time.monotonic() + 10
    while _server_requests(log_path) - before < len(sent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _server_requests(log_path) - before == len(sent)


def test_bench_alternates_dvengine_folder_and_store() -> None:
    """The object-store bench times dvengine's folder and store contenders of one kind op by op in
    turn (their ratio is the target), and each delta-rs contender on its own."""
    from dvengine.bench.object_store import KEPT, _groups

    names = [f"{who}, {where}{suffix}" for suffix in ("", KEPT) for who, where in
             (("dvengine", "local folder"), ("dvengine", "object store"), ("delta-rs", "local folder"), ("delta-rs", "object store"))]
    assert _groups(names) == [
        ["dvengine, local folder", "dvengine, object store"], ["delta-rs, local folder"], ["delta-rs, object store"],
        [f"dvengine, local folder{KEPT}", f"dvengine, object store{KEPT}"], [f"delta-rs, local folder{KEPT}"],
        [f"delta-rs, object store{KEPT}"],
    ]
    assert _groups(["dvengine, object store"]) == [["dvengine, object store"]]  # --table-uri without a folder peer


def test_added_latency_delays_every_request_and_overlaps_concurrent_ones() -> None:
    """``DVENGINE_MOTO_LATENCY_MS`` (the bench's ``--store-latency-ms``): each request waits that long,
    and two requests sent together wait together, as round trips to a remote store do."""
    import http.client
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from dvengine.bench.object_store import moto_process

    port = free_port()

    def head_bucket() -> float:
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("HEAD", "/no-such-bucket", headers=_AUTHORIZED)
        conn.getresponse().read()
        conn.close()
        return time.monotonic() - started

    with moto_process(port, subprocess.DEVNULL, latency_ms=400):
        head_bucket()  # the first request also warms the server
        assert head_bucket() >= 0.4
        started = time.monotonic()
        with ThreadPoolExecutor(2) as pool:
            each = list(pool.map(lambda _: head_bucket(), range(2)))
        assert min(each) >= 0.4
        assert time.monotonic() - started < 0.8  # not one after the other
