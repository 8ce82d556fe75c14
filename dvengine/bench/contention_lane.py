"""One writer process of the contention bench, whatever engine it drives: its arguments, the retry
of conflicts that reach it, and the timing protocol the orchestrator reads back.

Every engine's writer (dvengine's in ``contention``, delta-rs's in ``contention_delta_rs``) goes
through this module so that they are measured alike: the same operations, the same warm-up
before the start signal, the same DML window (start signal -> its last DML, stamped on the
system-wide monotonic clock), the same CPU accounting and the same bound on re-plans. Only "do
one operation" and "what counts as a conflict" differ between engines.

Files a writer leaves next to ``out_file`` for the orchestrator: ``.ready`` (warmed, waiting for the
start), ``.cpu`` (CPU seconds over the window), ``.requests`` (dvengine's object-store requests in
the window, by kind), ``.end`` (when its last DML finished) and ``out_file`` itself (one record
per operation).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dvengine.bench.contention_workload import operations, warm_count
from dvengine.storage.registry import request_counts

PROFILE_ENV = "DVENGINE_CONTENTION_PROFILE"  # a folder: each writer dumps its cProfile stats there
MAX_RETRIES = 200  # re-plans per operation before a writer gives up (reported, never hit when resolved)

# One attempt at an operation: its outcome ({"version", "attempts", "rebased", ...}) or a raise
Attempt = Callable[[], dict[str, Any]]
# One operation on row x (DELETE when the flag is set), retried until it commits: its record
RunOp = Callable[[int, bool], dict[str, Any]]


@dataclass(frozen=True)
class LaneArgs:
    """What one writer process runs: writer ``writer`` of ``writers`` (None: all of them, one after
    the other, the same-total baseline) on the table at ``root``, and where it reports."""

    root: str
    writer: int | None
    writers: int
    ops: int
    start_file: str
    out_file: str
    warm_ops: int = 0
    rows: int = 0
    file_per_writer: bool = False

    def argv(self) -> list[str]:
        return [self.root, "all" if self.writer is None else str(self.writer), str(self.writers), str(self.ops),
                self.start_file, self.out_file, str(self.warm_ops), str(self.rows), "1" if self.file_per_writer else "0"]

    @classmethod
    def parse(cls, argv: list[str]) -> LaneArgs:
        root, w, writers, ops, start_file, out_file, warm_ops, rows, per_writer = argv[:9]
        return cls(root, None if w == "all" else int(w), int(writers), int(ops), start_file, out_file,
                   int(warm_ops), int(rows), per_writer == "1")


def worker_command(module: str, lane: LaneArgs) -> list[str]:
    """The command line that runs ``lane`` in a process of its own through ``module``'s main."""
    return [sys.executable, "-m", module, "--worker", *lane.argv()]


def is_worker_call(argv: list[str]) -> bool:
    return argv[:1] == ["--worker"]


def worker_main(argv: list[str], run_writer: Callable[[LaneArgs, Any], None]) -> int:
    """A writer process's entry (``argv``: ``--worker`` and ``LaneArgs.argv()``): run the lane,
    under cProfile (CPU time, not wall: writers share the cores) when ``PROFILE_ENV`` names a folder."""
    lane = LaneArgs.parse(argv[1:])
    profile_dir = os.environ.get(PROFILE_ENV)
    if not profile_dir:
        run_writer(lane, None)
        return 0
    import cProfile

    profiler = cProfile.Profile(time.process_time)
    run_writer(lane, profiler)
    who = "all" if lane.writer is None else lane.writer
    profiler.dump_stats(os.path.join(profile_dir, f"writer-{who}-of-{lane.writers}.prof"))
    return 0


def run_until_committed(x: int, attempt: Attempt, conflict: type[Exception]) -> dict[str, Any]:
    """Operation on row ``x``, re-planned after every ``conflict`` that reaches the caller (as an
    application would): ``attempt`` plans from a fresh snapshot each time. Its record: the
    attempt's outcome, conflicts surfaced and a sample of their messages; ``version`` None when it
    gave up after ``MAX_RETRIES``."""
    surfaced = 0
    kinds: list[str] = []
    while True:
        try:
            outcome = attempt()
        except conflict as exc:
            surfaced += 1
            kinds.append(f"{type(exc).__name__}: {exc}")
            if surfaced >= MAX_RETRIES:
                return {"row": x, "version": None, "surfaced": surfaced, "error": repr(exc)}
            continue
        return {"row": x, **outcome, "surfaced": surfaced, "conflicts": kinds}


def run_lane(lane: LaneArgs, run_op: RunOp, profiler: Any = None) -> None:
    """Run ``lane``'s operations with ``run_op`` and write what happened. The first ``warm_ops``
    of every lane run before the start signal and are not timed (committed and verified like the
    others), so each process starts the window with its caches as a long-running writer has them.
    A ``profiler`` (``cProfile.Profile``) is enabled for the DML window only."""
    todo = operations(lane.writer, lane.writers, lane.ops, lane.rows, lane.file_per_writer)
    warm = warm_count(lane.writer, lane.writers, lane.warm_ops)
    records: list[dict[str, Any]] = [{**run_op(x, delete), "warm": True} for x, delete in todo[:warm]]
    Path(f"{lane.out_file}.ready").touch()
    while not os.path.exists(lane.start_file):
        time.sleep(0.001)
    cpu_start = time.process_time()
    requests_before = request_counts()
    if profiler is not None:
        profiler.enable()
    records.extend(run_op(x, delete) for x, delete in todo[warm:])
    # CLOCK_MONOTONIC is system-wide on Linux, so this instant is comparable with the parent's
    # time.monotonic() of the start signal (both processes read the same clock).
    dml_end = time.monotonic()
    if profiler is not None:
        profiler.disable()
    Path(f"{lane.out_file}.cpu").write_text(str(time.process_time() - cpu_start))
    requests = {k: n - requests_before.get(k, 0) for k, n in request_counts().items() if n != requests_before.get(k, 0)}
    Path(f"{lane.out_file}.requests").write_text(json.dumps(requests))
    Path(f"{lane.out_file}.end").write_text(repr(dml_end))
    Path(lane.out_file).write_text(json.dumps(records))
