"""The process-wide snapshot cache (dvengine/log/snapshot_cache.py) must always equal a fresh load.

Truth here is the listing-based replay with the cache switched off (the loader as it was before
the cache) plus an in-memory model of the rows. Every operation sequence is generated, and the
cached snapshot is compared after each step: new commits, checkpoints at a small interval, a
table deleted and recreated at the same path, time travel and a concurrent writer process.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import count_log_listings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dvengine
from dvengine import DeltaTable
from dvengine.log import Snapshot, clear_snapshot_cache, load_snapshot
from dvengine.log import snapshot_cache as cache
from dvengine.log.checkpoint_writer import maybe_checkpoint


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_snapshot_cache()
    yield
    clear_snapshot_cache()


def _fresh(root: str, version: int | None = None) -> Snapshot:
    """The listing-based load, bypassing (and not filling) the cache."""
    old = os.environ.get(cache.ENV_SWITCH)
    os.environ[cache.ENV_SWITCH] = "false"
    try:
        return load_snapshot(root, version=version)
    finally:
        if old is None:
            del os.environ[cache.ENV_SWITCH]
        else:
            os.environ[cache.ENV_SWITCH] = old


def _state(s: Snapshot) -> tuple[Any, ...]:
    # dataChange of a live file is not table state: a checkpoint stores every add with false, a JSON
    # commit with true, so even two fresh loads differ there depending on where replay started.
    files = tuple(dataclasses.replace(f, data_change=True) for f in s.files)
    return (
        s.table_root, s.version, s.protocol, s.metadata, files, dict(s.app_transactions),
        dict(s.domain_metadata), s.timestamp_ms,
    )


def _assert_same(cached: Snapshot, root: str, version: int | None = None) -> None:
    fresh = _fresh(root, version)
    assert _state(cached) == _state(fresh)

    def tombstones(s: Snapshot) -> list[Any]:  # checkpoints keep removes without stats
        return [(r.key, r.deletion_timestamp, r.size, dict(r.partition_values or {})) for r in s.tombstones]

    assert tombstones(cached) == tombstones(fresh)


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([tag] * len(ids)), "p": [i % 2 for i in ids]})


def _read(root: str) -> list[tuple[int, str]]:
    t = DeltaTable.forPath(None, root).toArrow()
    return sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 300), min_size=1, max_size=8, unique=True)),
        st.tuples(st.just("delete"), st.integers(2, 6), st.integers(0, 5)),
        st.tuples(st.just("update"), st.integers(2, 6), st.integers(0, 5)),
        st.tuples(st.just("merge"), st.lists(st.integers(0, 300), min_size=1, max_size=6, unique=True)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("load_old")),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops, st.booleans())
def test_cached_snapshot_equals_fresh_load_and_model(tmp_path_factory: pytest.TempPathFactory, steps: Any, part: bool) -> None:
    root = str(tmp_path_factory.mktemp("t") / "t")
    model: dict[int, str] = {i: "a" for i in range(20)}
    dvengine.write(_rows(list(range(20)), "a"), root, partitionBy=["p"] if part else None,
                   configuration={"delta.checkpointInterval": "3", "delta.enableDeletionVectors": "true"})
    table = DeltaTable.forPath(None, root)  # kept across rounds, as a streaming job keeps it
    for n, step in enumerate(steps):
        kind = step[0]
        if kind == "append":
            ids = [i for i in step[1] if i not in model]
            if ids:
                dvengine.write(_rows(ids, f"w{n}"), root, mode="append")
                model.update({i: f"w{n}" for i in ids})
        elif kind == "delete":
            k, r = step[1], step[2] % step[1]
            table.delete(f"id % {k} = {r}", mode="dv")
            model = {i: v for i, v in model.items() if i % k != r}
        elif kind == "update":
            k, r = step[1], step[2] % step[1]
            table.update(f"id % {k} = {r}", {"v": f"'u{n}'"})
            model.update({i: f"u{n}" for i in model if i % k == r})
        elif kind == "merge":
            src = _rows(step[1], f"m{n}")
            (table.alias("t").merge(src, "t.id = s.id", source_alias="s")
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
            model.update({i: f"m{n}" for i in step[1]})
        elif kind == "checkpoint":
            snap = load_snapshot(root)
            maybe_checkpoint(root, snap.version, configuration={"delta.checkpointInterval": "1"})
        else:  # time travel while the cache holds a newer version
            latest = load_snapshot(root).version
            _assert_same(load_snapshot(root, version=latest // 2), root, latest // 2)
        _assert_same(load_snapshot(root), root)
        _assert_same(table.snapshot(), root)
    assert _read(root) == sorted(model.items())


def test_tail_is_read_without_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([1, 2, 3], "a"), root)
    first = load_snapshot(root)
    calls = count_log_listings(monkeypatch)
    assert load_snapshot(root) is first  # nothing new: the very same snapshot
    dvengine.write(_rows([4], "b"), root, mode="append")
    DeltaTable.forPath(None, root).delete("id = 2")
    calls.clear()
    latest = load_snapshot(root)
    assert calls == []
    assert latest.version == first.version + 2
    _assert_same(latest, root)


def test_long_tail_uses_listing_and_newest_checkpoint(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([0], "a"), root)
    load_snapshot(root)
    old = os.environ.get(cache.ENV_SWITCH)
    os.environ[cache.ENV_SWITCH] = "false"  # another process writes 60 commits (checkpoints at 10, 20 ...)
    try:
        for i in range(1, cache.MAX_TAIL + 10):
            dvengine.write(_rows([i], "a"), root, mode="append")
    finally:
        if old is None:
            del os.environ[cache.ENV_SWITCH]
        else:
            os.environ[cache.ENV_SWITCH] = old
    latest = load_snapshot(root)
    assert latest.version == cache.MAX_TAIL + 9
    _assert_same(latest, root)
    assert cache.get(latest.table_root) is not None
    assert cache.get(latest.table_root).version == latest.version  # type: ignore[union-attr]


@pytest.mark.parametrize("longer", [False, True])
def test_table_deleted_and_recreated_at_same_path(tmp_path: Path, longer: bool) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([1, 2, 3], "old"), root)
    dvengine.write(_rows([4], "old"), root, mode="append")
    assert load_snapshot(root).version == 1
    shutil.rmtree(root)
    dvengine.write(_rows([7, 8], "new"), root)
    dvengine.write(_rows([9], "new"), root, mode="append")  # same version 1, other content
    if longer:
        dvengine.write(_rows([10], "new"), root, mode="append")
    snap = load_snapshot(root)
    _assert_same(snap, root)
    assert _read(root) == [(i, "new") for i in ([7, 8, 9, 10] if longer else [7, 8, 9])]


def test_time_travel_unaffected_and_missing_version_still_raises(tmp_path: Path) -> None:
    from dvengine.errors import VersionNotFoundError

    root = str(tmp_path / "t")
    for i in range(5):
        dvengine.write(_rows([i], "a"), root, mode="append")
    load_snapshot(root)
    for v in range(5):
        _assert_same(load_snapshot(root, version=v), root, v)
    with pytest.raises(VersionNotFoundError, match="latest version is 4"):
        load_snapshot(root, version=9)
    assert load_snapshot(root).version == 4


_WRITER = """
import sys
import pyarrow as pa
import dvengine
from dvengine import DeltaTable
root, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = DeltaTable.forPath(None, root)
for i in range(start, start + n):
    dvengine.write(pa.table({"id": pa.array([i], pa.int64()), "v": ["c"], "p": [i % 2]}), root, mode="append")
    if i % 4 == 0:
        t.delete(f"id = {i - 1}")
"""


def test_concurrent_writer_process(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([0], "a"), root, configuration={"delta.checkpointInterval": "5"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, root, "1", "40"], env=env)
    seen: list[Snapshot] = []
    try:
        while writer.poll() is None:
            seen.append(load_snapshot(root))
            DeltaTable.forPath(None, root).delete("id = -1")  # this process writes too (no-op delete)
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    final = load_snapshot(root)
    seen.append(final)
    for snap in seen:
        _assert_same(snap, root, snap.version)
    expected = sorted(set(range(41)) - {i - 1 for i in range(1, 41) if i % 4 == 0})
    assert [r[0] for r in _read(root)] == expected


def test_table_exists_answers_from_the_cache_and_notices_deletion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.log import table_exists

    root = str(tmp_path / "t")
    assert not table_exists(root)
    dvengine.write(_rows([1], "a"), root)
    load_snapshot(root)
    calls = count_log_listings(monkeypatch)
    assert table_exists(root) and calls == []  # one read of the cached commit, no listing
    shutil.rmtree(root)
    assert not table_exists(root)  # the cached commit is gone: the listing decides
    dvengine.write(_rows([2], "b"), root)
    assert table_exists(root)


def test_a_commit_read_from_a_store_is_known_only_under_its_e_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    """A winner read whole from a store (its bytes and e-tag) stands in for a GET of the same
    version later, only while the listed object has that e-tag; large commits and commits
    without an e-tag are not kept, and only the newest versions per table are. (The process's own
    memory only: the host-local relay, tests/test_commit_relay.py, is switched off here.)"""
    from dvengine.storage import commit_relay

    monkeypatch.setattr(commit_relay, "_private_root", lambda: None)
    root = "s3://bucket/known"
    cache.clear_snapshot_cache()
    cache.note_read_commit(root, 5, '"tag-5"', b"five")
    assert cache.known_commit(root, 5, '"tag-5"') == b"five"
    assert cache.known_commit(root, 5, '"another"') is None  # recreated table: another object
    assert cache.known_commit(root, 5, None) is None
    assert cache.known_commit(root, 6, '"tag-5"') is None
    assert cache.known_commit("s3://bucket/other", 5, '"tag-5"') is None
    cache.note_read_commit(root, 7, None, b"untagged")
    cache.note_read_commit(root, 8, '"big"', b"x" * (cache.READ_COMMIT_MAX_BYTES + 1))
    assert cache.known_commit(root, 8, '"big"') is None
    for v in range(100, 100 + cache.READ_COMMITS_PER_TABLE):
        cache.note_read_commit(root, v, f'"t{v}"', b"v")
    assert cache.known_commit(root, 5, '"tag-5"') is None  # the oldest went first
    assert cache.known_commit(root, 100, '"t100"') == b"v"
    cache.note_own_commit(root, 200, '"own"', b"mine", 0.0)
    assert cache.known_commit(root, 200, '"own"') == b"mine"  # the own commit counts too
    cache.clear_snapshot_cache()
    assert cache.known_commit(root, 100, '"t100"') is None
