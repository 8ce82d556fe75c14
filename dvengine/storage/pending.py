"""PUTs of new files sent in the background while the command builds the commit that names them.

An UPDATE on an object store sends two requests in turn: the new data file, then the commit that
names it. The commit must never be sent before the data file exists (a reader, or a crash right
after the commit, would find a missing file), but what the command does between the two (the
file's stats, the add action, the DV descriptor, the metrics, the serialized commit) needs only
the file's bytes, not the store's answer. So the data file's PUT starts as soon as its bytes
exist, on a worker thread (obstore releases the GIL while the request is under way), and:

- the transaction waits, just before its commit PUT, for the PUT of every file its actions name
  (:func:`wait_for`); a failed PUT raises there, with the typed error the synchronous PUT raised
  (``StorageError`` and its subclasses, naming the URI), so nothing is committed and the
  command's clean-up deletes what it wrote;
- a delete of a file whose PUT is in flight waits for that PUT first (:func:`settle`), so a
  failed command's clean-up can never be overtaken by its own PUT landing after the delete;
- a read of such a file waits too (a command reading back its own new file reads what landed).

Measured (spec_notes/storage.md, "Where a point DML's time goes on a store"): on the local S3
server a point UPDATE does ~0.5-0.7 ms of work between its data PUT and its commit PUT; the start
handshake (see :func:`start`) gives 0.24-0.45 ms of it back, so the median gains ~0.2 ms. A
command writing several files gets up to ``MAX_IN_FLIGHT`` of them under way at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

_LOG = logging.getLogger(__name__)

# PUTs this process has under way at once: a command writing more files (a partitioned rewrite)
# waits for a free worker before starting the next PUT, which also bounds the bytes held.
MAX_IN_FLIGHT = 4

_lock = threading.Lock()
_in_flight: dict[str, Future[None]] = {}
_pool: list[ThreadPoolExecutor] = []
# Seconds callers spent blocked in wait_for (the part of background PUTs their work did not hide).
_waited = [0.0]


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's worker threads, and its parent's PUTs are not its own."""
    global _lock
    _lock = threading.Lock()
    _in_flight.clear()
    _pool.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _executor() -> ThreadPoolExecutor:
    with _lock:
        if not _pool:
            _pool.append(ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="dvengine-put"))
        return _pool[0]


def start(path: str, send: Callable[[], None]) -> None:
    """Run ``send`` (the PUT of ``path``) on a worker; returns once the worker is sending it.

    The caller then keeps the GIL for CPU work while the request is under way; waiting for the
    worker to start first matters: a worker that has not yet entered the request would otherwise
    need the GIL from a busy thread, and Python hands it over only every switch interval (5 ms),
    longer than the PUT itself.
    """
    started = threading.Event()

    def run() -> None:
        started.set()
        send()

    try:
        future = _executor().submit(run)
    except RuntimeError:  # the interpreter is shutting down: no new threads, send it here
        send()
        return
    with _lock:
        _in_flight[path] = future
    future.add_done_callback(lambda f: _forget_if_succeeded(path, f))
    started.wait()


def _forget_if_succeeded(path: str, future: Future[None]) -> None:
    """A PUT that succeeded needs no waiting any more; a failed one stays until someone waits
    for it (the commit raises its error, or the clean-up's delete settles it)."""
    if future.exception() is None:
        with _lock:
            if _in_flight.get(path) is future:
                del _in_flight[path]


def _take(path: str) -> Future[None] | None:
    with _lock:
        return _in_flight.pop(path, None)


def wait_for(paths: Iterable[str]) -> None:
    """Block until the PUTs of ``paths`` that are in flight are done; raise the first failure
    (the typed error the PUT raised) once all of them are done. Paths never sent in the
    background, or already done and successful, cost a dict lookup."""
    if not _in_flight:
        return
    futures = [f for f in (_take(p) for p in paths) if f is not None]
    failure: BaseException | None = None
    started = time.perf_counter()
    for future in futures:
        exc = future.exception()
        if exc is not None and failure is None:
            failure = exc
    if futures:
        with _lock:
            _waited[0] += time.perf_counter() - started
    if failure is not None:
        raise failure


def waited_seconds() -> float:
    """Seconds callers of :func:`wait_for` have been blocked so far in this process (the bench
    reports how much of a command's time its requests took from this and the clients' counters)."""
    with _lock:
        return _waited[0]


def settle(path: str) -> None:
    """Wait for the PUT of ``path`` if one is in flight, whatever its outcome: the caller is about
    to delete the object (a failed command's clean-up), which must come after the PUT. A failed
    PUT is not this caller's error (its command is failing for another reason, or already raised
    this one from :func:`wait_for`); it is logged."""
    if not _in_flight:
        return
    future = _take(path)
    if future is None:
        return
    exc = future.exception()
    if exc is not None:
        _LOG.info("background PUT of %s had failed before its clean-up deleted it: %s", path, exc)


def busy() -> bool:
    """Whether any PUT may still need waiting for (a cheap test before collecting paths)."""
    return bool(_in_flight)


def in_flight() -> int:
    """PUTs started and not yet awaited (done successful ones drop out): tests check none is left."""
    with _lock:
        return sum(1 for f in _in_flight.values() if not f.done() or f.exception() is not None)
