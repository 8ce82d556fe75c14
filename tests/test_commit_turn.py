"""The cost controls of a lost commit race: the host-local commit turn, the backoff, and the
inline DV of a rebase (spec_notes/isolation-and-concurrency.md, "Cost of a lost race")."""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.api import dml
from dvengine.commit import transaction as txn_module
from dvengine.commit.commit_lock import commit_turn, lock_path, turn_taken
from dvengine.commit.transaction import backoff_seconds
from dvengine.log import load_snapshot
from dvengine.log.snapshot_cache import clear_snapshot_cache
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
