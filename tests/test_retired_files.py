"""Caches forget the files that left their table (dvengine/storage/retired_files.py, log/retirement.py).

A long stream of upserts with compaction retires files every few rounds; the process-wide caches
(footers, columns and key indexes, DV spans, parsed stats, skipping ranges) must then hold
entries only for files that are still live, not for every file version the stream ever wrote.
Live files come from delta-rs (independent of dvengine's replay); the retirement rules are also
checked directly on hand-made commits.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as DeltaRsTable

import dvengine
from dvengine import DeltaTable
from dvengine.commands.options import env_key
from dvengine.engine.local.column_cache import cached_paths
from dvengine.log import load_snapshot
from dvengine.log.replay import ReplayState
from dvengine.log.retirement import retired_between, retired_by_tail
from dvengine.maintenance import auto_compact as ac
from dvengine.planning.stats_table import cached_range_stats
from dvengine.protocol.actions import AddFile, DeletionVectorDescriptor, RemoveFile
from dvengine.protocol.stats import cached_stats_strings
from dvengine.read.dv_spans_cache import cached_dv_ids
from dvengine.read.footer_cache import cached_footer_paths
from dvengine.storage.file_checked_cache import FileCheckedCache
from dvengine.storage.retired_files import RetiredFiles, announce_retired, on_retired


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([tag] * len(ids))})


def _under(root: str, paths: set[str]) -> set[str]:
    return {p for p in paths if p.startswith(root + os.sep)}


def test_a_stream_with_compaction_leaves_only_live_files_in_the_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env_key(ac.CONF_MIN_NUM_FILES), "4")
    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(0, 400, 2)), "base"), root, configuration={ac.PROPERTY_AUTO_COMPACT: "true"})
    ever_stats: set[str] = set()
    ever_dvs: set[str] = set()
    seen_retired_in_cache = False
    next_new = 1
    for round_no in range(1, 25):
        updates = [(round_no * 14) % 400 // 2 * 2, (round_no * 38) % 400 // 2 * 2]
        new = [next_new, next_new + 2]
        next_new += 4
        (DeltaTable.forPath(None, root).alias("t").merge(_rows(updates + new, f"r{round_no}"), "t.id = s.id", source_alias="s")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        if round_no % 3 == 0:
            DeltaTable.forPath(None, root).delete(f"id = {updates[0] + 2}")
        DeltaTable.forPath(None, root).toArrow()  # fills footers, DV spans, stats
        snapshot = load_snapshot(root)
        live = {os.path.join(root, f.path) for f in snapshot.files}
        assert live == {os.path.normpath(u.removeprefix("file://")) for u in DeltaRsTable(root).file_uris()}
        ever_stats |= {f.stats for f in snapshot.files if f.stats}
        ever_dvs |= {f.deletion_vector.unique_id for f in snapshot.files if f.deletion_vector is not None}
        live_stats = {f.stats for f in snapshot.files if f.stats}
        live_dvs = {f.deletion_vector.unique_id for f in snapshot.files if f.deletion_vector is not None}
        footers = _under(root, cached_footer_paths())
        columns = _under(root, cached_paths())
        assert footers <= live, f"round {round_no}: footers of retired files {sorted(footers - live)}"
        assert columns <= live, f"round {round_no}: columns of retired files {sorted(columns - live)}"
        assert cached_dv_ids(snapshot.table_root) <= live_dvs
        assert (cached_stats_strings() & ever_stats) <= live_stats
        assert ({s for s in cached_range_stats() if s is not None} & ever_stats) <= live_stats
        seen_retired_in_cache |= bool(footers) and bool(columns)
    history = [c["operation"] for c in DeltaRsTable(root).history()]
    assert "OPTIMIZE" in history, "the stream never compacted: nothing was retired for good"
    assert len(ever_dvs) > 1 and len(ever_stats) > len(load_snapshot(root).files)
    assert seen_retired_in_cache  # the caches were in use all along (else the checks prove nothing)


def _add(path: str, dv: str | None = None, stats: str | None = '{"numRecords":3}') -> AddFile:
    descriptor = None if dv is None else DeletionVectorDescriptor("u", dv, 40, 1, offset=1)
    return AddFile(path=path, partition_values={}, size=10, modification_time=1, data_change=True, stats=stats,
                   deletion_vector=descriptor)


def _remove(add: AddFile) -> RemoveFile:
    return RemoveFile(path=add.path, deletion_timestamp=5, data_change=True, deletion_vector=add.deletion_vector,
                      size=add.size)


def _state(*adds: AddFile) -> ReplayState:
    state = ReplayState()
    for add in adds:
        state.files[add.key] = add
    return state


def _after(before: ReplayState, tail: list[list[object]]) -> ReplayState:
    after = ReplayState()
    after.files = dict(before.files)
    for actions in tail:
        after.apply_commit(actions)  # type: ignore[arg-type]
    return after


def test_a_new_dv_retires_the_old_dv_and_stats_but_keeps_the_path() -> None:
    old = _add("a.parquet", "dv1AAAAAAAAAAAAAAAA", '{"numRecords":3,"tightBounds":true}')
    new = _add("a.parquet", "dv2AAAAAAAAAAAAAAAA", '{"numRecords":3,"tightBounds":false}')
    before = _state(old, _add("b.parquet"))
    tail = [[_remove(old), new]]
    retired = retired_by_tail("/t", before, tail, _after(before, tail))  # type: ignore[arg-type]
    assert retired.data_paths == frozenset()
    assert retired.dv_ids == frozenset({old.deletion_vector.unique_id})  # type: ignore[union-attr]
    assert retired.stats == frozenset({old.stats})


def test_a_dv_update_with_unchanged_stats_keeps_the_stats() -> None:
    old = _add("a.parquet", "dv1AAAAAAAAAAAAAAAA", '{"numRecords":3,"tightBounds":false}')
    new = _add("a.parquet", "dv2AAAAAAAAAAAAAAAA", '{"numRecords":3,"tightBounds":false}')
    before = _state(old)
    tail = [[_remove(old), new]]
    retired = retired_by_tail("/t", before, tail, _after(before, tail))  # type: ignore[arg-type]
    assert retired.stats == frozenset() and retired.data_paths == frozenset()


def test_compaction_retires_paths_and_a_file_added_and_removed_in_one_tail_goes_too() -> None:
    a, b = _add("a.parquet", stats='{"numRecords":1}'), _add("b.parquet", "dvBAAAAAAAAAAAAAAAA", '{"numRecords":2}')
    brief = _add("c.parquet", stats='{"numRecords":7}')
    merged = _add("m.parquet", stats='{"numRecords":10}')
    before = _state(a, b)
    tail = [[brief], [_remove(a), _remove(b), _remove(brief), merged]]
    retired = retired_by_tail("/t", before, tail, _after(before, tail))  # type: ignore[arg-type]
    assert retired.data_paths == frozenset({"/t/a.parquet", "/t/b.parquet", "/t/c.parquet"})
    assert retired.dv_ids == frozenset({b.deletion_vector.unique_id})  # type: ignore[union-attr]
    assert retired.stats == frozenset({a.stats, b.stats, brief.stats})
    assert retired_between("/t", before, _after(before, tail)).data_paths == frozenset({"/t/a.parquet", "/t/b.parquet"})


def test_a_remove_added_back_in_the_same_tail_retires_nothing() -> None:
    a = _add("a.parquet")
    before = _state(a)
    tail = [[_remove(a)], [a]]
    assert not retired_by_tail("/t", before, tail, _after(before, tail))  # type: ignore[arg-type]
    assert not retired_between("/t", before, _after(before, tail))  # type: ignore[arg-type]


def test_file_checked_cache_forgets_by_tag_and_keeps_no_tag_of_an_evicted_entry(tmp_path: Path) -> None:
    files = []
    for i in range(5):
        f = tmp_path / f"f{i}"
        f.write_bytes(b"x" * 10)
        files.append(str(f))
    cache: FileCheckedCache[str, bytes] = FileCheckedCache(lambda: 100, len)
    for i, path in enumerate(files):
        assert cache.get(f"k{i}", path, lambda: b"y" * 24) == b"y" * 24
    assert len(cache) == 4 and cache.tags() == set(files[1:])  # k0 evicted by the 100-byte budget
    cache.get("k2b", files[2], lambda: b"z" * 1)  # a second entry from the same file
    cache.forget([files[2]])
    assert cache.tags() == {files[1], files[3], files[4]} and len(cache) == 3
    calls: list[int] = []
    assert cache.get("k2", files[2], lambda: calls.append(1) or b"w") == b"w" and calls == [1]
    cache.get("t", files[0], lambda: b"v", tag=("root", "dv"))
    cache.forget([("root", "dv")])
    assert ("root", "dv") not in cache.tags()


def test_announcements_reach_every_listener_and_an_empty_one_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    import dvengine.storage.retired_files as registry

    monkeypatch.setattr(registry, "_LISTENERS", [])
    heard: list[RetiredFiles] = []

    def listener(files: RetiredFiles) -> None:
        heard.append(files)

    on_retired(listener)
    on_retired(listener)  # registered once
    announce_retired(RetiredFiles("/t", frozenset(), frozenset(), frozenset()))
    announce_retired(RetiredFiles("/t", frozenset({"/t/x"}), frozenset(), frozenset()))
    assert [h.data_paths for h in heard] == [frozenset({"/t/x"})]
