"""Checkpoints written by a background thread, off the committing thread's path.

Why: a checkpoint is an optimisation for the next reader; the commit it follows is durable and
complete without it. Written in the committing thread (as Delta Spark's post-commit hook and
delta-rs do) it lands on every tenth command of a stream: in the 10,000-round soak a checkpoint
round took 32 ms p50 against 15 ms for a plain round (about 40,000 unexpired tombstones encoded
and written each time), and 47 of the 100 slowest rounds were checkpoint rounds, which set the
p99 (spec_notes/log-replay-and-checkpoints.md, "Checkpoints off the commit path", has the
numbers before and after). Most of that time is Parquet encoding, which Arrow runs without
Python's GIL, so on a second core it overlaps the next command almost entirely.

How:

- the committing thread decides whether its version is due and takes what writing needs
  (:func:`dvengine.log.checkpoint_writer.due_checkpoint`: the immutable snapshot of that version
  and its tombstones, one cache lookup after a process's first checkpoint), then hands it here;
- one worker thread per process writes the checkpoint, ``_last_checkpoint`` and cleans expired
  logs; it is started when work arrives and ends when none is left. It is not a daemon thread:
  the interpreter waits for it at exit, so a short job still leaves its checkpoints;
- they are written in the order they became due, each one (a stream's checkpoint takes ~20 ms
  and one is due every ten commits, so the worker keeps up); should it fall behind by more than
  ``MAX_WAITING`` checkpoints of one table, the oldest waiting one is dropped (any checkpoint is
  valid and readers want the newest; this bounds the snapshots held in memory);
- a failure is logged as a warning and never reaches the command, as in the synchronous hook
  before it (and Delta's): the commit it follows already succeeded;
- :func:`wait_for_checkpoints` blocks until every handed-over checkpoint is written (tests,
  and jobs that copy the table's folder right after writing);
- after ``fork`` the child starts with nothing pending (the parent writes its own);
- ``DVENGINE_CHECKPOINT_BACKGROUND=false`` writes them in the committing thread, as before.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque

from dvengine.log.checkpoint_writer import DueCheckpoint, write_due_checkpoint

__all__ = ["ENV_SWITCH", "MAX_WAITING", "background_enabled", "hand_over", "wait_for_checkpoints"]

ENV_SWITCH = "DVENGINE_CHECKPOINT_BACKGROUND"

_LOG = logging.getLogger(__name__)


def background_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "true").strip().lower() not in ("false", "0", "no", "off")


# Checkpoints of one table waiting at once; more and the oldest waiting one is dropped (a worker this
# far behind is rare: a backlog of even a few would need each checkpoint to take many commits long).
MAX_WAITING = 16


class _Queue:
    """Checkpoints waiting, in the order they became due, and the one worker writing them."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.waiting: deque[DueCheckpoint] = deque()
        self.worker: threading.Thread | None = None


_QUEUE = _Queue()


def _reset_after_fork() -> None:
    global _QUEUE
    _QUEUE = _Queue()  # the parent's worker does not exist here; its checkpoints are the parent's


os.register_at_fork(after_in_child=_reset_after_fork)


def hand_over(due: DueCheckpoint) -> None:
    """Write ``due`` on the background worker (or now, when that is switched off or cannot start)."""
    if background_enabled() and _enqueue(due):
        return
    write_due_checkpoint(due)


def _enqueue(due: DueCheckpoint) -> bool:
    """Queue ``due`` for the worker, starting it if none runs; False if no thread could start."""
    queue = _QUEUE
    with queue.condition:
        same_table = [w for w in queue.waiting if w.table_root == due.table_root]
        if len(same_table) >= MAX_WAITING:
            queue.waiting.remove(same_table[0])
        queue.waiting.append(due)
        if queue.worker is not None:
            return True
        worker = threading.Thread(target=_work, args=(queue,), name="dvengine-checkpoints", daemon=False)
        try:
            worker.start()
        except RuntimeError:  # the interpreter is shutting down: no new threads
            queue.waiting.remove(due)
            return False
        queue.worker = worker
        return True


def _work(queue: _Queue) -> None:
    while True:
        with queue.condition:
            if not queue.waiting:
                queue.worker = None
                queue.condition.notify_all()
                return
            due = queue.waiting.popleft()
        try:
            write_due_checkpoint(due)
        except Exception:
            _LOG.warning("commit %d of %s succeeded but writing its checkpoint failed", due.version, due.table_root,
                         exc_info=True)


def wait_for_checkpoints(timeout: float | None = None) -> bool:
    """Block until every checkpoint handed to the background worker is written (or failed and was
    logged); False if ``timeout`` seconds passed first."""
    queue = _QUEUE
    with queue.condition:
        return queue.condition.wait_for(lambda: queue.worker is None and not queue.waiting, timeout)
