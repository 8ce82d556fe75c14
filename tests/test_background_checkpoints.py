"""Checkpoints written off the committing thread (dvengine/log/background_checkpoints.py).

The truth each test compares with is independent of the background writer: the table's rows as
an in-memory model and as delta-rs reads them with only the checkpoint and later commits left,
and the state a JSON-only replay of the same version gives.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as DeltaRsTable
from deltalake import QueryBuilder

import dvengine
from dvengine import DeltaTable
from dvengine.log import background_checkpoints, load_snapshot
from dvengine.log.checkpoint_writer import DueCheckpoint, write_due_checkpoint
from dvengine.log.snapshot_cache import clear_snapshot_cache

REPO = Path(__file__).resolve().parents[1]


def _checkpoints(root: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in (root / "_delta_log").glob("*.checkpoint.parquet"))


def _last_checkpoint_version(root: Path) -> int | None:
    path = root / "_delta_log" / "_last_checkpoint"
    return int(json.loads(path.read_text())["version"]) if path.exists() else None


def _rows_delta_rs(root: Path) -> list[tuple[Any, ...]]:
    table = DeltaRsTable(str(root))
    got = QueryBuilder().register("t", table).execute("SELECT id, v FROM t").read_all()
    return sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))


def _rows_dvengine(root: Path) -> list[tuple[Any, ...]]:
    got = DeltaTable.forPath(None, str(root)).toArrow()
    return sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))


def _new_table(root: Path, interval: int, rows: int = 20) -> dict[int, int]:
    dvengine.write(pa.table({"id": list(range(rows)), "v": list(range(rows))}), str(root),
                   configuration={"delta.checkpointInterval": str(interval)})
    return {i: i for i in range(rows)}


def _delete(root: Path, model: dict[int, int], key: int) -> None:
    DeltaTable.forPath(None, str(root)).delete(f"id = {key}")
    model.pop(key)


class _Gate:
    """Holds the background worker before it writes, until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.written: list[int] = []

    def write(self, due: DueCheckpoint) -> str:
        self.entered.set()
        assert self.release.wait(30), "the test never released the checkpoint writer"
        self.written.append(due.version)
        return write_due_checkpoint(due)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    monkeypatch.setenv(background_checkpoints.ENV_SWITCH, "true")
    g = _Gate()
    monkeypatch.setattr(background_checkpoints, "write_due_checkpoint", g.write)
    yield g
    g.release.set()
    assert dvengine.wait_for_checkpoints(timeout=30)


def test_commit_returns_before_its_checkpoint_is_written(tmp_path: Path, gate: _Gate) -> None:
    root = tmp_path / "t"
    model = _new_table(root, interval=2)  # version 0
    _delete(root, model, 3)  # version 1
    _delete(root, model, 4)  # version 2: due; the writer is held
    assert gate.entered.wait(10)
    assert _checkpoints(root) == [] and _last_checkpoint_version(root) is None
    assert not dvengine.wait_for_checkpoints(timeout=0.05)
    # The table is complete without it, for every reader.
    want = sorted(model.items())
    assert _rows_dvengine(root) == want and _rows_delta_rs(root) == want
    gate.release.set()
    assert dvengine.wait_for_checkpoints(timeout=30)
    assert _checkpoints(root) == [2] and _last_checkpoint_version(root) == 2
    # The checkpoint alone (commits 0..2 gone) gives the same rows to delta-rs and dvengine.
    for version in range(3):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    clear_snapshot_cache()
    assert _rows_dvengine(root) == want and _rows_delta_rs(root) == want


def test_checkpoints_are_written_in_order_and_a_long_backlog_drops_the_oldest(tmp_path: Path, gate: _Gate) -> None:
    limit = background_checkpoints.MAX_WAITING
    root = tmp_path / "t"
    model = _new_table(root, interval=2, rows=2 * limit + 10)
    _delete(root, model, 0)
    _delete(root, model, 1)  # version 2: held in the writer
    assert gate.entered.wait(10)
    last = 2 + 2 * (limit + 1)
    for key in range(2, last):  # versions 3..last: limit + 1 more due while 2 is held; 4 is dropped
        _delete(root, model, key)
    gate.release.set()
    assert dvengine.wait_for_checkpoints(timeout=60)
    assert gate.written == [2, *range(6, last + 1, 2)]
    assert _checkpoints(root) == gate.written and _last_checkpoint_version(root) == last
    assert _rows_delta_rs(root) == sorted(model.items())


def test_background_checkpoints_equal_a_json_replay_while_commits_go_on(tmp_path: Path) -> None:
    """Commits keep landing while the worker writes: each checkpoint still describes its own
    version exactly (compared with a replay of the JSON commits up to it)."""
    root = tmp_path / "t"
    model = _new_table(root, interval=3)
    for key in range(15):
        _delete(root, model, key)
        DeltaTable.forPath(None, str(root)).update(f"id = {19 - key % 4}", {"v": f"v + {key}"})
        model[19 - key % 4] += key
    assert dvengine.wait_for_checkpoints(timeout=60)
    written = _checkpoints(root)
    assert written and written[-1] == 30 and all(v % 3 == 0 for v in written)
    for version in written:
        table = pq.read_table(root / "_delta_log" / f"{version:020d}.checkpoint.parquet")
        adds = sorted(
            (a["path"], json.dumps(a["deletionVector"], sort_keys=True)) for a in table.column("add").to_pylist() if a
        )
        clear_snapshot_cache()
        os.environ["DVENGINE_LOG_SNAPSHOTCACHE"] = "false"
        try:
            replayed = load_snapshot(str(root), version=version)
        finally:
            del os.environ["DVENGINE_LOG_SNAPSHOTCACHE"]
        want = sorted(
            (a.path, json.dumps(None if a.deletion_vector is None else {
                "storageType": a.deletion_vector.storage_type,
                "pathOrInlineDv": a.deletion_vector.path_or_inline_dv,
                "offset": a.deletion_vector.offset,
                "sizeInBytes": a.deletion_vector.size_in_bytes,
                "cardinality": a.deletion_vector.cardinality,
                "maxRowIndex": a.deletion_vector.max_row_index,
            }, sort_keys=True))
            for a in replayed.files
        )
        assert adds == want, f"checkpoint {version}"
    assert _rows_delta_rs(root) == sorted(model.items()) == _rows_dvengine(root)


def test_a_failed_background_checkpoint_warns_and_the_commit_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(background_checkpoints.ENV_SWITCH, "true")

    def fail(due: DueCheckpoint) -> str:
        raise OSError(f"disk full writing checkpoint {due.version}")

    monkeypatch.setattr(background_checkpoints, "write_due_checkpoint", fail)
    root = tmp_path / "t"
    model = _new_table(root, interval=2)
    with caplog.at_level(logging.WARNING, logger=background_checkpoints.__name__):
        _delete(root, model, 1)
        _delete(root, model, 2)  # version 2 committed; its checkpoint fails in the background
        assert dvengine.wait_for_checkpoints(timeout=30)
    warned = [r for r in caplog.records if "writing its checkpoint failed" in r.getMessage()]
    assert len(warned) == 1 and str(root) in warned[0].getMessage() and "commit 2" in warned[0].getMessage()
    assert warned[0].exc_info is not None and "disk full" in str(warned[0].exc_info[1])
    assert _checkpoints(root) == [] and sorted(os.listdir(root / "_delta_log")) == [f"{v:020d}.json" for v in range(3)]
    monkeypatch.setattr(background_checkpoints, "write_due_checkpoint", write_due_checkpoint)
    _delete(root, model, 5)
    _delete(root, model, 6)  # version 4: written
    assert dvengine.wait_for_checkpoints(timeout=30)
    assert _checkpoints(root) == [4] and _rows_delta_rs(root) == sorted(model.items())


def test_switched_off_the_checkpoint_is_written_before_the_commit_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(background_checkpoints.ENV_SWITCH, "false")
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    root = tmp_path / "t"
    model = _new_table(root, interval=2)
    _delete(root, model, 1)
    _delete(root, model, 2)
    assert _checkpoints(root) == [2] and _last_checkpoint_version(root) == 2
    assert "dvengine-checkpoints" not in started


def test_a_process_that_exits_right_after_committing_still_leaves_its_checkpoint(tmp_path: Path) -> None:
    """The worker is not a daemon: the interpreter waits for it (here held 0.5 s) at exit."""
    root = tmp_path / "t"
    _new_table(root, interval=2)
    script = f"""
import time
import dvengine
from dvengine import DeltaTable
from dvengine.log import background_checkpoints
real = background_checkpoints.write_due_checkpoint
def slow(due):
    time.sleep(0.5)
    return real(due)
background_checkpoints.write_due_checkpoint = slow
DeltaTable.forPath(None, {str(root)!r}).delete("id = 1")
DeltaTable.forPath(None, {str(root)!r}).delete("id = 2")
"""
    env = {**os.environ, "PYTHONPATH": str(REPO), background_checkpoints.ENV_SWITCH: "true"}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    assert _checkpoints(root) == [2] and _last_checkpoint_version(root) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_does_not_inherit_waiting_checkpoints(tmp_path: Path, gate: _Gate) -> None:
    root = tmp_path / "t"
    model = _new_table(root, interval=2)
    for key in range(4):  # 2 held in the writer, 4 waiting
        _delete(root, model, key)
    assert gate.entered.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: nothing to wait for, no worker to start
        os._exit(0 if dvengine.wait_for_checkpoints(timeout=0) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not dvengine.wait_for_checkpoints(timeout=0)  # the parent's are still there
    gate.release.set()
    assert dvengine.wait_for_checkpoints(timeout=30)
    assert _checkpoints(root) == [2, 4]
