"""``dvengine bench --soak ROUNDS``: a stream of small upserts and deletes, run as a job, over time.

The job dvengine exists for (issue #22): a table of ``--rows`` rows (1M), then ROUNDS rounds, each
opening the table by path with no SparkSession and MERGEing 100 keys (half updates of existing
keys, half new keys); every 10th round also DELETEs 5 existing keys. Contenders run the same
rounds in lockstep (round r of each, then round r+1), so load drifts on this shared machine hit
them alike:

- ``dvengine``: auto compaction on (table property ``delta.autoOptimize.autoCompact=true``,
  Delta's default thresholds: 50 small files per partition, 64 MiB "small", 128 MiB bins, plus
  dvengine's default tiny-file trigger: 10 files under 1 MiB);
- ``dvengine-nocompact``: the same with auto compaction off;
- ``delta-rs``: ``deltalake``'s MERGE and DELETE, copy-on-write (every touched file rewritten).

Two key shapes: ``uniform`` (ids spread over the whole key range: base ids are even, new ids are
random unused odd numbers, updates hit random existing ids) and ``growing`` (event ids: new ids
count up from the last one; updates are late corrections of one of the 50,000 newest ids).

Reported: per-round latency (p50 per decile, p99, total), files and DV'd files over time, the
full-read time every ``read_every`` rounds and at the end against a freshly written table of the
same rows, bytes written, and, with ``--profile``, a cProfile of each dvengine contender's last
round. At the end every table's rows are checked against an in-memory model, and read by
delta-rs (dvengine tables) or dvengine (the delta-rs table) as well.

By default all contenders run in this one process. ``workers=True`` (``--soak-workers``) runs
each in its own worker process (``multiprocessing``, "spawn", one Pipe each), in the same
lockstep: this process keeps the model, makes each round's rows and doomed keys and sends them;
the worker does the round and times it itself (wall, process CPU, its own GC pauses, the
background wait and ``os.sync()``), and times the full reads too, so no figure includes the
pipe. Reading the table folder (round events, layout, bytes, the end checks against the model)
stays here. It tells co-residence (CPU caches, allocator, GC shared by the contenders) from the
machine: if two contenders' round times still move together in separate processes, the cause
is outside them.

Machine-speed reference: at round 0 and every ``max(1, rounds // 40)`` rounds, between rounds and
in this process (never inside a contender's timed figures), a fixed CPU task is timed (a
pure-Python loop and a numpy sort of a fixed-seed 1M-element array, median of 3; 24-26 ms on this machine at load 1.6).
A shared machine's speed moves by +-20 % from minute to minute; without a reference a
contender's drift over a run cannot be told from the machine's. Reported as ``reference_ms``
([round, ms] pairs) and, in soak.md, its p50 per decile and its drift (last/first decile).
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import io
import json
import multiprocessing
import os
import pstats
import shutil
import statistics
import tempfile
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dvengine.bench.soak_report import plot_soak, reference_every, render_markdown

UPSERT_KEYS = 100
DELETE_EVERY = 10
DELETE_KEYS = 5
RECENT_WINDOW = 50_000
CONTENDERS = ("dvengine", "dvengine-nocompact", "delta-rs")
COLUMNS = ("id", "val", "amount", "tag")


@dataclass
class KeyModel:
    """The expected table: id -> last round that wrote it (val), kept as numpy-friendly dict."""

    shape: str
    rows: int
    rng: np.random.Generator
    live: dict[int, int] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # ids in insertion order (growing: recency)
    next_id: int = 0

    def base(self) -> pa.Table:
        ids = np.arange(self.rows, dtype=np.int64) * (2 if self.shape == "uniform" else 1)
        self.live = dict.fromkeys(ids.tolist(), 0)
        self.order = ids.tolist()
        self.next_id = int(ids[-1]) + 1
        return _rows(ids, 0, self.rng)

    def _existing(self, n: int) -> list[int]:
        if self.shape == "growing":
            window = self.order[-RECENT_WINDOW:]
            picks = self.rng.choice(len(window), size=n, replace=False)
            out = [window[i] for i in picks]
        else:
            picks = self.rng.choice(len(self.order), size=n, replace=False)
            out = [self.order[i] for i in picks]
        return [k for k in out if k in self.live][:n]

    def _new(self, n: int) -> list[int]:
        if self.shape == "growing":
            out = list(range(self.next_id, self.next_id + n))
            self.next_id += n
            return out
        top = 2 * self.rows + 2 * UPSERT_KEYS * 100_000
        fresh: set[int] = set()
        while len(fresh) < n:
            cand = int(self.rng.integers(0, top // 2)) * 2 + 1
            if cand not in self.live:
                fresh.add(cand)
        return sorted(fresh)

    def upsert_keys(self) -> list[int]:
        return sorted(set(self._existing(UPSERT_KEYS // 2)) | set(self._new(UPSERT_KEYS - UPSERT_KEYS // 2)))

    def apply_upsert(self, keys: list[int], round_no: int) -> None:
        for k in keys:
            if k not in self.live:
                self.order.append(k)
            self.live[k] = round_no

    def delete_keys(self) -> list[int]:
        return sorted(set(self._existing(DELETE_KEYS)))

    def apply_delete(self, keys: list[int]) -> None:
        for k in keys:
            self.live.pop(k, None)
        gone = set(keys)
        if gone and len(self.order) < 5_000_000:
            # In place: run_soak gc.freeze()s the model after setup, and a new list (1M+ ids, every
            # 10th round) was tracked again, so the collections inside the contenders' rounds
            # walked it (2,000 uniform rounds: 3.8 s of young collections with the new list, 1.2 s without).
            self.order[:] = [k for k in self.order if k not in gone]


def _rows(ids: np.ndarray, round_no: int, rng: np.random.Generator) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "val": pa.array(np.full(len(ids), round_no, dtype=np.int64)),
        "amount": pa.array(rng.random(len(ids))),
        "tag": pa.array([f"r{round_no}"] * len(ids)),
    })


def _folder_bytes(root: str) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            total += os.path.getsize(os.path.join(folder, name))
    return total


class Contender(ABC):
    name = ""

    def __init__(self, root: str) -> None:
        self.root = root

    @abstractmethod
    def create(self, base: pa.Table) -> None: ...
    @abstractmethod
    def upsert(self, source: pa.Table) -> None: ...
    @abstractmethod
    def delete(self, keys: list[int]) -> None: ...
    @abstractmethod
    def read(self) -> pa.Table: ...
    @abstractmethod
    def read_other(self) -> pa.Table:
        """The other engine's reader of this table, for the end check."""
    @abstractmethod
    def fresh_reader(self, rows: pa.Table, scratch: str) -> Callable[[], object]:
        """Write ``rows`` as a fresh table at ``scratch`` (this engine's writer); return its full read."""

    def settle(self) -> None:
        """Finish work this contender left running in the background (before another contender's
        round, so that it never runs on that contender's time). delta-rs leaves none."""
        return None

    def layout(self) -> tuple[int, int]:
        """(live files, files with a DV), from the log (dvengine's reader works on both engines' tables)."""
        from dvengine.log import load_snapshot

        files = load_snapshot(self.root).files
        return len(files), sum(1 for f in files if f.deletion_vector is not None)


class DvengineContender(Contender):
    def __init__(self, root: str, compact: bool) -> None:
        super().__init__(root)
        self.compact = compact
        self.name = "dvengine" if compact else "dvengine-nocompact"

    def create(self, base: pa.Table) -> None:
        import dvengine
        from dvengine.maintenance.auto_compact import PROPERTY_AUTO_COMPACT

        dvengine.write(base, self.root, configuration={PROPERTY_AUTO_COMPACT: str(self.compact).lower()})

    def upsert(self, source: pa.Table) -> None:
        from dvengine import DeltaTable

        (DeltaTable.forPath(None, self.root).alias("t").merge(source, "t.id = s.id", source_alias="s")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    def delete(self, keys: list[int]) -> None:
        from dvengine import DeltaTable

        DeltaTable.forPath(None, self.root).delete(f"id IN ({', '.join(map(str, keys))})")

    def read(self) -> pa.Table:
        from dvengine import DeltaTable

        return DeltaTable.forPath(None, self.root).toArrow()

    def read_other(self) -> pa.Table:
        return _deltars_read(self.root)

    def settle(self) -> None:
        import dvengine

        dvengine.wait_for_checkpoints()  # checkpoints are written on a background thread

    def fresh_reader(self, rows: pa.Table, scratch: str) -> Callable[[], object]:
        import dvengine
        from dvengine import DeltaTable

        dvengine.write(rows, scratch)
        return lambda: DeltaTable.forPath(None, scratch).toArrow()


def _deltars_read(root: str) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    return pa.table(QueryBuilder().register("t", DeltaTable(root)).execute("SELECT * FROM t").read_all())


class DeltaRsContender(Contender):
    name = "delta-rs"

    def create(self, base: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.root, base)

    def upsert(self, source: pa.Table) -> None:
        from deltalake import DeltaTable

        (DeltaTable(self.root).merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def delete(self, keys: list[int]) -> None:
        from deltalake import DeltaTable

        DeltaTable(self.root).delete(f"id IN ({', '.join(map(str, keys))})")

    def read(self) -> pa.Table:
        return _deltars_read(self.root)

    def vacuum(self) -> None:
        """Delete unreferenced files: its copy-on-write leaves a whole table's worth per round."""
        from deltalake import DeltaTable

        DeltaTable(self.root).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)

    def read_other(self) -> pa.Table:
        from dvengine import DeltaTable

        return DeltaTable.forPath(None, self.root).toArrow()

    def fresh_reader(self, rows: pa.Table, scratch: str) -> Callable[[], object]:
        from deltalake import write_deltalake

        write_deltalake(scratch, rows)
        return lambda: _deltars_read(scratch)


def _round_events(root: str, next_version: int) -> tuple[list[int], int]:
    """What the commits from ``next_version`` on did: [commits, checkpoint written (0/1), files
    compacted, rows compacted, bytes compacted], and the next version to look at.

    Read from the log's JSON after the round's timer stopped (both engines write commitInfo and
    classic checkpoints), so the tail of the latency can be attributed to what a round did.
    """
    log = os.path.join(root, "_delta_log")
    commits = checkpointed = files = rows = size = 0
    version = next_version
    while True:
        try:
            with open(os.path.join(log, f"{version:020d}.json"), encoding="utf-8") as fh:
                actions = [json.loads(line) for line in fh if line.strip()]
        except FileNotFoundError:
            break
        commits += 1
        if os.path.exists(os.path.join(log, f"{version:020d}.checkpoint.parquet")):
            checkpointed = 1
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if info.get("operation") == "OPTIMIZE":
            adds = [a["add"] for a in actions if "add" in a]
            files += sum(1 for a in actions if "remove" in a)
            size += sum(int(a.get("size", 0)) for a in adds)
            rows += sum(json.loads(a.get("stats") or "{}").get("numRecords", 0) for a in adds)
        version += 1
    return [commits, checkpointed, files, rows, size], version


def _mark_checkpoint_rounds(root: str, events: list[list[int]], first_versions: list[int], end: int) -> None:
    """Set each round's "checkpoint written" from the checkpoint files there are at the end: a
    checkpoint written on a background thread (dvengine's) appears only after its round's timer
    stopped, often during the next round, and belongs to the round that committed its version."""
    log = os.path.join(root, "_delta_log")
    written = {int(n.split(".")[0]) for n in os.listdir(log) if n.endswith(".checkpoint.parquet")}
    for i, first in enumerate(first_versions):
        last = first_versions[i + 1] if i + 1 < len(first_versions) else end
        events[i][1] = int(any(v in written for v in range(first, last)))


def _tail(
    latencies_ms: list[float], events: list[list[int]], factor: float = 3.0,
    gc_rounds: list[list[float]] | None = None, cpu_ms: list[float] | None = None,
) -> dict[str, Any]:
    """Rounds slower than ``factor`` x p50 and the top 1 %, split by what the round did; with
    ``gc_rounds`` ([GC pause ms, full collections, full-collection ms] per round) also how many of
    them ran a full (generation-2) collection, and the p99 with each round's GC pauses taken out;
    with ``cpu_ms`` (process CPU time per round) how many slow rounds used under half their wall
    time in CPU: they waited (for the shared machine's cores or for I/O), they did not compute."""
    p50 = float(np.percentile(np.array(latencies_ms), 50))
    cut99 = float(np.percentile(np.array(latencies_ms), 99))

    def kind(e: list[int]) -> str:
        return "compaction" if e[2] else "checkpoint" if e[1] else "plain"

    out: dict[str, Any] = {"p50_ms": p50, "factor": factor}
    for label, cut in (("over_factor", factor * p50), ("top_1pct", cut99)):
        slow = [i for i, x in enumerate(latencies_ms) if x > cut]
        out[label] = {k: sum(1 for i in slow if kind(events[i]) == k) for k in ("compaction", "checkpoint", "plain")}
    if gc_rounds is not None:
        for label, cut in (("over_factor", factor * p50), ("top_1pct", cut99)):
            slow = [i for i, x in enumerate(latencies_ms) if x > cut]
            out[f"{label}_with_full_gc"] = {
                k: sum(1 for i in slow if kind(events[i]) == k and gc_rounds[i][1] > 0)
                for k in ("compaction", "checkpoint", "plain")
            }
        out["full_gc_rounds"] = sum(1 for g in gc_rounds if g[1] > 0)
        out["full_gc_ms_p50"] = float(np.median([g[2] for g in gc_rounds if g[1] > 0] or [0.0]))
        out["gc_ms_total"] = float(sum(g[0] for g in gc_rounds))
        if cpu_ms is not None:
            for label, cut in (("over_factor", factor * p50), ("top_1pct", cut99)):
                out[f"{label}_waiting"] = sum(
                    1 for i, x in enumerate(latencies_ms) if x > cut and cpu_ms[i] < 0.5 * x)
        out["p99_ms_without_gc"] = float(np.percentile(
            np.array([x - g[0] for x, g in zip(latencies_ms, gc_rounds, strict=True)]), 99))
    for k in ("compaction", "checkpoint", "plain"):
        ls = [x for x, e in zip(latencies_ms, events, strict=True) if kind(e) == k]
        out[f"{k}_rounds"] = len(ls)
        out[f"{k}_p50_ms"] = float(np.percentile(np.array(ls), 50)) if ls else None
        out[f"{k}_max_ms"] = max(ls) if ls else None
    return out


class GcClock:
    """Pauses of the cyclic garbage collector, timed with ``gc.callbacks`` (read by the soak per
    round, so a slow round can be told apart as a GC pause or something else)."""

    def __init__(self) -> None:
        self.started = 0.0
        self.total_s = 0.0
        self.full = 0  # generation-2 collections
        self.full_s = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        took = time.perf_counter() - self.started
        self.total_s += took
        if info.get("generation") == 2:
            self.full += 1
            self.full_s += took

    def reading(self) -> tuple[float, int, float]:
        return self.total_s, self.full, self.full_s


def _best_of(fn: Callable[[], object], n: int = 3) -> float:
    """Median of ``n`` timed calls."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


READ_SAMPLES = 9


def _alternating_reads(
    read_end: Callable[[], object], read_fresh: Callable[[], object], n: int = READ_SAMPLES
) -> tuple[list[float], list[float]]:
    """``n`` timed full reads of the end table and of the fresh one, alternating, after one
    untimed read of each (both warm: page cache, snapshot cache, pyarrow's pools).

    One read of each took 0.04-0.07 s, so a single load spike or a cold cache moved the ratio by
    0.4 (delta-rs's own end/fresh ratio read 1.83x on an unchanged 1-file table); alternating
    exposes both tables to the same load, and the median drops the spikes.
    """
    read_end()
    read_fresh()
    end: list[float] = []
    fresh: list[float] = []
    for _ in range(n):
        for fn, samples in ((read_end, end), (read_fresh, fresh)):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return end, fresh


def _profiled_round(c: Contender, source: pa.Table, doomed: list[int]) -> str:
    """cProfile of one round with the local executor's per-file thread pool made sequential, so
    the per-file work shows in the profile (cProfile sees only the calling thread); its latency
    is still recorded, and is a little higher than a threaded round's."""
    import dvengine.engine.local.executor as local_executor

    threaded = local_executor.parallel_map
    local_executor.parallel_map = lambda function, items: [function(item) for item in items]
    prof = cProfile.Profile()
    try:
        prof.enable()
        c.upsert(source)
        if doomed:
            c.delete(doomed)
        prof.disable()
    finally:
        local_executor.parallel_map = threaded
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)
    return buf.getvalue()


@dataclass
class RoundFigures:
    """What one contender's round measured, where the round ran (this process or its worker)."""

    wall_s: float
    cpu_s: float  # process CPU time, the background wait and os.sync() included
    gc: tuple[float, int, float]  # GC pause s, full collections, full-collection s during the round
    settle_s: float
    sync_s: float
    profile: str | None = None


def _timed_round(c: Contender, clock: GcClock, source: pa.Table, doomed: list[int], profiled: bool,
                 settle: bool, sync: bool) -> RoundFigures:
    """One round of ``c``, timed: the upsert (and delete), then, untimed in the latency, the
    background wait and the writeback as ``run_soak`` asks."""
    profile_text = None
    settle_s = sync_s = 0.0
    gc_before = clock.reading()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if profiled:
        profile_text = _profiled_round(c, source, doomed)
    else:
        c.upsert(source)
        if doomed:
            c.delete(doomed)
    wall = time.perf_counter() - t0
    if settle:
        # Background work (dvengine's checkpoints) finishes here, before the next contender runs;
        # alone, it overlaps this contender's own next round, as in a job. Its wait counts in the
        # total, not in a round's latency.
        t1 = time.perf_counter()
        c.settle()
        settle_s = time.perf_counter() - t1
    if sync:
        # Write back this contender's dirty pages before the next one runs: delta-rs rewrites
        # ~20 MB a round without fsync, and the next dvengine commit's fsync then waited for that
        # writeback (10,000 rounds at 6afb082: 73 of dvengine's 100 slowest rounds spent most of
        # their wall time waiting, CPU median 27 ms of 138). Untimed; reported per contender.
        t2 = time.perf_counter()
        os.sync()
        sync_s = time.perf_counter() - t2
    cpu = time.process_time() - cpu0
    gc_after = clock.reading()
    return RoundFigures(wall, cpu, (gc_after[0] - gc_before[0], gc_after[1] - gc_before[1],
                                    gc_after[2] - gc_before[2]), settle_s, sync_s, profile_text)


def _end_reads(c: Contender, rows: pa.Table, scratch: str) -> tuple[list[float], list[float]]:
    """Write ``rows`` fresh at ``scratch`` with ``c``'s engine, then the alternating timed reads."""
    from dvengine.log import clear_snapshot_cache

    clear_snapshot_cache()
    return _alternating_reads(c.read, c.fresh_reader(rows, scratch))


def _make_contender(name: str, root: str) -> Contender:
    return DeltaRsContender(root) if name == "delta-rs" else DvengineContender(root, name == "dvengine")


class _Timed(ABC):
    """Where a contender's timed work runs: this process, or its own worker process."""

    pid = 0

    @abstractmethod
    def create(self, base: pa.Table) -> None: ...
    @abstractmethod
    def round(self, r: int, source: pa.Table, doomed: list[int], profiled: bool,
              settle: bool, sync: bool) -> RoundFigures: ...
    @abstractmethod
    def timed_read(self, r: int) -> float: ...
    @abstractmethod
    def vacuum(self, r: int) -> None: ...
    @abstractmethod
    def end_reads(self, rows: pa.Table, scratch: str) -> tuple[list[float], list[float]]: ...

    def close(self) -> None:
        return None


class _InProcess(_Timed):
    def __init__(self, c: Contender, clock: GcClock) -> None:
        self.c, self.clock, self.pid = c, clock, os.getpid()

    def create(self, base: pa.Table) -> None:
        self.c.create(base)

    def round(self, r: int, source: pa.Table, doomed: list[int], profiled: bool,
              settle: bool, sync: bool) -> RoundFigures:
        return _timed_round(self.c, self.clock, source, doomed, profiled, settle, sync)

    def timed_read(self, r: int) -> float:
        return _best_of(self.c.read, 1)

    def vacuum(self, r: int) -> None:
        assert isinstance(self.c, DeltaRsContender)
        self.c.vacuum()

    def end_reads(self, rows: pa.Table, scratch: str) -> tuple[list[float], list[float]]:
        return _end_reads(self.c, rows, scratch)


# Test-only: "NAME:ROUND" makes contender NAME's worker raise in that round (read only by the
# worker loop, so that tests can check a worker's error reaches the parent; spawn rules out monkeypatch).
FAIL_ENV = "DVENGINE_SOAK_WORKER_FAIL"


def _worker_main(conn: Any, name: str, root: str) -> None:
    """A worker process's loop: one contender, its own GcClock; replies ("ok", value) or
    ("error", traceback text) to each request, until ("stop",) or the pipe closes."""
    c = _make_contender(name, root)
    clock = GcClock()
    fail = os.environ.get(FAIL_ENV, "")
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        op = msg[0]
        if op == "stop":
            break
        try:
            value: Any = None
            if op == "create":
                c.create(msg[1])
                gc.freeze()  # as the parent does after its setup: what setup made is not walked again
                gc.callbacks.append(clock)
                value = os.getpid()
            elif op == "round":
                r = msg[1]
                if fail == f"{name}:{r}":
                    raise RuntimeError(f"{FAIL_ENV} asked {name} to fail in round {r}")
                value = _timed_round(c, clock, *msg[2:])
            elif op == "read":
                value = _best_of(c.read, 1)
            elif op == "vacuum":
                assert isinstance(c, DeltaRsContender)
                c.vacuum()
            elif op == "end_reads":
                value = _end_reads(c, msg[1], msg[2])
            else:
                raise ValueError(f"unknown request {op!r}")
            reply: tuple[str, Any] = ("ok", value)
        except Exception:  # every failure goes back to the parent, with its traceback
            reply = ("error", traceback.format_exc())
        conn.send(reply)
    if clock in gc.callbacks:
        gc.callbacks.remove(clock)
    conn.close()


class _Worker(_Timed):
    """A contender in its own process ("spawn"): requests over a Pipe, figures measured there."""

    def __init__(self, name: str, root: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.name = name
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, name, root), name=f"soak-{name}", daemon=True)
        self.process.start()
        child.close()

    def _call(self, where: str, *msg: Any) -> Any:
        try:
            self.conn.send(msg)
            status, value = self.conn.recv()
        except (EOFError, OSError) as e:
            raise RuntimeError(f"soak contender {self.name}: its worker process died in {where} "
                               f"(exit code {self.process.exitcode})") from e
        if status == "error":
            raise RuntimeError(f"soak contender {self.name} failed in {where} (in its worker process, "
                               f"pid {self.process.pid}):\n{value}")
        return value

    def create(self, base: pa.Table) -> None:
        self.pid = int(self._call("setup (creating the table)", "create", base))

    def round(self, r: int, source: pa.Table, doomed: list[int], profiled: bool,
              settle: bool, sync: bool) -> RoundFigures:
        figures: RoundFigures = self._call(f"round {r}", "round", r, source, doomed, profiled, settle, sync)
        return figures

    def timed_read(self, r: int) -> float:
        return float(self._call(f"the full read after round {r}", "read"))

    def vacuum(self, r: int) -> None:
        self._call(f"the VACUUM after round {r}", "vacuum")

    def end_reads(self, rows: pa.Table, scratch: str) -> tuple[list[float], list[float]]:
        end, fresh = self._call("the end reads", "end_reads", rows, scratch)
        return list(end), list(fresh)

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the worker may be gone already
            self.conn.send(("stop",))
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.conn.close()


def _reference_data() -> np.ndarray:
    return np.random.default_rng(40).random(1_000_000)


def _reference_ms(data: np.ndarray) -> float:
    """The machine-speed reference: a fixed CPU task (a pure-Python loop and a numpy sort of
    ``data``, :func:`_reference_data`'s fixed-seed 1M-element array), median of 3 runs, in ms.
    Deterministic: only the machine moves it."""
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        acc = 0
        for i in range(400_000):
            acc += i * i % 7
        np.sort(data)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _check(table: pa.Table, model: KeyModel) -> str | None:
    """None when ``table`` holds exactly the model's ids with the model's val; else what differs."""
    t = table.select(["id", "val"]).sort_by("id")
    ids = t.column("id").to_numpy()
    expected_ids = np.array(sorted(model.live), dtype=np.int64)
    if len(ids) != len(expected_ids):
        return f"{len(ids)} rows, model has {len(expected_ids)}"
    if not np.array_equal(ids, expected_ids):
        return f"ids differ, first at {int(np.argmax(ids != expected_ids))}"
    vals = t.column("val").to_numpy()
    expected_vals = np.array([model.live[k] for k in expected_ids.tolist()], dtype=np.int64)
    if not np.array_equal(vals, expected_vals):
        return f"val differs for id {int(ids[int(np.argmax(vals != expected_vals))])}"
    return None


def _deciles(latencies: list[float]) -> list[float]:
    n = len(latencies)
    chunks = [latencies[i * n // 10:(i + 1) * n // 10] for i in range(10)]
    return [statistics.median(c) * 1000 if c else float("nan") for c in chunks]


def _p(latencies: list[float], q: float) -> float:
    return float(np.percentile(np.array(latencies), q)) * 1000


def run_soak(rounds: int, shape: str, rows: int, out: Path, read_every: int, seed: int = 22,
             contenders: tuple[str, ...] = CONTENDERS, profile: bool = False, vacuum_every: int = 0,
             workers: bool = False) -> dict[str, Any]:
    """Run the soak job; write soak.json, soak.md and PNGs to ``out``; return the report.

    ``vacuum_every`` > 0 VACUUMs the delta-rs table (retention 0) every that many rounds, after the
    round's timer stopped; the bytes it deletes are added to its bytes written, so the figure
    still says what the engine wrote, while the disk holds only the live table.

    ``workers`` runs each contender in its own worker process (see the module docstring); a
    worker's failure is raised here as a RuntimeError naming the contender, where it failed and
    the worker's traceback. Workers are stopped and joined before this returns or raises.
    """
    from dvengine.log import load_snapshot

    rng = np.random.default_rng(seed)
    model = KeyModel(shape, rows, rng)
    load_before = os.getloadavg()
    work = tempfile.mkdtemp(prefix="dvengine-soak-")
    started_all = time.perf_counter()
    clock = GcClock()
    timed: dict[str, _Timed] = {}
    reference_data = _reference_data()
    reference: list[list[float]] = []
    every_reference = reference_every(rounds)
    try:
        if workers:
            # started before the base table exists: each imports the engines while the model is built
            for name in contenders:
                timed[name] = _Worker(name, os.path.join(work, name))
        base = model.base()
        # The model holds ~3M Python objects that are bookkeeping of this bench, not of any
        # contender; without this every full GC pass in a dvengine round walked them (a checkpoint
        # round's rows cost 3x, measured in a standalone check), inflating its tail latency.
        gc.freeze()
        runners: list[Contender] = []
        for name in contenders:
            c = _make_contender(name, os.path.join(work, name))
            if not workers:
                timed[name] = _InProcess(c, clock)
            timed[name].create(base)
            runners.append(c)
        base_bytes = {c.name: _folder_bytes(c.root) for c in runners}
        vacuumed = {c.name: 0 for c in runners}
        lat: dict[str, list[float]] = {c.name: [] for c in runners}
        layout: dict[str, list[tuple[int, int, int]]] = {c.name: [] for c in runners}
        reads: dict[str, list[tuple[int, float]]] = {c.name: [] for c in runners}
        events: dict[str, list[list[int]]] = {c.name: [] for c in runners}
        next_version = {c.name: _round_events(c.root, 0)[1] for c in runners}
        profiles: dict[str, str] = {}
        if not workers:
            gc.callbacks.append(clock)
        gc_rounds: dict[str, list[list[float]]] = {c.name: [] for c in runners}
        cpu: dict[str, list[float]] = {c.name: [] for c in runners}  # process CPU time per round
        settled: dict[str, float] = {c.name: 0.0 for c in runners}  # waits for background work
        synced: dict[str, float] = {c.name: 0.0 for c in runners}  # writeback between contenders
        first_versions: dict[str, list[int]] = {c.name: [] for c in runners}  # each round's first commit
        for c in runners:
            reads[c.name].append((0, timed[c.name].timed_read(0)))
            layout[c.name].append((0, *c.layout()))
        reference.append([0, _reference_ms(reference_data)])
        for r in range(1, rounds + 1):
            keys = model.upsert_keys()
            source = _rows(np.array(keys, dtype=np.int64), r, rng)
            doomed = model.delete_keys() if r % DELETE_EVERY == 0 else []
            for c in runners:
                profiled = profile and r == rounds and c.name.startswith("dvengine")
                figures = timed[c.name].round(r, source, doomed, profiled, settle=len(runners) > 1 or r == rounds,
                                              sync=len(runners) > 1)
                if figures.profile is not None:
                    profiles[c.name] = figures.profile
                lat[c.name].append(figures.wall_s)
                settled[c.name] += figures.settle_s
                synced[c.name] += figures.sync_s
                cpu[c.name].append(figures.cpu_s)
                gc_rounds[c.name].append([figures.gc[0] * 1000, figures.gc[1], figures.gc[2] * 1000])
                first_versions[c.name].append(next_version[c.name])
                happened, next_version[c.name] = _round_events(c.root, next_version[c.name])
                events[c.name].append(happened)
                if vacuum_every and isinstance(c, DeltaRsContender) and r % vacuum_every == 0 and r != rounds:
                    before = _folder_bytes(c.root)
                    timed[c.name].vacuum(r)
                    vacuumed[c.name] += before - _folder_bytes(c.root)
                    next_version[c.name] = _round_events(c.root, next_version[c.name])[1]  # its own commits
                if r % max(1, rounds // 200) == 0 or r == rounds:
                    layout[c.name].append((r, *c.layout()))
                if r % read_every == 0 or r == rounds:
                    reads[c.name].append((r, timed[c.name].timed_read(r)))
            model.apply_upsert(keys, r)
            model.apply_delete(doomed)
            if r % every_reference == 0:
                reference.append([r, _reference_ms(reference_data)])  # between rounds: in no contender's figures
            if r % 100 == 0:
                print(f"[soak {shape}] round {r}/{rounds}: " + ", ".join(
                    f"{n} {statistics.median(v[-100:]) * 1000:.0f} ms" for n, v in lat.items()), flush=True)
        expected_rows = pa.table({
            "id": pa.array(sorted(model.live), pa.int64()),
            "val": pa.array([model.live[k] for k in sorted(model.live)], pa.int64()),
        })
        results: dict[str, Any] = {}
        for c in runners:
            _mark_checkpoint_rounds(c.root, events[c.name], first_versions[c.name], next_version[c.name])
            final = c.read()  # here, in either mode: the check reads the table folder
            problems = [p for p in (_check(final, model), _check(c.read_other(), model)) if p is not None]
            fresh_rows = final.select(list(COLUMNS)).cast(base.schema).sort_by("id")  # delta-rs: string_view
            end_samples, fresh_samples = timed[c.name].end_reads(fresh_rows, os.path.join(work, f"fresh-{c.name}"))
            end_s, fresh_s = statistics.median(end_samples), statistics.median(fresh_samples)
            files, dvs = c.layout()
            fresh_files = len(load_snapshot(os.path.join(work, f"fresh-{c.name}")).files)
            ls = lat[c.name]
            results[c.name] = {
                "total_s": sum(ls) + settled[c.name],
                "background_wait_s": settled[c.name],
                "sync_after_rounds_s": synced[c.name],
                "p50_per_decile_ms": _deciles(ls),
                "p50_ms": _p(ls, 50),
                "p99_ms": _p(ls, 99),
                "max_ms": max(ls) * 1000,
                "files_end": files, "dv_files_end": dvs, "fresh_files": fresh_files,
                "read_end_s": end_s, "read_fresh_s": fresh_s,
                "read_end_samples_s": end_samples, "read_fresh_samples_s": fresh_samples,
                "bytes_written": _folder_bytes(c.root) - base_bytes[c.name] + vacuumed[c.name],
                "bytes_vacuumed": vacuumed[c.name],
                "layout": layout[c.name], "reads": reads[c.name],
                "latencies_ms": [x * 1000 for x in ls],
                "events": events[c.name],
                "gc_rounds": gc_rounds[c.name],
                "cpu_ms": [x * 1000 for x in cpu[c.name]],
                "tail": _tail([x * 1000 for x in ls], events[c.name], gc_rounds=gc_rounds[c.name],
                              cpu_ms=[x * 1000 for x in cpu[c.name]]),
                "correct": not problems, "problems": problems,
            }
        assert expected_rows.num_rows == len(model.live)
        pids = {name: t.pid for name, t in timed.items()}
    finally:
        for t in timed.values():
            t.close()
        if clock in gc.callbacks:
            gc.callbacks.remove(clock)
        shutil.rmtree(work, ignore_errors=True)
    if workers and any(pid == os.getpid() for pid in pids.values()):
        raise RuntimeError(f"soak workers ran in the parent process: {pids}")
    report: dict[str, Any] = {
        "rounds": rounds, "shape": shape, "rows": rows, "seed": seed, "read_every": read_every,
        "upsert_keys": UPSERT_KEYS, "delete_every": DELETE_EVERY, "delete_keys": DELETE_KEYS,
        "vacuum_every": vacuum_every, "workers": workers,
        "load_avg_before": load_before, "load_avg_after": os.getloadavg(),
        "wall_s": time.perf_counter() - started_all, "cpus": os.cpu_count(),
        "reference_ms": reference,
        "results": results,
    }
    if workers:
        report["worker_pids"] = {"parent": os.getpid(), **pids}
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    for name, text in profiles.items():
        (out / f"profile-{name}.txt").write_text(text)
    (out / "soak.md").write_text(render_markdown(report))
    plot_soak(report, out)
    print(render_markdown(report))
    return report


def run_from_args(
    rounds: int, shape: str, rows: int, out: str, profile: bool, contenders: list[str] | None = None,
    vacuum_every: int = 0, workers: bool = False,
) -> int:
    shapes = ["uniform", "growing"] if shape == "both" else [shape]
    chosen = tuple(c for c in CONTENDERS if contenders is None or c in contenders)
    failed = False
    for s in shapes:
        report = run_soak(rounds, s, rows, Path(out) / f"{s}-{rounds}", read_every=max(1, rounds // 20),
                          contenders=chosen, profile=profile, vacuum_every=vacuum_every, workers=workers)
        failed |= not all(r["correct"] for r in report["results"].values())
    return 1 if failed else 0


__all__ = ["run_from_args", "run_soak"]
