"""Exactly-once streaming upserts: a foreachBatch MERGE job SIGKILLed and restarted from its checkpoint.

``python -m dvengine.testing.stream_soak [--kills 20] [--batches 40] [--seed S] [--out DIR]``

The job is Delta's documented idempotent pattern: a Structured Streaming query reads Parquet
files (``maxFilesPerTrigger=1``: one file per micro-batch) and in ``foreachBatch`` runs a dvengine
MERGE with ``spark.databricks.delta.write.txnAppId`` = the query id (stable across restarts
from one checkpoint) and ``.txnVersion`` = the batch id. The MERGE *adds* the batch's deltas
(``v = t.v + s.v``; inserts for new keys), so a batch applied twice or lost changes the result:
the model is the initial rows plus the sum of every batch's deltas, whatever the order.

The parent runs the job in a child process (its own process group: Python driver and JVM),
waits until the job has committed at least one more batch than before, then SIGKILLs the group
after a random delay, and restarts it, until ``--kills`` kills happened; the last run finishes
the stream. A run that exits by itself (not killed) is reported in ``failed_restarts`` with the
error lines of its log and restarted; three in a row end the soak as a failure. Checks: the
table equals the model through dvengine, delta-rs and DuckDB (when installed); every micro-batch
id appears in exactly one commit's ``txn`` action, from 0 without gaps (none applied twice), and the txn versions increase with the table version. The
foreachBatch function sums each batch's deltas per key first: a batch Spark re-plans after a
crash may hold several input files with overlapping keys.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.verify import duckdb_delta_connection

INITIAL_ROWS = 200
KEYS = 300  # batch keys fall in [0, KEYS): some update, some insert
ROWS_PER_BATCH = 20
MAX_FAILED_RESTARTS = 3
CONF_APP_ID = "spark.databricks.delta.write.txnAppId"
CONF_VERSION = "spark.databricks.delta.write.txnVersion"


@dataclass
class SoakResult:
    batches: int
    kills: int = 0
    runs: int = 0
    kills_during_batches: int = 0
    elapsed_s: float = 0.0
    rows_match_model: bool = False
    delta_rs_matches: bool | None = None
    duckdb_matches: bool | None = None
    each_batch_once: bool = False
    txn_versions_increase: bool = False
    errors: list[str] = field(default_factory=list)
    failed_restarts: list[str] = field(default_factory=list)  # runs that exited on their own, with why

    @property
    def ok(self) -> bool:
        return (self.rows_match_model and self.each_batch_once and self.txn_versions_increase
                and self.delta_rs_matches is not False and self.duckdb_matches is not False and not self.errors)


def batch_table(seed: int, batch: int) -> pa.Table:
    rng = np.random.default_rng(seed * 1_000_003 + batch)
    ids = rng.choice(KEYS, size=ROWS_PER_BATCH, replace=False).astype(np.int64)
    return pa.table({"id": ids, "v": rng.integers(1, 100, size=ROWS_PER_BATCH).astype(np.int64)})


def model(seed: int, batches: int) -> list[tuple[int, int]]:
    rows = {i: 0 for i in range(INITIAL_ROWS)}
    for b in range(batches):
        t = batch_table(seed, b)
        for i, v in zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True):
            rows[i] = rows.get(i, 0) + v
    return sorted(rows.items())


def prepare(work: str, seed: int, batches: int) -> tuple[str, str, str]:
    """The target table, the input folder (one Parquet file per batch, ordered mtimes), the checkpoint path."""
    target, source, checkpoint = (os.path.join(work, d) for d in ("target", "input", "checkpoint"))
    ids = np.arange(INITIAL_ROWS, dtype=np.int64)
    dvengine.write(pa.table({"id": ids, "v": np.zeros(INITIAL_ROWS, dtype=np.int64)}), target)
    os.makedirs(source)
    base = time.time() - batches - 10
    for b in range(batches):
        path = os.path.join(source, f"batch-{b:05d}.parquet")
        pq.write_table(batch_table(seed, b), path)
        os.utime(path, (base + b, base + b))  # the file source orders by modification time
    return target, source, checkpoint


def run_job(target: str, source: str, checkpoint: str) -> None:
    """The streaming job (child process): runs until every input file is processed."""
    from dvengine.engine.spark.session import get_or_create_session

    spark = get_or_create_session()
    query_id: dict[str, str] = {}
    started = threading.Event()

    def upsert(batch: Any, batch_id: int) -> None:
        started.wait()
        # One row per key: a micro-batch Spark re-plans after a crash (its offsets were not yet
        # logged) may hold several input files whose keys overlap, and a MERGE source with
        # duplicate keys fails (DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE).
        deltas = batch.groupBy("id").agg({"v": "sum"}).withColumnRenamed("sum(v)", "v")  # no pyspark import here
        batch.sparkSession.conf.set(CONF_APP_ID, query_id["id"])
        batch.sparkSession.conf.set(CONF_VERSION, str(batch_id))
        try:
            (DeltaTable.forPath(batch.sparkSession, target).alias("t")
             .merge(deltas.alias("s"), "t.id = s.id")
             .whenMatchedUpdate(set={"v": "t.v + s.v"})
             .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"})
             .execute())
        finally:
            batch.sparkSession.conf.unset(CONF_APP_ID)
            batch.sparkSession.conf.unset(CONF_VERSION)

    stream = (spark.readStream.format("parquet").schema("id long, v long").option("maxFilesPerTrigger", 1)
              .load(source))
    query = stream.writeStream.foreachBatch(upsert).option("checkpointLocation", checkpoint).start()
    query_id["id"] = str(query.id)
    started.set()
    print("READY", flush=True)
    query.processAllAvailable()
    query.stop()
    print("DONE", flush=True)


def _txn_commits(target: str) -> list[tuple[int, str, int]]:
    """(table version, appId, txn version) of every txn action in the JSON log."""
    out = []
    for path in sorted(Path(target, "_delta_log").glob("*.json")):
        version = int(path.name.split(".")[0])
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            if "txn" in obj:
                out.append((version, obj["txn"]["appId"], int(obj["txn"]["version"])))
    return out


def _committed_batches(target: str) -> int:
    return len(_txn_commits(target))


def _start(target: str, source: str, checkpoint: str, log: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "dvengine.testing.stream_soak", "--child", target, source, checkpoint]
    with open(log, "ab") as sink:  # the child's own output, for the report when a run fails
        return subprocess.Popen(cmd, start_new_session=True, stdout=sink, stderr=subprocess.STDOUT)


def _failure(log: str, code: int | None, what: str) -> str:
    """``what`` plus the last Python/Java error lines of the child's log."""
    lines = Path(log).read_text(errors="replace").splitlines() if os.path.exists(log) else []
    errors = [line for line in lines if "Error" in line or "Exception" in line][-4:]
    return f"{what} (exit code {code}): " + (" | ".join(errors) if errors else "; ".join(lines[-3:]))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group already ended by itself
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def soak(work: str, kills: int, batches: int, seed: int, timeout_s: float = 3600.0) -> SoakResult:
    """Run the job with ``kills`` SIGKILLs, then to the end; verify (see the module docstring)."""
    rng = random.Random(seed)
    target, source, checkpoint = prepare(work, seed, batches)
    result = SoakResult(batches)
    started = time.monotonic()
    consecutive = 0
    while result.kills < kills and time.monotonic() - started < timeout_s:
        before = _committed_batches(target)
        if before >= batches:
            break  # the stream finished before enough kills: more batches needed
        log = os.path.join(work, f"run-{result.runs}.log")
        proc = _start(target, source, checkpoint, log)
        result.runs += 1
        # Wait for progress (a new commit), so kills land while batches run, not during JVM start.
        while _committed_batches(target) <= before and proc.poll() is None:
            time.sleep(0.05)
        if proc.poll() == 0:
            break  # the stream finished (every batch done) before this kill
        if proc.poll() is not None:
            # A restart that fails by itself is restarted again, as a supervisor would, and
            # reported; the same failure MAX_FAILED_RESTARTS times in a row ends the soak.
            result.failed_restarts.append(_failure(log, proc.returncode, f"run {result.runs} exited before committing a batch"))
            consecutive += 1
            if consecutive >= MAX_FAILED_RESTARTS:
                result.errors.append(f"{consecutive} restarts in a row failed; last: {result.failed_restarts[-1]}")
                break
            continue
        consecutive = 0
        time.sleep(rng.uniform(0.0, 1.5))
        if proc.poll() is None:
            result.kills_during_batches += int(_committed_batches(target) < batches)
            _kill(proc)
            result.kills += 1
    log = os.path.join(work, f"run-{result.runs}.log")
    proc = _start(target, source, checkpoint, log)  # the last run finishes the stream
    result.runs += 1
    code = proc.wait(timeout=max(60.0, timeout_s - (time.monotonic() - started)))
    if code != 0:
        result.errors.append(_failure(log, code, "the final run failed"))
    result.elapsed_s = time.monotonic() - started
    verify(target, seed, batches, result)
    return result


def verify(target: str, seed: int, batches: int, result: SoakResult) -> None:
    expected = model(seed, batches)
    got = DeltaTable.forPath(None, target).toArrow().sort_by("id")
    result.rows_match_model = list(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == expected
    txns = _txn_commits(target)
    app_ids = {app for _, app, _ in txns}
    batch_ids = sorted(b for _, _, b in txns)
    # Micro-batches, not input files: a re-planned batch may take several files, so there can be
    # fewer batches than files; each batch id must still be committed once, without gaps (the
    # rows = model check proves every file's deltas landed exactly once).
    result.each_batch_once = len(app_ids) == 1 and batch_ids == list(range(len(batch_ids))) and bool(batch_ids)
    if not result.each_batch_once:
        result.errors.append(f"txn batch ids {batch_ids} under app ids {sorted(app_ids)}; expected 0..n-1 once each")
    ordered = [b for _, _, b in sorted(txns)]
    result.txn_versions_increase = ordered == sorted(ordered)
    try:
        from deltalake import DeltaTable as RsTable
        from deltalake import QueryBuilder
    except ImportError:
        pass
    else:
        rs = pa.table(QueryBuilder().register("t", RsTable(target)).execute("select id, v from t order by id").read_all())
        result.delta_rs_matches = list(zip(rs.column("id").to_pylist(), rs.column("v").to_pylist(), strict=True)) == expected
    with duckdb_delta_connection() as con:
        if con is None:
            return
        rows = con.execute(f"select id, v from delta_scan('{target}') order by id").fetchall()
        result.duckdb_matches = [tuple(r) for r in rows] == expected


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--child":
        run_job(*args[1:4])
        return 0
    parser = argparse.ArgumentParser(prog="python -m dvengine.testing.stream_soak", description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default="stream-soak-results")
    opts = parser.parse_args(args)
    load_before = Path("/proc/loadavg").read_text().split()[:3] if os.path.exists("/proc/loadavg") else []
    with tempfile.TemporaryDirectory(prefix="dvengine-stream-soak-") as work:
        result = soak(work, opts.kills, opts.batches, opts.seed)
    report = {**asdict(result), "ok": result.ok, "seed": opts.seed, "load_before": load_before,
              "load_after": Path("/proc/loadavg").read_text().split()[:3] if os.path.exists("/proc/loadavg") else []}
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stream-soak.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
