"""Point DML on an object store: the same single-row DELETEs and UPDATEs on a local folder and on
an S3 endpoint, dvengine (in-process executor) against delta-rs on the same endpoint.

    dvengine bench --table-uri s3://bucket/prefix --storage-option AWS_ENDPOINT_URL=... [--rows N] [--files F]
    dvengine bench --local-s3            # starts moto on 127.0.0.1 and benchmarks against it

The extra cost of a store is its round trips, so besides latency this counts requests per
command: dvengine's from its own client (``storage.registry.request_counts``), and, against the
local server, every request the server saw (which counts delta-rs's too).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.moto_server import LATENCY_ENV
from dvengine.bench.outputs import write_report
from dvengine.bench.results import machine_facts
from dvengine.storage import pending
from dvengine.storage.base import BACKGROUND_PUT
from dvengine.storage.registry import request_counts, request_seconds

Op = Callable[[int], None]


@contextmanager
def local_s3_server(latency_ms: float = 0.0) -> Iterator[tuple[str, dict[str, str], str]]:
    """moto in a child process on 127.0.0.1 (a free port): (endpoint, storage options, request log path).
    ``latency_ms``: every request waits that long first (moto_server.add_request_latency)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    log_path = os.path.join(tempfile.mkdtemp(prefix="dvengine-moto-"), "requests.log")
    endpoint = f"http://127.0.0.1:{port}"
    options = {
        "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
    }
    with open(log_path, "w") as log, moto_process(port, log, f" (see {log_path})", latency_ms):
        yield endpoint, options, log_path


@contextmanager
def moto_process(
    port: int, output: IO[str] | int, hint: str = "", latency_ms: float = 0.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """moto's S3 server (with atomic conditional creates, as S3's) in a child process on
    127.0.0.1:``port``, once it accepts connections; stopped on exit. (A child, not a thread: delta-rs holds the GIL while it reads and would starve it.)
    Shared by the bench and the test suite's fixture."""
    # The launcher makes moto's conditional creates atomic (dvengine/bench/moto_server.py); the child
    # finds this dvengine whether it runs from a checkout or an installed wheel.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(dvengine.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")])))
    env[LATENCY_ENV] = str(latency_ms) if latency_ms > 0 else ""
    proc = subprocess.Popen(
        [sys.executable, "-m", "dvengine.bench.moto_server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=output, stderr=output, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start{hint}") from None
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def create_bucket(endpoint: str, bucket: str) -> None:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT"), timeout=30) as reply:
        if reply.status != 200:
            raise RuntimeError(f"could not create bucket {bucket} at {endpoint}: HTTP {reply.status}")


# One request line in the server's log; Werkzeug wraps the request of a non-2xx answer in colour
# codes (``"\x1b[35m\x1b[1mDELETE /k HTTP/1.1\x1b[0m" 204``), which a plain ``'"DELETE '`` missed.
_REQUEST_LINE = re.compile(r'"(?:\x1b\[[0-9;]*m)*(?:GET|PUT|HEAD|POST|DELETE) ')


def _server_requests(log_path: str | None) -> int:
    if log_path is None:
        return 0
    with open(log_path, errors="replace") as fh:
        return sum(1 for line in fh if _REQUEST_LINE.search(line))


def build_base(root: str, rows: int, files: int, options: dict[str, str] | None) -> None:
    """``files`` files of contiguous ids (as bench.point builds them), so stats isolate the file of a key."""
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        rng = np.random.default_rng(i)
        table = pa.table({"id": ids, "value": rng.random(len(ids)), "cat": (ids % 16).astype(np.int32)})
        dvengine.write(table, root, mode="append" if i else "error", storage_options=options)


KEPT = " (kept table)"


def _ops(contender: str, table: str, options: dict[str, str] | None) -> tuple[Op, Op]:
    """DELETE and UPDATE of one key. By default each call opens the table by path, as a job that
    runs one command per invocation would; a "(kept table)" contender opens it once and reuses the
    table object (each command still loads the latest snapshot: dvengine from its cache plus the
    log tail, delta-rs by updating its table state)."""
    kept = contender.endswith(KEPT)
    if contender.startswith("delta-rs"):
        from deltalake import DeltaTable as RsTable

        rs_kept: list[Any] = []

        def rs_table() -> Any:
            if not kept:
                return RsTable(table, storage_options=options)
            if not rs_kept:
                rs_kept.append(RsTable(table, storage_options=options))
            return rs_kept[0]

        def rs_delete(key: int) -> None:
            rs_table().delete(f"id = {key}")

        def rs_update(key: int) -> None:
            rs_table().update(updates={"value": "-1.0"}, predicate=f"id = {key}")

        return rs_delete, rs_update

    dv_kept: list[DeltaTable] = []

    def dv_table() -> DeltaTable:
        if not kept:
            return DeltaTable.forPath(None, table, storage_options=options)
        if not dv_kept:
            dv_kept.append(DeltaTable.forPath(None, table, storage_options=options))
        return dv_kept[0]

    def delete(key: int) -> None:
        dv_table().delete(f"id = {key}", engine="local")

    def update(key: int) -> None:
        dv_table().update(f"id = {key}", {"value": "-1.0"}, engine="local")

    return delete, update


def _median_int(values: list[int]) -> int | None:
    return sorted(values)[len(values) // 2] if values else None


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p10_ms": round(1000 * ordered[len(ordered) // 10], 2),
        "p90_ms": round(1000 * ordered[min(len(ordered) - 1, (9 * len(ordered)) // 10)], 2),
        "n": len(ordered),
    }


def _groups(names: list[str]) -> list[list[str]]:
    """Contenders timed together, op by op: dvengine's folder and store contenders of the same kind
    (by path, kept) alternate, so that the ratio the target is read against compares commands run
    a few milliseconds apart, not two blocks a minute apart on a machine whose load moves; each
    delta-rs contender (hundreds of ms per command) runs on its own."""
    groups: list[list[str]] = []
    for name in names:
        partner = name.replace("dvengine, object store", "dvengine, local folder")
        if partner != name and partner in names:
            next(g for g in groups if partner in g).append(name)
        else:
            groups.append([name])
    return groups


def _blocked_seconds() -> float:
    """Seconds the calling thread has spent waiting for object-store answers so far: requests it
    sent itself, plus its waits for PUTs sent in the background (not the part its work hid)."""
    by_kind = request_seconds()
    return sum(v for k, v in by_kind.items() if k != BACKGROUND_PUT) + pending.waited_seconds()


def run(
    table_uri: str, options: dict[str, str] | None, rows: int, files: int, ops: int, server_log: str | None = None
) -> dict[str, Any]:
    """Time ``ops`` point DELETEs and UPDATEs per contender on fresh tables; count requests per command.

    dvengine's folder and store contenders alternate op by op (``_groups``); each op also records
    how long the command waited for the store (``in_requests``) and so the rest of its time."""
    work = tempfile.mkdtemp(prefix="dvengine-objbench-")
    run_id = uuid.uuid4().hex[:8]
    contenders: dict[str, tuple[str, dict[str, str] | None]] = {}
    for suffix, tag in (("", ""), (KEPT, "-kept")):
        contenders[f"dvengine, local folder{suffix}"] = (os.path.join(work, f"dvengine{tag}"), None)
        contenders[f"dvengine, object store{suffix}"] = (f"{table_uri.rstrip('/')}/{run_id}-dvengine{tag}", options)
        contenders[f"delta-rs, local folder{suffix}"] = (os.path.join(work, f"delta-rs{tag}"), None)
        contenders[f"delta-rs, object store{suffix}"] = (f"{table_uri.rstrip('/')}/{run_id}-delta-rs{tag}", options)
    keys = np.random.default_rng(7).choice(rows, size=2 * ops + 1, replace=False).tolist()
    results: dict[str, Any] = {}
    try:
        for group in _groups(list(contenders)):
            ops_of: dict[str, tuple[Op, Op]] = {}
            for name in group:
                table, opts = contenders[name]
                build_base(table, rows, files, opts)
                ops_of[name] = _ops(name, table, opts)
            for name in group:
                ops_of[name][0](int(keys[-1]))  # warm-up (imports, connection pool), not timed
            timings: dict[str, dict[str, list[float]]] = {name: {"delete": [], "update": []} for name in group}
            blocked: dict[str, dict[str, list[float]]] = {name: {"delete": [], "update": []} for name in group}
            requests: dict[str, dict[str, list[int]]] = {name: {"delete": [], "update": []} for name in group}
            by_kind: dict[str, dict[str, dict[str, int]]] = {name: {} for name in group}
            for i in range(ops):
                for kind, key in (("delete", keys[2 * i]), ("update", keys[2 * i + 1])):
                    for name in group if i % 2 == 0 else group[::-1]:
                        op = ops_of[name][0 if kind == "delete" else 1]
                        is_rs_store = name.startswith("delta-rs") and contenders[name][1] is not None
                        server_before = _server_requests(server_log) if is_rs_store else 0
                        client_before, blocked_before = request_counts(), _blocked_seconds()
                        started = time.perf_counter()
                        op(int(key))
                        timings[name][kind].append(time.perf_counter() - started)
                        client_after, blocked_after = request_counts(), _blocked_seconds()
                        if name.startswith("dvengine"):
                            blocked[name][kind].append(blocked_after - blocked_before)
                            diff = {k: client_after.get(k, 0) - client_before.get(k, 0) for k in client_after}
                            requests[name][kind].append(sum(diff.values()))
                            by_kind[name].setdefault(f"{kind}:{sum(diff.values())}", {k: v for k, v in diff.items() if v})
                        elif server_log is not None and is_rs_store:
                            time.sleep(0.05)  # let the server flush its log line
                            requests[name][kind].append(_server_requests(server_log) - server_before)
            for name in group:
                table, opts = contenders[name]
                check = DeltaTable.forPath(None, table, storage_options=opts).toArrow()
                marked = int(np.count_nonzero(check.column("value").to_numpy() < 0))
                if check.num_rows != rows - ops - 1 or marked != ops:
                    raise AssertionError(f"{name}: {check.num_rows} rows / {marked} updated, expected {rows - ops - 1} / {ops}")
                results[name] = {
                    kind: {
                        **_stats(v),
                        **_split(v, blocked[name][kind]),
                        "requests_per_command": statistics.median(requests[name][kind]) if requests[name][kind] else None,
                        "requests_by_kind": by_kind[name].get(f"{kind}:{_median_int(requests[name][kind])}"),
                    }
                    for kind, v in timings[name].items()
                }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "table_uri": table_uri,
        "rows": rows,
        "files": files,
        "ops_per_kind": ops,
        "alternating": [g for g in _groups(list(contenders)) if len(g) > 1],
        "machine": machine_facts(None),
        "results": results,
    }


def _split(totals: list[float], blocked: list[float]) -> dict[str, float]:
    """p50 of the time a command waited for the store and of the rest of it (dvengine contenders)."""
    if not blocked:
        return {}
    return {
        "in_requests_p50_ms": round(1000 * statistics.median(blocked), 2),
        "rest_p50_ms": round(1000 * statistics.median(t - b for t, b in zip(totals, blocked, strict=True)), 2),
    }


def to_markdown(report: dict[str, Any]) -> str:
    res = report["results"]
    lines = [
        f"# Point DML on an object store ({report['table_uri']})",
        "",
        f"{report['rows']:,} rows in {report['files']} files; {report['ops_per_kind']} single-row DELETEs and UPDATEs "
        "per contender on a fresh table, each committing. Without a suffix every call opens the table by path "
        "(`DeltaTable.forPath(...).delete(...)`, delta-rs `DeltaTable(uri).delete(...)`), as a job running one "
        "command per invocation would; \"(kept table)\" contenders open it once and reuse the table object. "
        "Warm (one untimed call first, in the same process). dvengine's folder and store contenders of the same "
        "kind alternate op by op (the ratios compare commands run milliseconds apart); delta-rs's run on their own.",
        f"Load before/after: {report.get('load_before', '?')} / {report.get('load_after', '?')}.",
        "",
        "| contender | DELETE p50 ms (p10-p90) | UPDATE p50 ms (p10-p90) | requests per DELETE / UPDATE |",
        "|---|---:|---:|---:|",
    ]
    for name, r in res.items():
        d, u = r["delete"], r["update"]
        reqs = "-" if d["requests_per_command"] is None else f"{d['requests_per_command']:g} / {u['requests_per_command']:g}"
        lines.append(
            f"| {name} | {d['p50_ms']} ({d['p10_ms']}-{d['p90_ms']}) | {u['p50_ms']} ({u['p10_ms']}-{u['p90_ms']}) | {reqs} |"
        )
    def ratio(a: str, b: str, kind: str) -> str:
        return f"{res[a][kind]['p50_ms'] / res[b][kind]['p50_ms']:.2f}x"

    if {"dvengine, object store", "dvengine, local folder", "delta-rs, object store"} <= res.keys():
        lines += ["", "| ratio of p50s (same run) | DELETE | UPDATE |", "|---|---:|---:|"]
        for suffix in ("", KEPT):
            if f"dvengine, object store{suffix}" not in res:
                continue
            store, folder, rs = (f"dvengine, object store{suffix}", f"dvengine, local folder{suffix}",
                                 f"delta-rs, object store{suffix}")
            lines += [
                f"| dvengine store / dvengine folder{suffix} | {ratio(store, folder, 'delete')} | {ratio(store, folder, 'update')} |",
                f"| dvengine store / delta-rs store{suffix} | {ratio(store, rs, 'delete')} | {ratio(store, rs, 'update')} |",
            ]
        split = [name for name in res if name.startswith("dvengine") and "in_requests_p50_ms" in res[name]["delete"]]
        if split:
            lines += [
                "",
                "Where a dvengine command's time goes (p50 ms): waiting for the store's answers (requests it sent, "
                "and its wait for a data PUT sent in the background), and the rest (planning, encoding, the "
                "folder's writes, fsyncs and link).",
                "",
                "| contender | DELETE total / in requests / rest | UPDATE total / in requests / rest |",
                "|---|---:|---:|",
            ]
            for name in split:
                d, u = res[name]["delete"], res[name]["update"]
                lines.append(
                    f"| {name} | {d['p50_ms']} / {d['in_requests_p50_ms']} / {d['rest_p50_ms']} "
                    f"| {u['p50_ms']} / {u['in_requests_p50_ms']} / {u['rest_p50_ms']} |"
                )
        kinds = res["dvengine, object store"]["delete"]["requests_by_kind"]
        if kinds:
            lines += ["", "dvengine requests of a median DELETE by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))]
            ukinds = res["dvengine, object store"]["update"]["requests_by_kind"] or {}
            lines += ["dvengine requests of a median UPDATE by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(ukinds.items()))]
    return "\n".join(lines) + "\n"


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "?"


def run_cli(
    table_uri: str | None, options: dict[str, str], local_s3: bool, rows: int, files: int, ops: int, out: str
) -> int:
    """``dvengine bench --table-uri`` / ``--local-s3``: run, write results.json / results.md, print the table."""
    load_before = _uptime()
    if local_s3:
        with local_s3_server() as (endpoint, server_options, log_path):
            create_bucket(endpoint, "bench")
            report = run("s3://bench/point", {**server_options, **options}, rows, files, ops, log_path)
            report["table_uri"] = "s3://bench/point on moto (local, 127.0.0.1)"
    else:
        if table_uri is None:
            raise ValueError("pass --table-uri or --local-s3")
        report = run(table_uri, options or None, rows, files, ops)
    report["load_before"], report["load_after"] = load_before, _uptime()
    write_report(out, "object-store-point", report, to_markdown(report))
    print(to_markdown(report))
    return 0
