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

``--engines dvengine delta-rs`` (default: dvengine only, the report as it always was) also runs the
workload with delta-rs writers (``contention_delta_rs``: ``deltalake.DeltaTable.delete/update``,
copy-on-write, file-level conflicts) on their own copy of the same hot table, with the same
baselines, warm-up, DML window, bound on re-plans and verification; a ``CommitFailedError`` is
delta-rs's conflict surfaced to the caller. delta-rs runs in the same rounds as dvengine's first
``--row-level`` setting, right after it at each W, and the report gains an ``engine`` column and
dvengine's ops/s over delta-rs's per W and round. delta-rs has no row-level resolution: its rows
show ``row-level`` -.

    python -m dvengine.bench.contention [--writers 1 2 4 8] [--ops 50] [--rows 100000] [--out DIR]
    python -m dvengine.bench.contention --local-s3 ...   # the tables on moto's S3 on 127.0.0.1
    python -m dvengine.bench.contention --engines dvengine delta-rs --row-level on ...   # and delta-rs's writers

No SparkSession: dvengine's writers run DML on the embedded executor (the issue's measurement).
With ``--local-s3`` the tables live on an S3 endpoint (moto in a child process, conditional creates
atomic as S3's): there is no host-local commit turn, writers race with conditional PUTs and back
off, and every check reads through the store (DuckDB over httpfs). moto shares the two cores with
the writers, so its figures say what the protocol costs against a local server, not what S3 does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench import contention_delta_rs
from dvengine.bench.contention_lane import (
    LaneArgs,
    is_worker_call,
    run_lane,
    run_until_committed,
    worker_command,
    worker_main,
)
from dvengine.bench.contention_report import ContenderRuns, RunResult, engine_ratio_rows, markdown, who_label
from dvengine.bench.contention_workload import model_rows, writer_rows
from dvengine.bench.verify import duckdb_delta_connection
from dvengine.commit.commit_info import delta_json
from dvengine.errors import CommitConflictError
from dvengine.storage.logstore import log_dir
from dvengine.storage.registry import storage_for
from dvengine.storage.uris import is_object_uri

CONF_ENV = "SPARK_DATABRICKS_DELTA_ROWLEVELCONCURRENCY_ENABLED"


@dataclass(frozen=True)
class Engine:
    """An engine the bench's writers can drive: the module whose ``--worker`` main runs one writer
    process (``contention_lane``), and the ``operationParameters.predicate`` its operation on row
    ``x`` leaves in the commit (what verification counts, once per operation)."""

    writer_module: str
    logged_predicate: Callable[[int], str]


def _dvengine_logged_predicate(x: int) -> str:
    """dvengine records a DML's predicate as Delta Spark does: a JSON list of SQL strings, as the
    commit writes it (``commit_info.delta_json``, Jackson's compact text)."""
    return delta_json([f"`id` = {x}"])


ENGINES: dict[str, Engine] = {
    "dvengine": Engine("dvengine.bench.contention", _dvengine_logged_predicate),
    "delta-rs": Engine(contention_delta_rs.WRITER_MODULE, contention_delta_rs.predicate),
}


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


def _run_op(table: DeltaTable, x: int, delete: bool) -> dict[str, Any]:
    """One operation, re-planned after every typed conflict that reaches the caller (as an
    application would); its record."""

    def attempt() -> dict[str, Any]:
        metrics = single_row_dml(table, x, delete)
        return {"version": metrics["version"], "attempts": metrics.get("numCommitAttempts", 1),
                "rebased": metrics.get("numRebasedFiles", 0)}

    return run_until_committed(x, attempt, CommitConflictError)


def run_writer(lane: LaneArgs, profiler: Any = None) -> None:
    """One dvengine writer process: warm up, wait for the start signal, run its operations, write
    what happened (``lane.writer=None``: all W writers' operations, one after the other; the
    timing protocol is ``contention_lane.run_lane``'s).

    ``lane.warm_ops``: the first ``warm_ops`` operations of every lane run *before* the start
    signal and are not timed (they are committed and verified like the others). A process pays
    once, on its first DELETE and first UPDATE, for reading the hot file's columns into its column
    cache and building its key index (~10 ms each here): W writer processes pay it W times, the
    same-total baseline once, and a long-running writer never again. With 2 (one DELETE, one
    UPDATE) every process starts the window as a long-running writer would be."""
    table = DeltaTable.forPath(None, lane.root)
    table.toArrow(columns=["id"])
    # Warm: every module a DML needs is imported before the start (the SQL dialect alone took
    # ~18 ms in the first DML, inside the measured window). Both match no row (ids are >= 0), so
    # neither commits: the log stays at version 0.
    table.delete("id = -1", engine="local")
    table.update("id = -1", {"v": "0"}, engine="local")
    run_lane(lane, lambda x, delete: _run_op(table, x, delete), profiler)


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
    file_per_writer: bool = False, engine: str = "dvengine",
) -> None:
    """Fill the verification fields of ``result`` from the table's log and rows (``engine``: who
    wrote the commits, which says how each operation's predicate reads in the log)."""
    predicates = _predicates_by_version(root, options)
    total = writers * ops
    result.versions_gap_free = sorted(predicates) == list(range(total + 1))
    logged = ENGINES[engine].logged_predicate
    wanted = sorted(logged(x) for w in range(writers) for x in writer_rows(w, writers, ops, rows, file_per_writer))
    seen = sorted(p for v, p in predicates.items() if v > 0)
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
    root: str, rows: int, writers: int, ops: int, row_level: bool | None, serial: bool = False,
    independent: bool = False, warm_ops: int = 0, options: dict[str, str] | None = None, file_per_writer: bool = False,
    engine: str = "dvengine",
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
    but never rebase a file another writer changed. ``engine``: whose writers run (``ENGINES``) on
    the same hot table; ``row_level`` is dvengine's row-level resolution on or off, and must be
    None for delta-rs, which has none (its conflicts are per file)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {sorted(ENGINES)}, got {engine!r}")
    if (row_level is None) != (engine != "dvengine"):
        raise ValueError(f"row_level is dvengine's setting: a bool for dvengine, None for other engines; got "
                         f"{row_level!r} for {engine}")
    if file_per_writer and writers * ops > rows:
        raise ValueError(f"file_per_writer needs writers * ops <= rows so each writer's rows fit its file, got "
                         f"{writers} * {ops} > {rows}")
    if not 0 <= warm_ops < ops:
        raise ValueError(f"warm_ops must be in [0, ops={ops}), got {warm_ops}")
    jobs: list[tuple[str, int | None]]  # (table, writer; None: every writer's operations)
    if independent:
        jobs = [(f"{root.rstrip('/')}/{i}", None) for i in range(writers)]
    elif serial:
        jobs = [(root, None)]
    else:
        jobs = [(root, w) for w in range(writers)]
    roots = list(dict.fromkeys(r for r, _ in jobs))
    for table_root in roots:
        create_hot_table(table_root, rows, options, files=writers if file_per_writer else 1)
    result = RunResult(writers, ops, row_level, serial and not independent, independent, warm_ops=warm_ops,
                       engine=engine)
    work = tempfile.mkdtemp(prefix="dvengine-contention-")
    start_file = os.path.join(work, "start")
    env = {**os.environ, **(options or {})}
    if row_level is not None:
        env[CONF_ENV] = "true" if row_level else "false"
    procs = []
    outs = []
    try:
        for i, (table_root, w) in enumerate(jobs):
            out = os.path.join(work, f"serial-all-{i}.json" if w is None else f"writer-{w}-{i}.json")
            outs.append(out)
            lane = LaneArgs(table_root, w, writers, ops, start_file, out, warm_ops, rows, file_per_writer)
            procs.append(subprocess.Popen(worker_command(ENGINES[engine].writer_module, lane), env=env))
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
                # dvengine: commit attempts beyond the first; delta-rs: winners it committed past
                result.internal_retries += rec.get("attempts", 1) - 1 + rec.get("reconciled", 0)
                result.rebased_files += rec["rebased"]
        result.ops_per_s = result.timed / result.elapsed_s if result.elapsed_s else 0.0
        if len(roots) == 1:
            verify(root, rows, writers, ops, result, options, file_per_writer, engine)
        else:
            _verify_all(roots, rows, writers, ops, result, options, file_per_writer, engine)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return result


def _verify_all(
    roots: list[str], rows: int, writers: int, ops: int, result: RunResult, options: dict[str, str] | None = None,
    file_per_writer: bool = False, engine: str = "dvengine",
) -> None:
    """Verify every table of the run into ``result``: each check holds only if it holds for all."""
    checks: dict[str, list[bool | None]] = {}
    for table_root in roots:
        one = RunResult(writers, ops, result.row_level)
        verify(table_root, rows, writers, ops, one, options, file_per_writer, engine)
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


Contender = tuple[str, bool | None]  # (engine, dvengine's row-level resolution; None for delta-rs)


def contender_groups(engines: list[str], settings: list[bool]) -> list[list[Contender]]:
    """Contenders that share rounds, group by group: dvengine's row-level settings one after the
    other (all rounds of one, then the other's, as ever), and delta-rs in the first group, so each
    of its runs sits beside dvengine's at the same W in the same round (the engine ratio)."""
    groups: list[list[Contender]] = [[("dvengine", row_level)] for row_level in settings] if "dvengine" in engines else []
    if "delta-rs" in engines:
        if groups:
            groups[0].append(("delta-rs", None))
        else:
            groups.append([("delta-rs", None)])
    return groups


def _contender_label(contender: Contender) -> str:
    engine, row_level = contender
    return f"row-level={row_level}" if engine == "dvengine" else engine


def _run_rounds(
    group: list[Contender], opts: argparse.Namespace, tmp: str, options: dict[str, str] | None
) -> dict[Contender, ContenderRuns]:
    """Every round of ``group``. Rounds: every W once per round, so a change of the machine's load
    (other engineers' work) hits all W alike; each ratio is the median of each round's own ratio.
    The same-total baseline of W runs right after W, in the same round, and each contender of the
    group runs its W right after the previous contender's."""
    per_writer = opts.layout == "file-per-writer"
    runs = {c: ContenderRuns.planned(opts.writers, opts.same_total == "on", opts.ceiling == "on") for c in group}
    for rep in range(opts.repeats):
        for count in opts.writers:
            for contender in group:
                engine, row_level = contender
                for one_process, independent in runs[contender].kinds(count):
                    root = f"{tmp}/t-{engine}-{row_level}-{count}-{rep}-{one_process}-{independent}"
                    run = run_contention(root, opts.rows, count, opts.ops, row_level, serial=one_process,
                                         independent=independent, warm_ops=opts.warm_ops, options=options,
                                         file_per_writer=per_writer, engine=engine)
                    if options is None:
                        shutil.rmtree(root, ignore_errors=True)
                    who = who_label(count, opts.ops, one_process, independent)
                    print(f"{_contender_label(contender)} {who} rep={rep}: {run.ops_per_s:.1f} ops/s, "
                          f"surfaced {run.surfaced_conflicts}, verified {run.verified}", flush=True)
                    runs[contender].add(count, one_process, independent, run)
    return runs


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if is_worker_call(args):
        return worker_main(args, run_writer)
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
    parser.add_argument("--engines", nargs="+", choices=sorted(ENGINES), default=["dvengine"],
                        help="whose writers run the workload, each on its own copy of the hot table: dvengine (row-level "
                             "resolution per --row-level) and/or delta-rs (the deltalake package: copy-on-write, its "
                             "CommitFailedError re-planned like dvengine's conflicts); delta-rs runs in the same rounds "
                             "as dvengine's first --row-level setting and the report adds dvengine/delta-rs per W")
    opts = parser.parse_args(args)
    if "delta-rs" in opts.engines and importlib.util.find_spec("deltalake") is None:
        parser.error("--engines delta-rs needs the deltalake package")
    settings = {"on": [True], "off": [False], "both": [True, False]}[opts.row_level]
    meta: dict[str, Any] = {"rows": opts.rows, "ops": opts.ops, "repeats": opts.repeats, "warm_ops": opts.warm_ops,
                            "layout": opts.layout, "engines": opts.engines,
                            "store": (f"local S3 (moto, {opts.store_latency_ms:g} ms added per request)" if opts.local_s3
                                      else "local folder"), "load_before": _uptime()}
    summary: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    with _tables_home(opts.local_s3, opts.store_latency_ms) as (tmp, options):
        for group in contender_groups(opts.engines, settings):
            runs = _run_rounds(group, opts, tmp, options)
            for contender in group:
                summary.extend(runs[contender].summary_rows())
            if len(group) > 1:  # dvengine with its first row-level setting, and delta-rs
                ours, theirs = group
                comparisons.extend(engine_ratio_rows(runs[ours], runs[theirs], ours[1] is True, opts.ops))
    meta["load_after"] = _uptime()
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    payload: dict[str, Any] = {"meta": meta, "results": summary}
    if comparisons:
        payload["engine_ratios"] = comparisons
    (out_dir / "contention.json").write_text(json.dumps(payload, indent=2))
    (out_dir / "contention.md").write_text(markdown(summary, meta, comparisons))
    print(markdown(summary, meta, comparisons))
    return 0 if all(r["verified"] for r in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
