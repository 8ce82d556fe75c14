"""The cost controls of a lost commit race: the host-local commit turn, the backoff, and the
inline DV of a rebase (spec_notes/isolation-and-concurrency.md, "Cost of a lost race")."""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.api import dml
from dvengine.commit import commit_lock
from dvengine.commit import transaction as txn_module
from dvengine.commit.commit_lock import CommitTurn, commit_turn, lock_path, turn_taken
from dvengine.commit.transaction import backoff_seconds
from dvengine.dv import absolute_dv_path, load_deletion_vector
from dvengine.errors import ConcurrentDeleteReadError
from dvengine.log import load_snapshot
from dvengine.log.commit_file import parse_actions
from dvengine.log.snapshot import Snapshot
from dvengine.log.snapshot_cache import clear_snapshot_cache
from dvengine.protocol.actions import AddFile
from dvengine.storage.local import LocalStorage


def test_one_turn_at_a_time_per_log_folder(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    with commit_turn(str(log)) as first:
        assert first
        # flock is per open file: a second opener (another writer) waits, then gives up unlocked
        started = time.monotonic()
        with commit_turn(str(log), timeout_s=0.05) as second:
            assert not second
        assert time.monotonic() - started >= 0.05
    with commit_turn(str(log), timeout_s=0.05) as again:
        assert again  # released when the first block ended


def test_a_waiting_writer_gets_the_turn_when_it_is_released(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    order: list[str] = []
    holding = threading.Event()

    def holder() -> None:
        with commit_turn(str(log)):
            holding.set()
            time.sleep(0.05)
            order.append("holder done")

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait()
    with commit_turn(str(log), timeout_s=5.0) as held:
        order.append("waiter in")
        assert held
    thread.join()
    assert order == ["holder done", "waiter in"]


def test_every_spelling_of_a_table_shares_one_lock_and_a_new_table_has_none(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    os.symlink(tmp_path / "t", tmp_path / "alias")
    assert lock_path(str(log)) == lock_path(str(tmp_path / "alias" / "_delta_log"))
    assert lock_path(str(tmp_path / "missing" / "_delta_log")) is None


def test_backoff_is_short_jittered_and_starts_after_the_first_retry() -> None:
    assert backoff_seconds(1) == 0.0
    draws = [backoff_seconds(n) for n in range(2, 40) for _ in range(20)]
    assert max(draws) <= txn_module._BACKOFF_CAP_S
    assert min(draws) >= 0.0
    late = [backoff_seconds(30) for _ in range(400)]
    # full jitter: spread over [0, cap], so losers of one version do not retry in lock step
    assert 0.3 * txn_module._BACKOFF_CAP_S < statistics.median(late) < 0.7 * txn_module._BACKOFF_CAP_S


def _stale_table(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = pa.array(range(5000), pa.int64())
    dvengine.write(pa.table({"id": ids, "v": ids}), str(path), mode="error",
                   configuration={"delta.enableDeletionVectors": "true"})
    stale = load_snapshot(str(path))
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    monkeypatch.setattr(dml, "load_snapshot", lambda root: stale)
    # the winner's DV (ids 0, 2, ..., 398) serializes to more than the 128-byte inline limit
    DeltaTable.forPath(None, path).delete("id < 400 AND id % 2 = 0", mode="dv")


def _dv_storage(path: Path) -> str:
    (add,) = load_snapshot(str(path)).files
    assert add.deletion_vector is not None
    return add.deletion_vector.storage_type


def test_a_rebased_dv_goes_inline_up_to_the_rebase_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _stale_table(path, monkeypatch)
    assert _dv_storage(path) == "u"  # the winner planned normally: a DV file
    metrics = DeltaTable.forPath(None, path).delete("id = 4001", mode="dv")
    assert metrics["numRebasedFiles"] == 1
    assert _dv_storage(path) == "i"  # the loser's union: inline, no DV file in the race window
    want = sort_rows([(i, i) for i in range(5000) if not (i < 400 and i % 2 == 0) and i != 4001])
    assert rows_arrow(path, ["id", "v"]) == want
    assert rows_delta_rs(path, ["id", "v"]) == want
    assert rows_duckdb(path, ["id", "v"]) == want


def test_rebase_inline_limit_zero_keeps_dv_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _stale_table(path, monkeypatch)
    monkeypatch.setenv("DVENGINE_DV_REBASEINLINEMAXBYTES", "0")
    assert DeltaTable.forPath(None, path).delete("id = 4001", mode="dv")["numRebasedFiles"] == 1
    assert _dv_storage(path) == "u"
    assert DeltaTable.forPath(None, path).toArrow().num_rows == 5000 - 201


def test_turn_taken_sees_another_holder_and_leaves_the_turn_free(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    assert not turn_taken(str(log))
    with commit_turn(str(log)) as held:
        assert held and turn_taken(str(log))  # flock is per open file: the probe is another opener
    assert not turn_taken(str(log))
    with commit_turn(str(log), timeout_s=0.05) as again:
        assert again  # the probe released what it took
    assert not turn_taken(str(tmp_path / "missing" / "_delta_log"))


def test_a_writer_finding_the_turn_taken_stages_only_inside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The turn's holder links the next version, so a commit staged before the turn would be
    stale: the writer waits, reads the winner, rebases, and stages once, inside its turn."""
    path = tmp_path / "t"
    ids = pa.array(range(5000), pa.int64())
    dvengine.write(pa.table({"id": ids, "v": ids}), str(path), mode="error",
                   configuration={"delta.enableDeletionVectors": "true"})
    stale = load_snapshot(str(path))
    DeltaTable.forPath(None, path).delete("id = 10", mode="dv")  # the winner, taken out again below
    winner = (path / "_delta_log" / "00000000000000000001.json").read_bytes()
    (path / "_delta_log" / "00000000000000000001.json").unlink()
    clear_snapshot_cache()
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)
    monkeypatch.setattr(dml, "load_snapshot", lambda root: stale)
    staged_at: list[float] = []
    real_stage = LocalStorage.stage_commit

    def stage(self: LocalStorage, target: str, data: bytes) -> str:
        staged_at.append(time.monotonic())
        return real_stage(self, target, data)

    monkeypatch.setattr(LocalStorage, "stage_commit", stage)
    log = str(path / "_delta_log")
    holding, released = threading.Event(), []

    def holder() -> None:
        with commit_turn(log):
            holding.set()
            time.sleep(0.3)  # the DML below plans, finds the turn taken and waits
            (path / "_delta_log" / "00000000000000000001.json").write_bytes(winner)
            released.append(time.monotonic())

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait()
    metrics = DeltaTable.forPath(None, path).delete("id = 4001", mode="dv")
    thread.join()
    assert metrics["version"] == 2
    assert metrics["numCommitAttempts"] == 2 and metrics["numRebasedFiles"] == 1
    assert len(staged_at) == 1 and staged_at[0] > released[0]  # no stale commit staged (and fsynced) first
    want = sort_rows([(i, i) for i in range(5000) if i not in (10, 4001)])
    assert rows_arrow(path, ["id", "v"]) == want
    assert rows_delta_rs(path, ["id", "v"]) == want


def test_the_probe_and_the_turn_share_one_descriptor(tmp_path: Path) -> None:
    """A free probe leaves the turn free (another writer can take it at once); the same object
    then holds the turn, and closing it releases the turn."""
    log = tmp_path / "_delta_log"
    log.mkdir()
    turn = CommitTurn(str(log))
    assert not turn.taken()
    assert not turn.taken()  # released after each probe, so a second probe is free too
    with commit_turn(str(log), timeout_s=0.05) as other:
        assert other  # the probe did not keep the lock
        assert turn.taken()
    with turn.held(timeout_s=0.05) as held:
        assert held and turn_taken(str(log))
    assert not turn_taken(str(log))
    turn.close()  # idempotent after the hold closed it


def _count_lock_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Lock-file opens made by this (the test's) thread from now on."""
    opened: list[str] = []
    real_open = commit_lock._open
    me = threading.get_ident()

    def counting(path: str) -> int | None:
        if threading.get_ident() == me:
            opened.append(path)
        return real_open(path)

    monkeypatch.setattr(commit_lock, "_open", counting)
    return opened


def test_a_commit_with_a_free_turn_opens_the_lock_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe and the turn of one commit go through one descriptor (they were two opens)."""
    path = tmp_path / "t"
    ids = pa.array(range(100), pa.int64())
    dvengine.write(pa.table({"id": ids}), str(path), mode="error", configuration={"delta.enableDeletionVectors": "true"})
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # not blind: it probes
    opened = _count_lock_opens(monkeypatch)
    assert DeltaTable.forPath(None, path).delete("id = 7", mode="dv")["version"] == 1
    assert len(opened) == 1
    assert DeltaTable.forPath(None, path).toArrow().num_rows == 99


def test_the_lock_folder_is_made_once_per_process_and_again_when_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``os.makedirs`` ran on every open (a failed ``mkdir`` and its exception each time); now once
    per process, and again after a temp cleaner removed the folder. A private temp folder: the
    shared one may be in use by other processes."""
    import shutil
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(commit_lock, "_FOLDERS_MADE", set())
    made: list[str] = []
    real_makedirs = os.makedirs

    def makedirs(name: str, *args: Any, **kwargs: Any) -> None:
        made.append(os.fspath(name))
        real_makedirs(name, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", makedirs)
    log = tmp_path / "_delta_log"
    log.mkdir()
    lock = lock_path(str(log))
    assert lock is not None and lock.startswith(str(tmp_path / "tmp"))
    folder = os.path.dirname(lock)
    for _ in range(3):
        assert not turn_taken(str(log))
        with commit_turn(str(log), timeout_s=0.05) as held:
            assert held
    assert made.count(folder) == 1
    shutil.rmtree(folder)
    assert not turn_taken(str(log))
    with commit_turn(str(log), timeout_s=0.05) as held:
        assert held and os.path.isfile(lock)
    assert made.count(folder) == 2


def _hold_for(log: str, seconds: float, holding: threading.Event) -> threading.Thread:
    def holder() -> None:
        with commit_turn(log):
            holding.set()
            time.sleep(seconds)

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait()
    return thread


def _waiter_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "dvengine-commit-turn"]


def _until(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def _no_leftover_waits() -> bool:
    """No wait of an earlier test still blocked (it ends once its holder let go)."""
    waiter = commit_lock._WAITER
    return (waiter is None or not waiter.busy) and all(
        waiter is not None and t is waiter.thread for t in _waiter_threads()
    )


def _record_waits(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each blocking wait of this (the test's) thread from now on: whether the process's
    waiter thread took it (else a thread of its own did)."""
    ran_on_waiter: list[bool] = []
    real_hand = commit_lock._hand_to_waiter
    me = threading.get_ident()

    def hand(waiter_fd: int, taken: threading.Event) -> bool:
        handed = real_hand(waiter_fd, taken)
        if threading.get_ident() == me:
            ran_on_waiter.append(handed)
        return handed

    monkeypatch.setattr(commit_lock, "_hand_to_waiter", hand)
    return ran_on_waiter


def test_waits_for_a_taken_turn_share_one_waiter_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wait used to start (and end) a thread; the process keeps one waiter thread instead."""
    log = str(tmp_path / "_delta_log")
    os.mkdir(log)
    assert _until(_no_leftover_waits)
    ran_on_waiter = _record_waits(monkeypatch)
    for _ in range(4):
        holder = _hold_for(log, 0.03, threading.Event())
        with commit_turn(log, timeout_s=5.0) as held:
            assert held
        # Released by our close alone: the waiter closed its duplicate before it woke us.
        assert not turn_taken(log)
        holder.join()
    assert ran_on_waiter == [True] * 4
    waiter = commit_lock._WAITER
    assert waiter is not None and waiter.thread.is_alive() and not waiter.busy  # free before its caller woke
    assert _waiter_threads() == [waiter.thread]  # not one thread per wait (those would have ended)


def test_a_wait_that_timed_out_leaves_no_lock_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed-out wait leaves the waiter thread blocked until the holder lets go; a wait meanwhile
    gets a thread of its own; once the holder is gone both leftover waiters release at once and
    the next wait goes through the waiter thread again."""
    log = str(tmp_path / "_delta_log")
    os.mkdir(log)
    assert _until(_no_leftover_waits)
    ran_on_waiter = _record_waits(monkeypatch)
    holder = _hold_for(log, 0.4, threading.Event())
    with commit_turn(log, timeout_s=0.05) as first:
        assert not first  # the waiter thread is now blocked in flock for nobody
    with commit_turn(log, timeout_s=0.05) as second:
        assert not second  # busy waiter: a thread of its own
    assert ran_on_waiter == [True, False]
    holder.join()
    assert _until(lambda: not turn_taken(log))  # the leftovers take and drop it
    assert _until(_no_leftover_waits)
    holder = _hold_for(log, 0.05, threading.Event())
    with commit_turn(log, timeout_s=5.0) as held:
        assert held
    holder.join()
    assert ran_on_waiter == [True, False, True]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_waits_for_and_takes_its_turn(tmp_path: Path) -> None:
    """The at-fork reset. The child is forked while the parent has a waiter thread (which the child
    does not have) and while the waiter's lock is held (as by another parent thread handing a wait
    over at that moment; here this thread holds it across the fork): without the reset the child's
    first wait would block forever on its copy of that lock."""
    import select
    import signal

    log = str(tmp_path / "_delta_log")
    os.mkdir(log)
    holder = _hold_for(log, 0.05, threading.Event())
    with commit_turn(log, timeout_s=5.0) as held:  # the parent has a waiter thread now
        assert held
    holder.join()
    assert commit_lock._WAITER is not None
    go_r, go_w = os.pipe()  # parent -> child: the holder has the turn
    probed_r, probed_w = os.pipe()  # child -> parent: the child saw it taken and is about to wait
    with commit_lock._WAITER_LOCK:
        pid = os.fork()
        if pid == 0:  # the child: exit code 0 = it waited and took the turn
            code = 3
            try:
                os.read(go_r, 1)
                if turn_taken(log):
                    os.write(probed_w, b"x")
                    with commit_turn(log, timeout_s=10.0) as child_held:
                        code = 0 if child_held else 1
                else:
                    code = 2
            finally:
                os._exit(code)

    def hold() -> None:  # opened after the fork: the child has no copy of this descriptor
        with commit_turn(log):
            os.write(go_w, b"x")
            select.select([probed_r], [], [], 20.0)
            time.sleep(0.2)  # the child is blocked in its wait now

    thread = threading.Thread(target=hold)
    thread.start()
    deadline = time.monotonic() + 30.0
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    thread.join()
    for fd in (go_r, go_w, probed_r, probed_w):
        os.close(fd)
    assert done[0] == pid, "the forked child never got its turn (blocked on the waiter lock it inherited)"
    assert os.waitstatus_to_exitcode(done[1]) == 0


# --- the rebase of a writer that finds the turn taken: encoded once, inside the turn ---------------


def _two_winners_one_held_back(path: Path, rows: int, first: str, second: str) -> tuple[Snapshot, bytes]:
    """A ``rows``-row table, its version 0 (the stale snapshot our DML plans on), version 1
    (DELETE ``first``) in the log, and version 2 (DELETE ``second``) taken out again: the turn's
    holder links it while our DML waits."""
    ids = pa.array(range(rows), pa.int64())
    dvengine.write(pa.table({"id": ids, "v": ids}), str(path), mode="error",
                   configuration={"delta.enableDeletionVectors": "true"})
    stale = load_snapshot(str(path))
    DeltaTable.forPath(None, path).delete(first, mode="dv")
    DeltaTable.forPath(None, path).delete(second, mode="dv")
    held_back_file = path / "_delta_log" / "00000000000000000002.json"
    held_back = held_back_file.read_bytes()
    held_back_file.unlink()
    clear_snapshot_cache()
    return stale, held_back


@dataclasses.dataclass
class _TakenTurnRun:
    metrics: dict[str, object] | None
    error: Exception | None
    encodes: int  # write_rebased calls: one per path and catch-up round that wrote its actions
    lock_opens: int


def _delete_while_the_turn_is_held(
    path: Path, condition: str, eager: bool, monkeypatch: pytest.MonkeyPatch, rows: int, first: str, second: str
) -> _TakenTurnRun:
    """Our DELETE plans on version 0, catches up with version 1, finds the turn taken (a holder
    waits for exactly that probe), waits, and catches up with version 2 in its turn. ``eager``:
    every catch-up round encodes its rebase, as before the deferral (the truth to compare with)."""
    stale, held_back = _two_winners_one_held_back(path, rows, first, second)
    log = str(path / "_delta_log")
    with monkeypatch.context() as m:
        m.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)
        m.setattr(dml, "load_snapshot", lambda root: stale)
        encodes: list[str] = []
        real_write = txn_module.write_rebased

        def write_rebased(*args: Any, **kwargs: Any) -> Any:
            encodes.append("x")
            return real_write(*args, **kwargs)

        m.setattr(txn_module, "write_rebased", write_rebased)
        if eager:
            real_catch_up = txn_module.Transaction._catch_up

            def catch_up(self: txn_module.Transaction, version: int, encode: bool = True) -> int:
                return real_catch_up(self, version)

            m.setattr(txn_module.Transaction, "_catch_up", catch_up)
        probed = threading.Event()
        real_taken = CommitTurn.taken

        def taken(self: CommitTurn) -> bool:
            answer = real_taken(self)
            if answer:
                probed.set()
            return answer

        m.setattr(CommitTurn, "taken", taken)
        opened = _count_lock_opens(m)
        holding = threading.Event()

        def holder() -> None:
            with commit_turn(log):
                holding.set()
                probed.wait(30.0)  # our DML caught up with version 1 and found the turn taken
                (path / "_delta_log" / "00000000000000000002.json").write_bytes(held_back)

        thread = threading.Thread(target=holder)
        thread.start()
        holding.wait()
        metrics: dict[str, object] | None = None
        error: Exception | None = None
        try:
            metrics = DeltaTable.forPath(None, path).delete(condition, mode="dv")
        except Exception as exc:
            error = exc
        finally:
            probed.set()
            thread.join()
        assert probed.is_set()
        return _TakenTurnRun(metrics, error, len(encodes), len(opened))


def _committed_add(path: Path, version: int) -> AddFile:
    data = (path / "_delta_log" / f"{version:020d}.json").read_bytes()
    (add,) = [a for a in parse_actions(data, "v") if isinstance(a, AddFile)]
    return add


def _dv_bytes(path: Path, add: AddFile) -> bytes:
    """The DV as stored: the inline Z85 text, or the whole DV file it is in."""
    dv = add.deletion_vector
    assert dv is not None
    if dv.storage_type == "i":
        return dv.path_or_inline_dv.encode("ascii")
    return Path(absolute_dv_path(str(path), dv)).read_bytes()


@pytest.mark.parametrize("storage", ["inline", "file"])
def test_a_writer_finding_the_turn_taken_encodes_its_rebase_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    """Rebased before the turn (onto version 1) and again inside it (onto version 2, which the
    holder linked): the union DV is encoded once, inside the turn, and the commit equals the one
    of the eager path (every catch-up round encodes, as before), which is the truth: same DV bytes
    (inline text, or DV file), same add, same metrics; delta-rs and DuckDB read the result."""
    if storage == "file":  # a rebase goes inline up to the larger of the two limits
        monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
        monkeypatch.setenv("DVENGINE_DV_REBASEINLINEMAXBYTES", "0")
    runs: dict[str, _TakenTurnRun] = {}
    adds: dict[str, AddFile] = {}
    for way in ("deferred", "eager"):
        path = tmp_path / way
        run = _delete_while_the_turn_is_held(path, "id = 4001", way == "eager", monkeypatch, 5000, "id = 10", "id = 20")
        assert run.error is None, run.error
        assert run.metrics is not None and run.metrics["version"] == 3
        assert run.metrics["numCommitAttempts"] == 3 and run.metrics["numRebasedFiles"] == 2
        assert run.lock_opens == 1  # the probe and the turn on one descriptor
        runs[way], adds[way] = run, _committed_add(path, 3)
        dv = adds[way].deletion_vector
        assert dv is not None and dv.storage_type == ("i" if storage == "inline" else "u")
        rows = load_deletion_vector(str(path), dv, adds[way].num_records)
        assert sorted(rows) == [10, 20, 4001]
        want = sort_rows([(i, i) for i in range(5000) if i not in (10, 20, 4001)])
        assert rows_arrow(path, ["id", "v"]) == want
        assert rows_delta_rs(path, ["id", "v"]) == want
        assert rows_duckdb(path, ["id", "v"]) == want
    assert runs["deferred"].encodes == 1 and runs["eager"].encodes == 2
    deferred, eager = adds["deferred"], adds["eager"]
    assert _dv_bytes(tmp_path / "deferred", deferred) == _dv_bytes(tmp_path / "eager", eager)
    assert deferred.deletion_vector is not None and eager.deletion_vector is not None
    if storage == "inline":
        assert deferred.deletion_vector == eager.deletion_vector
    else:  # equal but for the DV file's random name
        assert dataclasses.replace(deferred.deletion_vector, path_or_inline_dv="") == dataclasses.replace(
            eager.deletion_vector, path_or_inline_dv=""
        )
        # Each table holds the winners' and the planned DV's files besides the committed one; the
        # eager path also wrote one before the turn that the rebase in the turn replaced.
        dv_files = {way: len(list((tmp_path / way).glob("*.bin"))) for way in runs}
        assert dv_files["eager"] == dv_files["deferred"] + 1
    def same_but_names(add: AddFile) -> AddFile:  # two tables: their data files differ in name and mtime only
        return dataclasses.replace(add, path="", modification_time=0, deletion_vector=None)

    assert same_but_names(deferred) == same_but_names(eager)
    untimed = [{k: v for k, v in run.metrics.items() if not k.endswith("TimeMs")} for run in runs.values() if run.metrics]
    assert untimed[0] == untimed[1]


def test_a_rebase_that_removes_the_file_whole_is_written_before_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1 (ids 0, 1) and our DELETE (ids 2, 3) together hide every row of the 4-row file,
    so our rebase removes it whole, and that plain remove is written at once, before the turn:
    version 2 (id 2), which DV-updates the file, is then judged file by file, as on the eager
    path (ConcurrentDeleteReadError), not row by row (had the rebase stayed in memory, version 2's
    row 2, also ours, would have raised ConcurrentDeleteDeleteError instead)."""
    messages: dict[str, str] = {}
    for way in ("deferred", "eager"):
        path = tmp_path / way
        run = _delete_while_the_turn_is_held(path, "id IN (2, 3)", way == "eager", monkeypatch, 4, "id IN (0, 1)", "id = 2")
        assert isinstance(run.error, ConcurrentDeleteReadError), run.error
        assert run.encodes == 1  # the whole remove, before the turn, on both paths
        messages[way] = re.sub(r"part-[^ ,]+\.parquet", "<file>", str(run.error).replace(str(path), "<table>"))
        assert load_snapshot(str(path)).version == 2  # nothing committed
        assert rows_delta_rs(path, ["id", "v"]) == [(3, 3)]
    assert "which this transaction read" in messages["deferred"]
    assert messages["deferred"] == messages["eager"]
