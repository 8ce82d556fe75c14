"""Many writers, one hot file: W processes x N single-row DELETE/UPDATEs on rows of one file.

Each writer owns its rows (row ``w + W*k`` for writer ``w``, op ``k``) and alternates
``DELETE WHERE id = x`` and ``UPDATE SET v = -x WHERE id = x``; a typed conflict that reaches
the caller (a ``CommitConflictError``) is counted and the operation re-planned from a fresh
snapshot, as an application would. Reported per (W, row-level on/off): committed ops, conflicts
surfaced to callers, races retried inside dvengine (commit attempts beyond the first), files
rebased, ops/s over the DML window: from the common start signal to the moment the last writer
finished its last DML (not to its process exit: interpreter teardown is no part of the workload).
The first ``--warm-ops`` (2: one DELETE, one UPDATE) operations of every writer, and of every lane
of the baseline below, run before the start signal: committed and verified, not timed, so each
process starts the window with the hot file's columns and key index cached, as a long-running
writer has them (otherwise W processes pay that first read W times and one process once).

Two baselines for "W writers vs one writer", both reported (spec_notes/isolation-and-concurrency.md,
"Which baseline"): ``vs W=1`` divides by one writer doing its own N operations (the table grows by
N commits), ``vs 1xW*N`` by one writer process doing *the same W*N operations* the W writers do
(every writer's rows, in round-robin order), so both sides end on the same table: the same log
length, the same files added by UPDATEs, the same checkpoints. Only the second one isolates what
concurrency costs from what a W times longer run costs.

``--layout file-per-writer`` gives each writer a file of its own in the one table (``rows`` rows each,
file ``w`` holding ids ``w*rows ..``; the baselines run on the same layout): writers still race for
the next version, take the commit turn and read every other writer's commit (in the race and in
their snapshot refresh), but no winner ever changed their file, so nothing is rebased. Set beside
the ``hot-file`` run, it splits what contention costs into the rebase and the rest.

A third row, ``W x 1xW*N`` (``--ceiling on``), is the machine's ceiling for that ratio: W processes
that share nothing, each running the same-total baseline's W*N operations on *its own copy* of the
hot table. Their aggregate ops/s over one baseline's ops/s is what W processes of this exact code
reach on this machine with no race, no catch-up and no turn (only the cores, caches and disk
shared); W writers of one table do at least the same work per operation, so their same-total ratio
is not expected to exceed it. On a 2-core machine it says how far from 2x the cores themselves are.

Every run is verified: versions 1..W*N gap-free, each operation's predicate in exactly one
commit, and the rows equal the model (all writers' changes; disjoint rows, so order-free) through
dvengine's Arrow reader and, when installed, delta-rs and DuckDB's delta extension.

    python -m dvengine.bench.contention [--writers 1 2 4 8] [--ops 50] [--rows 100000] [--out DIR]
    python -m dvengine.bench.contention --local-s3 ...   # the tables on moto's S3 on 127.0.0.1

No SparkSession: the writers run DML on the embedded executor (the issue's measurement).
With ``--local-s3`` the tables live on an S3 endpoint (moto in a child process, conditional creates
atomic as S3's): there is no host-local commit turn, writers race with conditional PUTs and back
off, and every check reads through the store (DuckDB over httpfs). moto shares the two cores with
the writers, so its figures say what the protocol costs against a local server, not what S3 does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.verify import duckdb_delta_connection
from dvengine.errors import CommitConflictError
from dvengine.storage.logstore import log_dir
from dvengine.storage.registry import request_counts, storage_for
from dvengine.storage.uris import is_object_uri

CONF_ENV = "SPARK_DATABRICKS_DELTA_ROWLEVELCONCURRENCY_ENABLED"
PROFILE_ENV = "DVENGINE_CONTENTION_PROFILE"  # a folder: each writer dumps its cProfile stats there
MAX_RETRIES = 200  # re-plans per operation before a writer gives up (reported, never hit when resolved)


@dataclass
class RunResult:
    """One (writers, row-level) run: counts, throughput and what verification found."""

    writers: int
    ops_per_writer: int
    row_level: bool
    serial: bool = False  # one process ran all ``writers`` writers' operations (the same-total baseline)
    # ``writers`` processes each ran the same-total baseline on its own copy of the table (the ceiling)
    independent: bool = False
    committed: int = 0
    warm_ops: int = 0  # operations per lane run before the start signal (committed, not timed)
    timed: int = 0  # committed operations inside the DML window (ops/s and CPU per op use these)
    surfaced_conflicts: int = 0
    internal_retries: int = 0
    rebased_files: int = 0
    gave_up: int = 0
    elapsed_s: float = 0.0  # DML window: start signal -> the last writer's last DML (ops/s uses this)
    process_elapsed_s: float = 0.0  # start signal -> the last writer process exited (teardown included)
    cpu_s: float = 0.0  # CPU time (user + system) of all writers while running their operations
    ops_per_s: float = 0.0
    versions_gap_free: bool = False
    each_op_once: bool = False
    rows_match_model: bool = False
    delta_rs_matches: bool | None = None
    duckdb_matches: bool | None = None
    errors: list[str] = field(default_factory=list)
    conflict_messages: list[str] = field(default_factory=list)  # the first 5 that surfaced
    # Object-store requests the writers sent in the DML window, by kind (empty for a local table)
    store_requests: dict[str, int] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        return (self.versions_gap_free and self.each_op_once and self.rows_match_model
                and self.delta_rs_matches is not False and self.duckdb_matches is not False)


def create_hot_table(
    root: str, rows: int, options: dict[str, str] | None = None, configuration: dict[str, str] | None = None,
    files: int = 1,
) -> None:
    """One Parquet file of ``rows`` rows (id, v = id): every writer hits the same file. With
    ``files`` > 1 (the ``file-per-writer`` layout) the table holds that many files of ``rows`` rows
    in one commit, file ``f`` the ids ``f*rows .. (f+1)*rows - 1``; they are written as partitions
    ``part = f`` because that is how one write makes several files here, and each file's id range is
    disjoint from the others', so stats skipping leaves one candidate file per operation."""
    ids = np.arange(rows * files, dtype=np.int64)
    columns: dict[str, Any] = {"id": ids, "v": ids.copy()}
    if files > 1:
        columns["part"] = ids // rows
    dvengine.write(pa.table(columns), root, mode="error", storage_options=options, configuration=configuration,
                   partitionBy=["part"] if files > 1 else None)


def single_row_dml(table: DeltaTable, x: int, delete: bool) -> dict[str, Any]:
    """The bench's operation on row ``x``: DELETE it, or UPDATE its ``v`` to ``-x``; its metrics."""
    if delete:
        return table.deleteMetrics(f"id = {x}", engine="local")
    return table.updateMetrics(f"id = {x}", {"v": str(-x)}, engine="local")


def first_id(writer: int, rows: int, file_per_writer: bool) -> int:
    """Where ``writer``'s rows start: at 0 on the one hot file, at its own file's first id
    (``writer * rows``) in the ``file-per-writer`` layout."""
    return writer * rows if file_per_writer else 0


def writer_rows(writer: int, writers: int, ops: int, rows: int = 0, file_per_writer: bool = False) -> list[int]:
    """The rows ``writer`` changes, op by op: ``w + W*k`` of its file."""
    return [first_id(writer, rows, file_per_writer) + writer + writers * k for k in range(ops)]


def is_delete(k: int) -> bool:
    return k % 2 == 0


def model_rows(rows: int, writers: int, ops: int, file_per_writer: bool = False) -> list[tuple[int, int]]:
    """The table after every writer's operations (they touch disjoint rows, so any order)."""
    out = {i: i for i in range(rows * (writers if file_per_writer else 1))}
    for w in range(writers):
        for k, x in enumerate(writer_rows(w, writers, ops, rows, file_per_writer)):
            if is_delete(k):
                del out[x]
            else:
                out[x] = -x
    return sorted(out.items())


def operations(
    writer: int | None, writers: int, ops: int, rows: int = 0, file_per_writer: bool = False
) -> list[tuple[int, bool]]:
    """(row, is DELETE) in the order one process runs them: writer ``writer``'s own, or with
    ``writer=None`` every writer's, op ``k`` of writers 0..W-1 before op ``k+1`` (the serial
    baseline: the same operations and the same final table as W concurrent writers)."""
    lanes = range(writers) if writer is None else [writer]
    return [(first_id(w, rows, file_per_writer) + w + writers * k, is_delete(k)) for k in range(ops) for w in lanes]


def warm_count(writer: int | None, writers: int, warm_ops: int) -> int:
    """How many of a process's first operations run before the start signal: ``warm_ops`` per
    lane (one lane for a writer, W for the same-total baseline, which runs every writer's)."""
    return warm_ops * (writers if writer is None else 1)


def _run_op(table: DeltaTable, x: int, delete: bool) -> dict[str, Any]:
    """One operation, re-planned after every typed conflict that reaches the caller (as an
    application would); its record."""
    surfaced = 0
    kinds: list[str] = []
    while True:
        try:
            metrics = single_row_dml(table, x, delete)
        except CommitConflictError as exc:
            surfaced += 1
            kinds.append(f"{type(exc).__name__}: {exc}")
            if surfaced >= MAX_RETRIES:
                return {"row": x, "version": None, "surfaced": surfaced, "error": repr(exc)}
            continue
        return {
            "row": x,
            "version": metrics["version"],
            "surfaced": surfaced,
            "attempts": metrics.get("numCommitAttempts", 1),
            "rebased": metrics.get("numRebasedFiles", 0),
            "conflicts": kinds,
        }


def run_writer(
    root: str, writer: int | None, writers: int, ops: int, start_file: str, out_file: str,
    profiler: Any = None, warm_ops: int = 0, rows: int = 0, file_per_writer: bool = False,
) -> None:
    """One writer process: wait for the start signal, run its operations, write what happened
    (``writer=None``: all W writers' operations, one after the other). A ``profiler``
    (``cProfile.Profile``) is enabled for the DML window only, so warm-up reads and imports do
    not show in the comparison of W writers with the same-total baseline.

    ``warm_ops``: the first ``warm_ops`` operations of every lane run *before* the start signal
    and are not timed (they are committed and verified like the others). A process pays once,
    on its first DELETE and first UPDATE, for reading the hot file's columns into its column
    cache and building its key index (~10 ms each here): W writer processes pay it W times, the
    same-total baseline once, and a long-running writer never again. With 2 (one DELETE, one
    UPDATE) every process starts the window as a long-running writer would be."""
    table = DeltaTable.forPath(None, root)
    table.toArrow(columns=["id"])
    # Warm: every module a DML needs is imported before the start (the SQL dialect alone took
    # ~18 ms in the first DML, inside the measured window). Both match no row (ids are >= 0), so
    # neither commits: the log stays at version 0.
    table.delete("id = -1", engine="local")
    table.update("id = -1", {"v": "0"}, engine="local")
    todo = operations(writer, writers, ops, rows, file_per_writer)
    warm = warm_count(writer, writers, warm_ops)
    records: list[dict[str, Any]] = [{**_run_op(table, x, delete), "warm": True} for x, delete in todo[:warm]]
    Path(f"{out_file}.ready").touch()
    while not os.path.exists(start_file):
        time.sleep(0.001)
    cpu_start = time.process_time()
    requests_before = request_counts()
    if profiler is not None:
        profiler.enable()
    records.extend(_run_op(table, x, delete) for x, delete in todo[warm:])
    # CLOCK_MONOTONIC is system-wide on Linux, so this instant is comparable with the parent's
    # time.monotonic() of the start signal (both processes read the same clock).
    dml_end = time.monotonic()
    if profiler is not None:
        profiler.disable()
    Path(f"{out_file}.cpu").write_text(str(time.process_time() - cpu_start))
    requests = {k: n - requests_before.get(k, 0) for k, n in request_counts().items() if n != requests_before.get(k, 0)}
    Path(f"{out_file}.requests").write_text(json.dumps(requests))
    Path(f"{out_file}.end").write_text(repr(dml_end))
    Path(out_file).write_text(json.dumps(records))


def _commit_texts(root: str, options: dict[str, str] | None) -> dict[int, str]:
    """Every commit file of the table's log, read as bytes (not through dvengine's log reader)."""
    if not is_object_uri(root):
        return {int(p.name.split(".")[0]): p.read_text() for p in Path(root, "_delta_log").glob("*.json")}
    DeltaTable.forPath(None, root, storage_options=options)  # registers the options for the URI
    store = storage_for(root)
    names = {f.path: f.path.rsplit("/", 1)[-1] for f in store.list_dir(log_dir(root))}
    return {int(name.split(".")[0]): store.read_bytes(path).decode() for path, name in names.items() if name.endswith(".json")}


def _predicates_by_version(root: str, options: dict[str, str] | None = None) -> dict[int, str]:
    out = {}
    for version, text in sorted(_commit_texts(root, options).items()):
        for line in text.splitlines():
            obj = json.loads(line)
            if "commitInfo" in obj:
                out[version] = obj["commitInfo"].get("operationParameters", {}).get("predicate", "")
    return out


def verify(
    root: str, rows: int, writers: int, ops: int, result: RunResult, options: dict[str, str] | None = None,
    file_per_writer: bool = False,
) -> None:
    """Fill the verification fields of ``result`` from the table's log and rows."""
    predicates = _predicates_by_version(root, options)
    total = writers * ops
    result.versions_gap_free = sorted(predicates) == list(range(total + 1))
    wanted = sorted(json.dumps([f"`id` = {x}"]) for w in range(writers) for x in writer_rows(w, writers, ops, rows, file_per_writer))
    seen = sorted(json.dumps(json.loads(p)) for v, p in predicates.items() if v > 0)
    result.each_op_once = seen == wanted
    if not result.each_op_once:
        result.errors.append(f"log predicates differ from the operations: {len(seen)} commits for {len(wanted)} ops")
    model = model_rows(rows, writers, ops, file_per_writer)
    got = DeltaTable.forPath(None, root, storage_options=options).toArrow().sort_by("id")
    result.rows_match_model = list(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == model
    result.duckdb_matches = _duckdb_matches(root, model, options)
    try:
        from deltalake import DeltaTable as RsTable
        from deltalake import QueryBuilder
    except ImportError:
        return
    reader = QueryBuilder().register("t", RsTable(root, storage_options=options)).execute("select id, v from t order by id")
    rs = pa.table(reader.read_all())
    result.delta_rs_matches = list(zip(rs.column("id").to_pylist(), rs.column("v").to_pylist(), strict=True)) == model


def _duckdb_matches(root: str, model: list[tuple[int, int]], options: dict[str, str] | None = None) -> bool | None:
    """The rows as DuckDB's delta_scan reads them equal the model (None: extension not installed)."""
    with duckdb_delta_connection(options if is_object_uri(root) else None) as con:
        if con is None:
            return None
        rows = con.execute(f"select id, v from delta_scan('{root}') order by id").fetchall()
    return [tuple(r) for r in rows] == model


def run_contention(
    root: str, rows: int, writers: int, ops: int, row_level: bool, serial: bool = False, independent: bool = False,
    warm_ops: int = 0, options: dict[str, str] | None = None, file_per_writer: bool = False,
) -> RunResult:
    """Create the hot table at ``root`` (must not exist), run the writers, verify. ``serial``: one
    process runs all ``writers`` writers' operations instead (the same-total baseline); the table
    it ends with, and so the verification, is the same. ``independent``: ``writers`` processes each
    run that baseline on a table of their own (``root``/0, ``root``/1, ...), each verified alike.
    ``warm_ops``: operations per lane each process runs before the start signal (run_writer).
    ``options``: storage options of an object-store ``root`` (``AWS_*``); the writers get them as
    environment variables, which dvengine reads as delta-rs does. ``file_per_writer``: the table
    holds one file of ``rows`` rows per writer and each writer changes only its own (the baselines
    run on the same layout), so writers still race for versions and read each other's commits,
    but never rebase a file another writer changed."""
    if file_per_writer and writers * ops > rows:
        raise ValueError(f"file_per_writer needs writers * ops <= rows so each writer's rows fit its file, got "
                         f"{writers} * {ops} > {rows}")
    if not 0 <= warm_ops < ops:
        raise ValueError(f"warm_ops must be in [0, ops={ops}), got {warm_ops}")
    if independent:
        jobs = [(f"{root.rstrip('/')}/{i}", "all") for i in range(writers)]
    elif serial:
        jobs = [(root, "all")]
    else:
        jobs = [(root, str(w)) for w in range(writers)]
    roots = list(dict.fromkeys(r for r, _ in jobs))
    for table_root in roots:
        create_hot_table(table_root, rows, options, files=writers if file_per_writer else 1)
    result = RunResult(writers, ops, row_level, serial and not independent, independent, warm_ops=warm_ops)
    work = tempfile.mkdtemp(prefix="dvengine-contention-")
    start_file = os.path.join(work, "start")
    env = {**os.environ, **(options or {}), CONF_ENV: "true" if row_level else "false"}
    procs = []
    outs = []
    try:
        for i, (table_root, w) in enumerate(jobs):
            out = os.path.join(work, f"{'writer' if w != 'all' else 'serial'}-{w}-{i}.json")
            outs.append(out)
            cmd = [sys.executable, "-m", "dvengine.bench.contention", "--worker", table_root, w, str(writers), str(ops),
                   start_file, out, str(warm_ops), str(rows), "1" if file_per_writer else "0"]
            procs.append(subprocess.Popen(cmd, env=env))
        while not all(os.path.exists(f"{out}.ready") for out in outs):  # every writer imported and ready
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        started = time.monotonic()  # same system-wide clock the writers stamp their DML end with
        Path(start_file).touch()
        codes = [p.wait() for p in procs]
        result.process_elapsed_s = time.monotonic() - started
        ends = [float(Path(f"{out}.end").read_text()) for out in outs if os.path.exists(f"{out}.end")]
        if len(ends) == len(outs):
            result.elapsed_s = max(ends) - started
        else:
            result.errors.append(f"{len(outs) - len(ends)} writers recorded no DML end time")
        if any(codes):
            result.errors.append(f"writer exit codes {codes}")
        for out in outs:
            if not os.path.exists(out):
                continue
            result.cpu_s += float(Path(f"{out}.cpu").read_text())
            for kind, n in json.loads(Path(f"{out}.requests").read_text()).items():
                result.store_requests[kind] = result.store_requests.get(kind, 0) + n
            for rec in json.loads(Path(out).read_text()):
                result.surfaced_conflicts += rec["surfaced"]
                if len(result.conflict_messages) < 5:  # a sample: typed messages, not a full log
                    result.conflict_messages.extend(rec.get("conflicts", [])[: 5 - len(result.conflict_messages)])
                if rec["version"] is None:
                    result.gave_up += 1
                    result.errors.append(rec.get("error", "gave up"))
                    continue
                result.committed += 1
                result.timed += 0 if rec.get("warm") else 1
                result.internal_retries += rec["attempts"] - 1
                result.rebased_files += rec["rebased"]
        result.ops_per_s = result.timed / result.elapsed_s if result.elapsed_s else 0.0
        if len(roots) == 1:
            verify(root, rows, writers, ops, result, options, file_per_writer)
        else:
            _verify_all(roots, rows, writers, ops, result, options, file_per_writer)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return result


def _verify_all(
    roots: list[str], rows: int, writers: int, ops: int, result: RunResult, options: dict[str, str] | None = None,
    file_per_writer: bool = False,
) -> None:
    """Verify every table of the run into ``result``: each check holds only if it holds for all."""
    checks: dict[str, list[bool | None]] = {}
    for table_root in roots:
        one = RunResult(writers, ops, result.row_level)
        verify(table_root, rows, writers, ops, one, options, file_per_writer)
        result.errors.extend(f"{table_root}: {e}" for e in one.errors)
        for name in ("versions_gap_free", "each_op_once", "rows_match_model", "delta_rs_matches", "duckdb_matches"):
            checks.setdefault(name, []).append(getattr(one, name))
    for name, values in checks.items():  # None: the reader is not installed (as verify() reports it)
        setattr(result, name, None if all(v is None for v in values) else all(v is True for v in values))


def _uptime() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ")[0:3].__str__()
    except OSError:
        return "unknown"


def _who(writers: int, ops: int, serial: bool, independent: bool) -> str:
    """The row label: ``4`` writers of one table, ``1x4*50`` one process doing their ops, ``4 x 1x4*50``
    four such processes on tables of their own (the ceiling)."""
    if independent:
        return f"{writers} x 1x{writers}*{ops}"
    return f"1x{writers}*{ops}" if serial else str(writers)


def _ratio_cell(r: dict[str, Any], key: str) -> str:
    if r.get(key) is None:
        return "-"
    return f"{r[key]:.2f}x ({r[key + '_min']:.2f}-{r[key + '_max']:.2f})"


def _markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    on_store = any(r.get("requests_per_op") for r in results)
    lines = [
        "# Contention: W writer processes x N single-row DML on one file"
        + (" each (one per writer, one table)" if meta.get("layout") == "file-per-writer" else ""),
        "",
        f"tables: {meta.get('store', 'local folder')}; layout: {meta.get('layout', 'hot-file')}",
        "",
        f"rows {meta['rows']}, {meta['ops']} ops per writer (the first {meta.get('warm_ops', 0)} of each before the "
        f"start signal, untimed), {meta['repeats']} rounds of every W (median, min-max of ops/s); "
        f"load average before {meta['load_before']}, after {meta['load_after']}",
        "",
        "Ratios are medians of each round's own ratio (min-max over rounds). `vs W=1`: one writer doing its own "
        f"{meta['ops']} ops. `vs 1xW*N`: one writer process doing the same W*{meta['ops']} ops as the W writers "
        "(same rows, same final table; rows `1xW*N` below). "
        "`W x 1xW*N`: W processes each doing that baseline on its own copy of the table, nothing shared but the "
        "machine: its `vs 1xW*N` is the most W writers of one table could reach here.",
        "",
        "| row-level | W | committed | conflicts surfaced | retries inside | files rebased | ops/s median (min-max) | vs W=1, same round: median (min-max) | vs 1xW*N, same round: median (min-max) | writer CPU ms/op | cores busy | DML window s (to process exit s) | verified |"
        + (" store requests per op |" if on_store else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if on_store else ""),
    ]
    for r in results:
        who = _who(r["writers"], r["ops_per_writer"], r["serial"], r["independent"])
        lines.append(
            f"| {'on' if r['row_level'] else 'off'} | {who} | {r['committed']} | {r['surfaced_conflicts']} | "
            f"{r['internal_retries']} | {r['rebased_files']} | {r['ops_per_s']:.1f} ({r['ops_min']:.1f}-{r['ops_max']:.1f}) | "
            f"{_ratio_cell(r, 'vs_one')} | {_ratio_cell(r, 'vs_serial')} | {r['cpu_ms_per_op']:.1f} | "
            f"{r['cores_busy']:.2f} | {r['window_s']:.2f} ({r['process_s']:.2f}) | {r['verified']} |"
            + (f" {', '.join(f'{k} {v:.2f}' for k, v in r.get('requests_per_op', {}).items())} |" if on_store else "")
        )
    return "\n".join(lines) + "\n"


def _ratios(runs: list[RunResult], bases: list[RunResult] | None) -> dict[str, float] | None:
    """Median and range of each round's ratio of ``runs`` to ``bases`` (None: no baseline)."""
    if not bases:
        return None
    ratios = [r.ops_per_s / b.ops_per_s for r, b in zip(runs, bases, strict=True) if b.ops_per_s]
    if not ratios:
        return None
    return {"": statistics.median(ratios), "_min": min(ratios), "_max": max(ratios)}


def _requests_per_op(runs: list[RunResult]) -> dict[str, float]:
    """Object-store requests per timed op over ``runs``, by kind (empty for a local table)."""
    timed = sum(r.timed for r in runs)
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, n in r.store_requests.items():
            kinds[kind] = kinds.get(kind, 0) + n
    return {kind: n / timed for kind, n in sorted(kinds.items())} if timed else {}


def _summary_row(runs: list[RunResult], ones: list[RunResult] | None, serial: list[RunResult] | None) -> dict[str, Any]:
    rates = [r.ops_per_s for r in runs]
    row: dict[str, Any] = {
        **asdict(runs[0]),
        "committed": sum(r.committed for r in runs),
        "surfaced_conflicts": sum(r.surfaced_conflicts for r in runs),
        "internal_retries": sum(r.internal_retries for r in runs),
        "rebased_files": sum(r.rebased_files for r in runs),
        "ops_per_s": statistics.median(rates), "ops_min": min(rates), "ops_max": max(rates),
        "cpu_ms_per_op": statistics.median([1000 * r.cpu_s / r.timed for r in runs if r.timed] or [0.0]),
        # The writers' CPU over the window: how many cores they kept busy (2.0 is all of this machine).
        "cores_busy": statistics.median([r.cpu_s / r.elapsed_s for r in runs if r.elapsed_s] or [0.0]),
        "window_s": statistics.median(r.elapsed_s for r in runs),
        "process_s": statistics.median(r.process_elapsed_s for r in runs),
        "verified": all(r.verified for r in runs),
        "requests_per_op": _requests_per_op(runs),
        "runs": [asdict(r) for r in runs],
    }
    for key, bases in (("vs_one", ones), ("vs_serial", serial)):
        ratios = _ratios(runs, bases)
        row[key] = None if ratios is None else ratios[""]
        if ratios is not None:
            row[key + "_min"], row[key + "_max"] = ratios["_min"], ratios["_max"]
    return row


@contextmanager
def _tables_home(local_s3: bool, latency_ms: float = 0.0) -> Iterator[tuple[str, dict[str, str] | None]]:
    """Where the run's tables go and their storage options: a temp folder (removed after), or a
    bucket on moto's S3 server started for the run on 127.0.0.1 (stopped after)."""
    if not local_s3:
        with tempfile.TemporaryDirectory(prefix="dvengine-contention-tables-") as tmp:
            yield tmp, None
        return
    from dvengine.bench.object_store import create_bucket, local_s3_server

    with local_s3_server(latency_ms) as (endpoint, options, _log):
        bucket = f"contention-{uuid.uuid4().hex[:12]}"
        create_bucket(endpoint, bucket)
        yield f"s3://{bucket}/tables", options


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--worker":
        root, w, writers, ops, start_file, out, warm_ops, rows, per_writer = args[1:10]
        writer = None if w == "all" else int(w)
        layout = (int(rows), per_writer == "1")
        profile_dir = os.environ.get(PROFILE_ENV)
        if not profile_dir:
            run_writer(root, writer, int(writers), int(ops), start_file, out, None, int(warm_ops), *layout)
            return 0
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, not wall: writers share 2 cores
        run_writer(root, writer, int(writers), int(ops), start_file, out, profiler, int(warm_ops), *layout)
        profiler.dump_stats(os.path.join(profile_dir, f"writer-{w}-of-{writers}.prof"))
        return 0
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.contention", description=__doc__.split("\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--row-level", choices=["on", "off", "both"], default="both")
    parser.add_argument("--out", default="bench-results/contention")
    parser.add_argument("--warm-ops", type=int, default=2,
                        help="operations per writer (per lane of the same-total baseline) run before the start signal, "
                             "not timed: one DELETE and one UPDATE warm each process's caches of the hot file (0: none)")
    parser.add_argument("--same-total", choices=["on", "off"], default="on",
                        help="also run one writer doing the W writers' W*N ops (the same-total baseline) for every W > 1")
    parser.add_argument("--ceiling", choices=["on", "off"], default="on",
                        help="also run W processes each doing that baseline on its own table (the machine's ceiling "
                             "for the same-total ratio) for every W > 1; needs --same-total on")
    parser.add_argument("--layout", choices=["hot-file", "file-per-writer"], default="hot-file",
                        help="hot-file: every writer changes rows of one file (each op rebases onto the others' DVs); "
                             "file-per-writer: one file per writer in the same table, so writers race for versions and "
                             "read each other's commits but never rebase (what the rebase itself costs, by difference)")
    parser.add_argument("--local-s3", action="store_true",
                        help="put the tables on moto's S3 server, started on 127.0.0.1 for the run (no host-local "
                             "commit turn: writers race with conditional PUTs)")
    parser.add_argument("--store-latency-ms", type=float, default=0.0,
                        help="with --local-s3: every request first waits this long in the server, as a round trip "
                             "to a remote store would (concurrent requests wait concurrently)")
    opts = parser.parse_args(args)
    settings = {"on": [True], "off": [False], "both": [True, False]}[opts.row_level]
    per_writer = opts.layout == "file-per-writer"
    meta: dict[str, Any] = {"rows": opts.rows, "ops": opts.ops, "repeats": opts.repeats, "warm_ops": opts.warm_ops,
                            "layout": opts.layout,
                            "store": (f"local S3 (moto, {opts.store_latency_ms:g} ms added per request)" if opts.local_s3
                                      else "local folder"), "load_before": _uptime()}
    summary: list[dict[str, Any]] = []
    with _tables_home(opts.local_s3, opts.store_latency_ms) as (tmp, options):
        for row_level in settings:
            # Rounds: every W once per round, so a change of the machine's load (other engineers'
            # work) hits all W alike; each ratio is the median of each round's own ratio. The
            # same-total baseline of W runs right after W, in the same round.
            by_writers: dict[int, list[RunResult]] = {w: [] for w in opts.writers}
            serial: dict[int, list[RunResult]] = {w: [] for w in opts.writers if w > 1 and opts.same_total == "on"}
            ceiling: dict[int, list[RunResult]] = {w: [] for w in serial if opts.ceiling == "on"}
            for rep in range(opts.repeats):
                for count in opts.writers:
                    kinds = [(False, False)] + ([(True, False)] if count in serial else []) + (
                        [(True, True)] if count in ceiling else [])
                    for one_process, independent in kinds:
                        root = f"{tmp}/t-{row_level}-{count}-{rep}-{one_process}-{independent}"
                        run = run_contention(root, opts.rows, count, opts.ops, row_level, serial=one_process,
                                             independent=independent, warm_ops=opts.warm_ops, options=options,
                                             file_per_writer=per_writer)
                        if options is None:
                            shutil.rmtree(root, ignore_errors=True)
                        who = _who(count, opts.ops, one_process, independent)
                        print(f"row-level={row_level} {who} rep={rep}: {run.ops_per_s:.1f} ops/s, "
                              f"surfaced {run.surfaced_conflicts}, verified {run.verified}", flush=True)
                        group = ceiling if independent else serial if one_process else by_writers
                        group[count].append(run)
            ones = by_writers.get(1)
            for count, runs in by_writers.items():
                summary.append(_summary_row(runs, ones, serial.get(count)))
                if count in serial:
                    summary.append(_summary_row(serial[count], ones, None))
                if count in ceiling:
                    summary.append(_summary_row(ceiling[count], ones, serial[count]))
    meta["load_after"] = _uptime()
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "contention.json").write_text(json.dumps({"meta": meta, "results": summary}, indent=2))
    (out_dir / "contention.md").write_text(_markdown(summary, meta))
    print(_markdown(summary, meta))
    return 0 if all(r["verified"] for r in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
