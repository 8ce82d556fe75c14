"""Every file a commit or ``_last_checkpoint`` names is fsynced before it is named, outside the turn.

A power loss cannot be simulated here, so the order is tested (spec_notes/crash-safety.md, "Power
loss"): ``os.fsync``, ``os.rename`` / ``os.replace`` / ``os.link`` and the host-local commit turn
are wrapped to record, in order, which path each fsync flushed (read back from the descriptor)
and which names each rename or link made. For every commit linked during an operation, each new
data, change data and DV file it names must have been fsynced (under its current name or one it
was renamed from) before that link, and no file outside ``_delta_log`` may be fsynced while the
turn is held. For checkpoints: the checkpoint (and its sidecar) before the rename of
``_last_checkpoint``, and ``_last_checkpoint``'s own content before that rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.commit.commit_lock import commit_turn
from dvengine.log import load_snapshot
from dvengine.log.checkpoint_writer import last_checkpoint_json, write_checkpoint

STRATEGY_CONF = "dvengine.spark.dmlStrategy"  # engine/spark/executor.py (this module imports no pyspark code)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads fsynced paths from /proc/self/fd")

COMMIT_NAME = re.compile(r"/_delta_log/\d{20}\.json$")


@dataclass(frozen=True)
class Event:
    kind: str  # "fsync", "move" (rename / replace), "link", "turn in", "turn out"
    path: str  # the path fsynced, or the name a move / link made
    source: str | None = None  # the name a move / link came from


class Recorder:
    """The ordered fsync / rename / link / commit-turn events of this process (any thread)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        real_fsync, real_rename, real_replace, real_link = os.fsync, os.rename, os.replace, os.link

        def fsync(fd: int) -> None:
            real_fsync(fd)
            self._add(Event("fsync", os.readlink(f"/proc/self/fd/{fd}")))

        def mover(real: Any, kind: str) -> Any:
            def move(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
                real(src, dst, *args, **kwargs)
                self._add(Event(kind, os.path.realpath(dst), os.path.realpath(src)))

            return move

        @contextlib.contextmanager
        def turn(log: str) -> Iterator[bool]:
            with commit_turn(log) as exclusive:
                self._add(Event("turn in", log))
                try:
                    yield exclusive
                finally:
                    self._add(Event("turn out", log))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "rename", mover(real_rename, "move"))
        monkeypatch.setattr(os, "replace", mover(real_replace, "move"))
        monkeypatch.setattr(os, "link", mover(real_link, "link"))
        monkeypatch.setattr("dvengine.commit.transaction.commit_turn", turn)

    def _add(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def synced_before(self, index: int, path: str) -> bool:
        """Was the file now at ``path`` fsynced before event ``index``, under this name or one it
        was renamed from?"""
        want = os.path.realpath(path)
        for event in reversed(self.events[:index]):
            if event.kind in ("move", "link") and event.path == want:
                assert event.source is not None
                want = event.source
            elif event.kind == "fsync" and event.path == want:
                return True
        return False

    def commit_links(self) -> list[tuple[int, str]]:
        return [(i, e.path) for i, e in enumerate(self.events) if e.kind == "link" and COMMIT_NAME.search(e.path)]

    def fsyncs_in_turn(self) -> list[str]:
        inside, out = False, []
        for event in self.events:
            if event.kind in ("turn in", "turn out"):
                inside = event.kind == "turn in"
            elif inside and event.kind == "fsync" and "/_delta_log" not in event.path:
                out.append(event.path)
        return out


def _named_files(root: str, commit_path: str) -> list[str]:
    """Absolute paths of the data, change data and DV files a commit file names."""
    from dvengine.dv.descriptor import absolute_dv_path
    from dvengine.protocol.actions import DeletionVectorDescriptor

    out = []
    for line in Path(commit_path).read_text().splitlines():
        action = json.loads(line)
        for key in ("add", "cdc"):
            if key in action:
                out.append(os.path.join(root, action[key]["path"]))
                dv = action[key].get("deletionVector")
                if dv is not None and dv["storageType"] == "u":
                    out.append(absolute_dv_path(root, DeletionVectorDescriptor.from_json(dv)))
    return [os.path.realpath(p) for p in out]


def _all_files(root: str) -> set[str]:
    return {os.path.realpath(os.path.join(d, n)) for d, _, names in os.walk(root) for n in names}


def assert_commits_durable(recorder: Recorder, root: str, existing: set[str]) -> int:
    """Check every commit linked while ``recorder`` ran; return how many new files were checked."""
    links = recorder.commit_links()
    assert links, "the operation linked no commit"
    checked = 0
    for index, commit in links:
        for path in _named_files(root, commit):
            if path in existing:
                continue  # a file of an earlier version named again (a DV added to it)
            assert recorder.synced_before(index, path), f"{path} is named by {commit} but was not fsynced before its link"
            checked += 1
    assert any(e.kind == "turn in" for e in recorder.events), "no commit went through the turn"
    assert recorder.fsyncs_in_turn() == [], "files were fsynced inside the commit turn"
    return checked


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int64()), "p": pa.array([i % 3 for i in ids], pa.int64())})


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DVENGINE_CHECKPOINT_BACKGROUND", "false")
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")  # every DV in a file, which the commit names
    root = str(tmp_path / "t")
    dvengine.write(_rows(0, 30), root, partitionBy=["p"], configuration={"delta.enableChangeDataFeed": "true"})
    return root


def recorded(operation: Any) -> Recorder:
    """The events of ``operation()``; the wrappers are removed when it returns."""
    with pytest.MonkeyPatch.context() as patch:
        recorder = Recorder(patch)
        operation()
    return recorder


def _merge(root: str) -> None:
    (DeltaTable.forPath(None, root).alias("t").merge(_rows(25, 10), "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"v": "s.v + 1000"}).whenNotMatchedInsertAll().execute())


OPERATIONS: dict[str, Any] = {
    "append": lambda root: dvengine.write(_rows(100, 20), root, mode="append"),
    "overwrite": lambda root: dvengine.write(_rows(200, 20), root, mode="overwrite"),
    "update rewrite": lambda root: DeltaTable.forPath(None, root).update("id = 4", {"v": "-1"}, mode="rewrite"),
    "update dv": lambda root: DeltaTable.forPath(None, root).update("id = 4", {"v": "-1"}, mode="dv"),
    "delete rewrite": lambda root: DeltaTable.forPath(None, root).delete("id < 10", mode="rewrite"),
    "delete dv": lambda root: DeltaTable.forPath(None, root).delete("id = 7", mode="dv"),
    "merge": _merge,
    "optimize": lambda root: DeltaTable.forPath(None, root).optimize().executeCompaction(),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_in_process_files_are_fsynced_before_the_commit_link(table: str, name: str) -> None:
    if name == "optimize":  # needs several small files per partition
        for start in (40, 50, 60):
            dvengine.write(_rows(start, 6), table, mode="append")
    existing = _all_files(table)
    recorder = recorded(lambda: OPERATIONS[name](table))
    assert assert_commits_durable(recorder, table, existing) > 0


def _checkpoint_order(recorder: Recorder, root: str) -> None:
    log = os.path.realpath(os.path.join(root, "_delta_log"))
    renames = [i for i, e in enumerate(recorder.events) if e.kind == "move" and e.path == f"{log}/_last_checkpoint"]
    assert len(renames) == 1
    index = renames[0]
    source = recorder.events[index].source
    assert source is not None and recorder.synced_before(index, source), "_last_checkpoint's content was not fsynced before its rename"
    version = last_checkpoint_json(root)["version"]  # type: ignore[index]
    tops = [os.path.join(log, n) for n in os.listdir(log) if n.startswith(f"{version:020d}.checkpoint.")]
    assert len(tops) == 1
    named = [tops[0]]
    sidecars = os.path.join(log, "_sidecars")
    if os.path.isdir(sidecars):
        named += [os.path.join(sidecars, n) for n in os.listdir(sidecars)]
    for path in named:
        assert recorder.synced_before(index, path), f"{path} was not fsynced before _last_checkpoint named it"


@pytest.mark.parametrize("policy", ["classic", "v2"])
def test_checkpoint_is_fsynced_before_last_checkpoint_names_it(tmp_path: Path, policy: str) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows(0, 10), root, configuration={"delta.checkpointPolicy": policy})
    dvengine.write(_rows(10, 10), root, mode="append")
    snapshot = load_snapshot(root)
    recorder = recorded(lambda: write_checkpoint(snapshot))
    if policy == "v2":
        assert os.listdir(os.path.join(root, "_delta_log", "_sidecars"))
    _checkpoint_order(recorder, root)


def test_spark_written_files_are_fsynced_by_the_driver_before_the_commit_link(spark: Any, tmp_path: Path) -> None:
    """Spark's writer (JVM) never fsyncs; the driver must, before the commit names the files: a
    DataFrame append and a copy-on-write DELETE on the Spark executor's row plan (survivors
    rewritten by Spark's writer). Only the driver's events are recorded: that is where the fsync
    must be. (Python file tasks write with the in-process writer, which fsyncs in the worker.)"""
    root = str(tmp_path / "t")
    dvengine.write(_rows(0, 30), root, partitionBy=["p"])
    frame = spark.createDataFrame(_rows(100, 40).to_pandas())
    steps = {
        "append": lambda: dvengine.write(frame, root, mode="append"),
        "delete": lambda: DeltaTable.forPath(spark, root).delete("id < 20", mode="rewrite", engine="spark"),
    }
    spark.conf.set(STRATEGY_CONF, "rows")
    try:
        for name, step in steps.items():
            existing = _all_files(root)
            recorder = recorded(step)
            assert assert_commits_durable(recorder, root, existing) > 0, name
    finally:
        spark.conf.unset(STRATEGY_CONF)
    assert sorted(dvengine.DeltaTable.forPath(None, root).toArrow().column("id").to_pylist()) == [*range(20, 30), *range(100, 140)]
