"""Snapshot file order moved forward by a commit's edits equals a full sort (log/file_order.py).

The truth is the definition: ``Snapshot.files`` is the replayed state's files sorted by
(path, DV unique id). Hypothesis drives commits that re-add a path with a new DV (a DV update),
remove files, add new paths and re-add a removed one, over tables small enough that edits are
taken and large enough that the full-sort fallback is too.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.log.file_order import advanced_files, file_order, sorted_files
from dvengine.log.replay import ReplayState
from dvengine.protocol.actions import Action, AddFile, DeletionVectorDescriptor, RemoveFile

PATHS = [f"p{i:03d}.parquet" for i in range(60)]


def _add(path: str, dv: int | None) -> AddFile:
    descriptor = None if dv is None else DeletionVectorDescriptor("u", f"dv{dv:04d}xxxxxxxxxxxxxxxxx", 40, dv + 1)
    return AddFile(path=path, partition_values={}, size=1, modification_time=1, deletion_vector=descriptor)


def _remove(add: AddFile) -> RemoveFile:
    return RemoveFile(path=add.path, deletion_timestamp=1, deletion_vector=add.deletion_vector)


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[AddFile], list[list[tuple[str, int, int | None]]]]:
    start = draw(st.lists(st.sampled_from(PATHS), unique=True, min_size=0, max_size=50))
    initial = [_add(p, draw(st.none() | st.integers(0, 3))) for p in start]
    commits = draw(st.lists(
        st.lists(st.tuples(st.sampled_from(PATHS), st.integers(0, 2), st.none() | st.integers(0, 9999)),
                 min_size=0, max_size=6),
        min_size=1, max_size=4,
    ))
    return initial, commits


@settings(max_examples=300, deadline=None)
@given(histories())
def test_advanced_order_equals_a_full_sort(history: tuple[list[AddFile], list[list[tuple[str, int, int | None]]]]) -> None:
    initial, commits = history
    state = ReplayState()
    state.apply_commit(initial)
    previous = sorted_files(state.files.values())
    tail: list[list[Action]] = []
    for commit in commits:
        actions: list[Action] = []
        for path, kind, dv in commit:
            live = [a for a in state.files.values() if a.path == path]
            if kind == 0 and live:  # a DV update: remove the file as it is, re-add it with a new DV
                actions += [_remove(live[0]), _add(path, dv if dv is not None else 0)]
            elif kind == 1 and live:  # a remove (a rewrite, OPTIMIZE)
                actions.append(_remove(live[0]))
            else:  # an add of this path (new, or re-added after its remove)
                actions.append(_add(path, dv))
        state.apply_commit(actions)
        tail.append(actions)
    got = advanced_files(previous, tail, state.files)
    assert got == sorted_files(state.files.values())
    assert [file_order(a) for a in got] == sorted(file_order(a) for a in state.files.values())


def test_a_cached_snapshot_moved_forward_lists_files_as_a_fresh_load(tmp_path: Path) -> None:
    """End to end: DML on a cached snapshot (the edit path) against a cold listing-based load."""
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": list(range(1000)), "p": [i // 100 for i in range(1000)]}), root, partitionBy=["p"])
    table = DeltaTable.forPath(None, root)
    for x in (3, 147, 348, 551, 997):
        table.deleteMetrics(f"id = {x}", engine="local")
        table.updateMetrics(f"id = {x + 1}", {"id": str(1000 + x)}, engine="local")
    cached = table.snapshot()
    dvengine.log.snapshot_cache.clear_snapshot_cache()
    fresh = DeltaTable.forPath(None, root).snapshot()
    assert fresh.version == cached.version
    assert cached.files == fresh.files
    assert len({a.path for a in fresh.files if a.deletion_vector is not None}) >= 4
