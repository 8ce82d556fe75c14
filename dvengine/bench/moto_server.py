"""moto's S3 server with atomic conditional creates, as S3 guarantees them.

Run as ``python -m dvengine.bench.moto_server -H 127.0.0.1 -p PORT`` (the same arguments as
``python -m moto.server``). Used by the bench's ``--local-s3`` and by the test suite's S3 fixture.
With ``DVENGINE_MOTO_LATENCY_MS=N`` every request first waits N ms (a remote store's round trip).

Why: Delta commits on S3 rely on ``PUT`` with ``If-None-Match: *`` being atomic: of two writers
creating the same ``_delta_log/NNN.json``, exactly one succeeds and the other gets 412. moto 5.x
checks the precondition and then stores the object as two separate steps
(``S3Response.put_object``: ``get_object`` ... ``raise PreconditionFailed`` ... ``put_object``) on a
threaded Werkzeug server, so under load two racing creates can both succeed and two writers both
believe they committed the same version. That is a defect of the test server, not something S3
(or GCS, Azure, MinIO, R2) does; left in place it made the multi-process race test fail once at load
average 19 (two writers reported version 31). Holding one lock around every object PUT makes the
check and the store one step, as on S3; it only serializes PUT handling inside a server whose
requests already share one GIL.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any

_PATCHED: list[bool] = []


def make_object_puts_atomic() -> None:
    """Wrap moto's object PUT handler so the precondition check and the store happen under one lock."""
    from moto.s3.responses import S3Response

    if _PATCHED:
        return
    original = S3Response.put_object
    lock = threading.Lock()

    @functools.wraps(original)
    def put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    S3Response.put_object = put_object  # type: ignore[method-assign]
    _PATCHED.append(True)


LATENCY_ENV = "DVENGINE_MOTO_LATENCY_MS"


def add_request_latency(latency_ms: float) -> None:
    """Make every request wait ``latency_ms`` before moto handles it, as a round trip to a remote
    store would. The server is threaded and a sleeping thread holds no lock, so concurrent requests
    wait concurrently, as they do on S3; what moto then spends on CPU comes on top."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__

    @functools.wraps(original)
    def delayed(self: Any, environ: Any, start_response: Any) -> Any:
        time.sleep(latency_ms / 1000.0)
        return original(self, environ, start_response)

    DomainDispatcherApplication.__call__ = delayed  # type: ignore[method-assign]


def main() -> None:
    make_object_puts_atomic()
    latency_ms = float(os.environ.get(LATENCY_ENV) or 0)
    if latency_ms > 0:
        add_request_latency(latency_ms)
    from moto.server import main as moto_main

    moto_main()


if __name__ == "__main__":
    main()
