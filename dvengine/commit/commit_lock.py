"""A host-local turnstile for the commit attempts of writers on one local table.

Correctness never depends on it: the commit file is still created with put-if-absent
(``os.link``), so a writer that runs without the lock (another host, Delta Spark, a lock that
timed out) can only lose races, never corrupt the log. What the lock removes is *wasted work*.
Without it, every writer that planned against version ``v`` writes, fsyncs and links its own
``v+1.json``; one link wins and the others have paid an fsync (~2 ms here, 15 ms when the disk
is busy) for nothing, then race for ``v+2`` the same way. Measured with 8 processes doing
single-row DML on one file (benchmarks/results/contention): about half of all lost races were
lost *after* the loser's fsync. With the lock, dvengine writers on one host take turns at the
commit step only: a writer catches up with the log, rebases and stages (writes and fsyncs) its
commit *before* asking for the turn, and holds it to link, or, if a winner landed while it
waited, to read that winner, rebase, re-stage and link (transaction.py, ``_commit_in_turn``);
a writer that finds the turn taken (:meth:`CommitTurn.taken`) skips the early stage, which the
holder's commit would make stale, and stages once inside its turn;
planning and scanning stay parallel. Delta's own ``LocalLogStore`` likewise serializes its local commits (with a
JVM lock, there for atomicity of its rename).

The lock is ``flock`` on a file in the temp folder named after the ``_delta_log`` folder's
device and inode, so every path spelling (symlinks, bind mounts) of one table shares it and
nothing is added to the table. A waiter blocks in ``flock`` (woken by the kernel when the
holder releases; the blocking call runs on the process's one waiter thread, so a wait costs no
thread start), and waiting is bounded: after ``timeout_s`` the writer goes ahead
unlocked (a holder stopped in a debugger must not stall other writers), and a lock that cannot
be taken at all (no ``flock``, an unwritable temp folder) is simply skipped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, commits run unlocked
    fcntl = None  # type: ignore[assignment]

_LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0


def lock_path(log_folder: str) -> str | None:
    """The lock file for a table's ``_delta_log`` folder, or None when the folder does not exist
    yet (a table being created: there is nobody to take turns with)."""
    try:
        st = os.stat(log_folder)
    except OSError:
        return None
    return os.path.join(tempfile.gettempdir(), "dvengine-commit-locks", f"{st.st_dev}-{st.st_ino}.lock")


class CommitTurn:
    """One writer's use of a table's commit turn for one commit: a probe, then one hold.

    Both go through one descriptor of the lock file (one ``open`` per commit instead of one per
    probe and one per hold: a contended commit probes, then waits). flock belongs to the open
    file, so the probe takes the lock without blocking and releases it with ``LOCK_UN``; the hold
    takes it again on the same descriptor and closing the descriptor at its end releases it.
    Single use: :meth:`held` closes the descriptor, also after a wait that timed out (a waiter
    still blocked on a duplicate of it must not find the lock still ours later).
    """

    def __init__(self, log_folder: str) -> None:
        path = None if fcntl is None else lock_path(log_folder)
        self._path = path
        self._fd = _open(path) if path is not None else None

    def taken(self) -> bool:
        """Is another writer holding the table's commit turn right now? (A hint, racy by nature.)

        A writer holding it is about to link the next version, so a commit staged for that version
        now would be stale before this writer's turn: it would pay an fsync for nothing and then
        re-stage inside its turn anyway (transaction.py stages only when the turn is free).
        """
        if self._fd is None:
            return False
        assert fcntl is not None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # free: leave it free (staging happens before the turn)
        except OSError:
            self.close()  # cannot tell it is released: closing the descriptor does release it
            self._fd = _open(self._path) if self._path is not None else None
        return False

    @contextlib.contextmanager
    def held(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[bool]:
        """Hold the turn while the block runs; yields whether the lock is held."""
        fd = self._fd
        if fd is None:
            yield False
            return
        try:
            held = _acquire(fd, timeout_s)
            if not held:
                _LOG.debug("commit lock %s not acquired within %.1f s; committing without it", self._path, timeout_s)
            yield held
        finally:
            self.close()  # closing releases the flock

    def close(self) -> None:
        """Close the descriptor (releasing the turn if it is held); idempotent, so both the
        hold's end and the caller's ``finally`` may call it."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


@contextlib.contextmanager
def commit_turn(log_folder: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[bool]:
    """Hold the table's commit turn while the block runs; yields whether the lock is held."""
    turn = CommitTurn(log_folder)
    try:
        with turn.held(timeout_s) as held:
            yield held
    finally:
        turn.close()


def turn_taken(log_folder: str) -> bool:
    """Is another writer holding the table's commit turn right now? (:meth:`CommitTurn.taken`)"""
    turn = CommitTurn(log_folder)
    try:
        return turn.taken()
    finally:
        turn.close()


# Lock folders this process has created (or found): ``os.makedirs`` costs a failed ``mkdir`` and
# its exception on every call, and a contended commit opened the lock file twice per commit. A
# folder removed since (a temp cleaner) is noticed by ``open`` failing, and created again.
_FOLDERS_MADE: set[str] = set()


def _open(path: str) -> int | None:
    """A descriptor of the lock file ``path`` (created if missing), or None when it cannot be
    opened: the commit then runs unlocked, which costs only wasted work, never correctness."""
    folder = os.path.dirname(path)
    try:
        if folder not in _FOLDERS_MADE:
            os.makedirs(folder, exist_ok=True)
            _FOLDERS_MADE.add(folder)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except FileNotFoundError:
        _FOLDERS_MADE.discard(folder)  # removed since (a temp cleaner): make it again, once
        try:
            os.makedirs(folder, exist_ok=True)
            _FOLDERS_MADE.add(folder)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return None
    except OSError:
        return None


def _acquire(fd: int, timeout_s: float) -> bool:
    """Take the lock at once if it is free; else wait in a blocking ``flock`` so the kernel wakes
    this writer the moment the holder releases it. A turn lasts about one link (or one fsync when
    a winner landed meanwhile), so polling with sleeps left the turn idle for up to a sleep after
    every release (measured: 0.7 ms per commit at 4 writers, the cores idle meanwhile). The
    blocking call runs on a helper thread (:class:`_Waiter`) on a duplicate of ``fd`` (same open
    file, so the lock it takes is ours) and this thread waits at most ``timeout_s`` for it: a
    stuck holder must not stall other writers."""
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    except OSError:
        return False  # the file system refuses locks (some network mounts): go ahead unlocked
    return _wait_for_lock(fd, timeout_s)


def _block_in_flock(waiter_fd: int, taken: threading.Event, done: Callable[[], None] | None = None) -> None:
    """Take the lock on ``waiter_fd``, then signal ``taken``. Both ``done`` (the waiter thread is
    free again before its caller wakes) and closing ``waiter_fd`` come first: flock belongs to the
    open file, which the waiting caller's descriptor keeps open, so the lock stays held and the
    caller's own close releases it. Closed after the signal, this duplicate could keep the lock a
    moment past the caller's release, and the next writer would find the turn still taken."""
    assert fcntl is not None
    try:
        try:
            fcntl.flock(waiter_fd, fcntl.LOCK_EX)
        except OSError:
            return  # refused: the caller times out and commits unlocked
        finally:
            if done is not None:
                done()
    finally:
        os.close(waiter_fd)  # a caller that timed out closed its fd already: this releases the lock
    taken.set()


class _Waiter:
    """The process's thread that blocks in ``flock`` for waiting writers, one wait at a time.

    Starting a thread per wait cost a thread's creation, start handshake and teardown for every
    contended commit (~1 per commit at 8 writers). A wait that finds this thread still busy (a
    caller that timed out leaves it blocked until the holder releases; threads of one process
    waiting at once) gets a thread of its own, as before. A forked child starts its own.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.busy = False
        self.jobs: queue.SimpleQueue[tuple[int, threading.Event]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="dvengine-commit-turn", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        """Serve waits forever (a daemon thread: it never keeps the interpreter alive)."""
        while True:
            waiter_fd, taken = self.jobs.get()
            _block_in_flock(waiter_fd, taken, self._free)

    def _free(self) -> None:
        """Mark the thread free once its ``flock`` returned, before the waiting caller wakes, so
        that caller's next wait finds it free instead of starting a thread of its own."""
        with _WAITER_LOCK:
            self.busy = False


_WAITER_LOCK = threading.Lock()
_WAITER: _Waiter | None = None


def _after_fork_in_child() -> None:
    """A forked child has no waiter thread, and a lock another thread held at the fork stays held."""
    global _WAITER_LOCK, _WAITER
    _WAITER_LOCK = threading.Lock()
    _WAITER = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _hand_to_waiter(waiter_fd: int, taken: threading.Event) -> bool:
    """Give the wait to the process's waiter thread; False when it is busy (the caller starts one)."""
    global _WAITER
    with _WAITER_LOCK:
        waiter = _WAITER
        if waiter is None or waiter.pid != os.getpid() or not waiter.thread.is_alive():
            try:
                waiter = _WAITER = _Waiter()
            except RuntimeError:  # no new threads (interpreter shutting down)
                return False
        if waiter.busy:
            return False
        waiter.busy = True
        waiter.jobs.put((waiter_fd, taken))
        return True


def _wait_for_lock(fd: int, timeout_s: float) -> bool:
    """Wait at most ``timeout_s`` for the lock on ``fd``, blocking in ``flock`` on a helper thread
    (the process's waiter, else a one-off thread), so this thread can give up on a stuck holder."""
    waiter_fd = os.dup(fd)  # closed by the waiter only: its flock can never hit a reused fd number
    taken = threading.Event()
    if not _hand_to_waiter(waiter_fd, taken):
        threading.Thread(target=_block_in_flock, args=(waiter_fd, taken), name="dvengine-commit-turn", daemon=True).start()
    # Timed out: the caller closes its fd; if the waiter takes the lock later, closing its
    # duplicate (the last reference to the open file) releases it again at once.
    return taken.wait(timeout_s)
