"""Checkpoints written with incrementally encoded removes (dvengine/log/tombstone_rows.py) hold
exactly the tombstones a replay of the JSON log says they must, and the post-commit log cleanup
skips only when nothing can have expired (dvengine/log/cleanup.py).

The expected tombstones are computed here from the commit files themselves (a remove of a
(path, DV) pair not added back later), independently of dvengine's replay.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder

import dvengine
from dvengine import DeltaTable
from dvengine.log import clear_snapshot_cache, load_snapshot
from dvengine.log.checkpoint_writer import checkpoint_bytes, maybe_checkpoint
from dvengine.log.cleanup import cleanup_expired_logs, expired_logs_possible
from dvengine.log.tombstone_rows import clear_tombstone_rows

DAY_MS = 86_400_000


def _dv_id(dv: dict[str, Any] | None) -> str | None:
    if dv is None:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{dv['offset']}" if dv.get("offset") is not None else "")


def _expected_tombstones(table: Path, version: int) -> set[tuple[str, str | None]]:
    tombs: set[tuple[str, str | None]] = set()
    for v in range(version + 1):
        for line in (table / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "remove" in action:
                r = action["remove"]
                tombs.add((r["path"], _dv_id(r.get("deletionVector"))))
            elif "add" in action:
                a = action["add"]
                tombs.discard((a["path"], _dv_id(a.get("deletionVector"))))
    return tombs


def _checkpoint_removes(table: Path, version: int) -> list[tuple[str, str | None]]:
    rows = pq.read_table(table / "_delta_log" / f"{version:020d}.checkpoint.parquet").column("remove").to_pylist()
    return [(r["path"], _dv_id(r["deletionVector"])) for r in rows if r is not None]


def _stream(table: Path, rounds: int) -> None:
    """Appends and DV deletes, a checkpoint every 3 commits (interval property)."""
    dvengine.write(pa.table({"id": list(range(40))}), str(table),
                   configuration={"delta.checkpointInterval": "3"})
    for r in range(rounds):
        dvengine.write(pa.table({"id": [1000 + r]}), str(table), mode="append")
        DeltaTable.forPath(None, str(table)).delete(f"id = {r} OR id = {1000 + r - 1}")
    dvengine.wait_for_checkpoints()  # written on a background thread


def test_incremental_checkpoints_hold_exactly_the_logs_tombstones(tmp_path: Path) -> None:
    table = tmp_path / "t"
    clear_tombstone_rows()
    _stream(table, 12)  # 25 commits: checkpoints 3, 6, ..., 24, each reusing the previous rows
    checkpoints = sorted(int(p.name[:20]) for p in (table / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoints == list(range(3, 25, 3))
    for v in checkpoints:
        removes = _checkpoint_removes(table, v)
        assert len(removes) == len(set(removes))
        assert set(removes) == _expected_tombstones(table, v), v
    assert len(_expected_tombstones(table, 24)) > 12  # the stream retired files and DVs
    # readers that start from the last checkpoint see the log's rows
    expected = sorted(set(range(12, 40)) | {1011})
    rs = QueryBuilder().register("t", RsTable(str(table))).execute("SELECT id FROM t ORDER BY id").read_all()
    assert rs.column("id").to_pylist() == expected
    clear_snapshot_cache()
    assert sorted(DeltaTable.forPath(None, str(table)).toArrow().column("id").to_pylist()) == expected


def test_incremental_removes_equal_a_fresh_encoding_and_follow_expiry(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _stream(table, 6)
    snapshot = load_snapshot(str(table))
    now = int(time.time() * 1000)

    def removes(data: bytes) -> list[Any]:
        return sorted((r for r in pq.read_table(pa.BufferReader(data)).column("remove").to_pylist() if r), key=repr)

    cached, n_cached, _ = checkpoint_bytes(snapshot, now_ms=now)  # reuses the rows of checkpoint 12
    clear_tombstone_rows()
    fresh, n_fresh, _ = checkpoint_bytes(snapshot, now_ms=now)
    assert removes(cached) == removes(fresh) and n_cached == n_fresh
    assert len(removes(fresh)) == len(_expected_tombstones(table, snapshot.version)) > 0
    # past the 7-day retention every tombstone is dropped, and the next checkpoint brings them back
    later, _, _ = checkpoint_bytes(snapshot, now_ms=now + 8 * DAY_MS)
    assert removes(later) == []
    again, _, _ = checkpoint_bytes(snapshot, now_ms=now)
    assert removes(again) == removes(fresh)


def test_post_commit_cleanup_is_skipped_only_while_nothing_can_have_expired(tmp_path: Path) -> None:
    table = tmp_path / "t"
    dvengine.write(pa.table({"id": [1]}), str(table), configuration={"delta.logRetentionDuration": "interval 2 days"})
    for i in range(10):
        dvengine.write(pa.table({"id": [i]}), str(table), mode="append")  # version 10 checkpoints and cleans
    dvengine.wait_for_checkpoints()  # on a background thread
    config = load_snapshot(str(table)).configuration
    now = int(time.time() * 1000)
    assert not expired_logs_possible(str(table), config, now_ms=now)
    assert expired_logs_possible(str(table), config, now_ms=now + 3 * DAY_MS)
    assert expired_logs_possible(str(tmp_path / "never-cleaned"), config, now_ms=now)
    # files aged behind the process's back: an explicit cleanup always lists, and deletes them
    for v in range(10):
        for p in (table / "_delta_log").glob(f"{v:020d}.*"):
            t = (now - 3 * DAY_MS) / 1000
            os.utime(p, (t, t))
    # the hook trusts what this process saw (the blind spot named in expired_logs_possible) ...
    assert maybe_checkpoint(str(table), 10, configuration=config)
    assert (table / "_delta_log" / f"{0:020d}.json").exists()
    deleted = cleanup_expired_logs(str(table), now_ms=now)  # ... an explicit cleanup always lists
    assert sorted(Path(p).name for p in deleted) == [f"{v:020d}.json" for v in range(10)]
    assert sorted(DeltaTable.forPath(None, str(table)).toArrow().column("id").to_pylist()) == [0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_tombstone_rows_follow_keys_leaving_returning_and_re_removed(tmp_path: Path) -> None:
    """Unit check of the cache's update rules against a from-scratch encoding: a key that left is
    dropped, a key removed again (another RemoveFile, later timestamp) is re-encoded, expiry is a
    filter that a later call with an earlier cutoff undoes."""
    from dvengine.log.checkpoint_schema import CHECKPOINT_SCHEMA
    from dvengine.log.tombstone_rows import tombstone_table
    from dvengine.log.tombstones import tombstone_bytes
    from dvengine.protocol.actions import RemoveFile

    def rm(path: str, ts: int) -> bytes:
        return tombstone_bytes(RemoveFile(path=path, deletion_timestamp=ts, data_change=True, size=10))

    def rows(table: pa.Table) -> list[tuple[str, int]]:
        return sorted((r["path"], r["deletionTimestamp"]) for r in table.column("remove").to_pylist())

    root = str(tmp_path / "t")
    clear_tombstone_rows()
    first = {f"{p}\x00": rm(p, ts) for p, ts in [("a", 100), ("b", 200), ("c", 300)]}
    assert rows(tombstone_table(root, first, CHECKPOINT_SCHEMA, 0)) == [("a", 100), ("b", 200), ("c", 300)]
    second = {"a\x00": first["a\x00"], "c\x00": rm("c", 900), "d\x00": rm("d", 400)}  # b left, c again
    got = tombstone_table(root, second, CHECKPOINT_SCHEMA, 0)
    assert rows(got) == [("a", 100), ("c", 900), ("d", 400)]
    assert rows(tombstone_table(root, second, CHECKPOINT_SCHEMA, 350)) == [("c", 900), ("d", 400)]
    assert rows(tombstone_table(root, second, CHECKPOINT_SCHEMA, 0)) == rows(got)  # expiry undone
    clear_tombstone_rows()
    fresh = tombstone_table(root, second, CHECKPOINT_SCHEMA, 0)
    assert sorted(got.to_pylist(), key=repr) == sorted(fresh.to_pylist(), key=repr)


def _varied_removes() -> list[Any]:
    from dvengine.protocol.actions import DeletionVectorDescriptor, RemoveFile

    dv_u = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 34, 3, offset=1, max_row_index=99)
    dv_i = DeletionVectorDescriptor("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", 0, 2)
    return [
        RemoveFile(path="a.parquet", deletion_timestamp=5, data_change=True, extended_file_metadata=True,
                   partition_values={"p": "x", "q": None}, size=10, stats='{"numRecords":3}', tags={"t": "1"},
                   deletion_vector=dv_u, base_row_id=7, default_row_commit_version=2),
        RemoveFile(path="b%20c.parquet", deletion_timestamp=None, data_change=False),
        RemoveFile(path="d.parquet", deletion_timestamp=9, extended_file_metadata=False, partition_values={},
                   size=0, deletion_vector=dv_i),
    ]


def test_tombstone_rows_are_untracked_and_encode_as_the_dict_encoder_did() -> None:
    """The replay state's tombstones (dvengine/log/tombstones.py) give back the same actions,
    leave the garbage collector nothing to track, and encode to the rows the per-dict encoder
    (``_remove_row`` and ``pa.Table.from_pylist``, the V2 writer's path) produces."""
    import gc

    from dvengine.log.checkpoint_schema import REMOVE
    from dvengine.log.checkpoint_writer import _remove_row
    from dvengine.log.replay import ReplayState
    from dvengine.log.tombstones import remove_column, to_remove, tombstone_rows

    removes = _varied_removes()
    state = ReplayState()
    state.apply_commit(removes)
    # One tracked TombstoneMap per state; the dicts holding the tombstones are not tracked, nor
    # are the snapshot cache's copies' (tombstone_map.py), nor the checkpoint writer's flat dict.
    copy = state.tombstones.copy()
    copy.discard_all([next(iter(copy))])
    for tombstones in (state.tombstones, copy):
        assert not gc.is_tracked(tombstones._base) and not gc.is_tracked(tombstones._overlay)
        assert not gc.is_tracked(tombstones.to_dict())
    rows = tombstone_rows(state.tombstones[k] for k in sorted(state.tombstones))
    assert [to_remove(row) for row in rows] == sorted(removes, key=lambda r: r.path)
    expected = pa.array([_remove_row(r) for r in removes], REMOVE)
    assert remove_column(rows).to_pylist() == expected.to_pylist()
    assert remove_column(rows).equals(expected.cast(REMOVE))


def test_checkpoint_equals_a_from_scratch_dict_encoding_of_the_snapshot(tmp_path: Path) -> None:
    """The classic checkpoint written with cached, columnar removes holds the same rows as one
    built from the snapshot's actions one dict per row (``split_rows``, as the V2 writer does)."""
    from dvengine.log.checkpoint_writer import checkpoint_schema_for, split_rows

    table = tmp_path / "t"
    clear_tombstone_rows()
    _stream(table, 7)  # checkpoints 3..12 reuse encoded rows; the snapshot cache carries tombstones
    DeltaTable.forPath(None, str(table)).delete("id = 20")
    snapshot = load_snapshot(str(table))
    now = int(time.time() * 1000)
    data, n_actions, n_adds = checkpoint_bytes(snapshot, now_ms=now)
    table_rows, file_rows = split_rows(snapshot, now)
    scratch = pa.Table.from_pylist(table_rows + file_rows, schema=checkpoint_schema_for(snapshot))
    written = pq.read_table(pa.BufferReader(data))
    assert written.schema.equals(scratch.schema)
    assert sorted(written.to_pylist(), key=repr) == sorted(scratch.to_pylist(), key=repr)
    assert n_actions == scratch.num_rows and n_adds == len(snapshot.files)
    assert sum(1 for r in file_rows if "remove" in r) == len(_expected_tombstones(table, snapshot.version)) > 5
