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
    from dvengine.log.checkpoint_writer import _remove_row
    from dvengine.log.tombstone_rows import tombstone_table
    from dvengine.protocol.actions import RemoveFile

    def rm(path: str, ts: int) -> RemoveFile:
        return RemoveFile(path=path, deletion_timestamp=ts, data_change=True, size=10)

    def rows(table: pa.Table) -> list[tuple[str, int]]:
        return sorted((r["path"], r["deletionTimestamp"]) for r in table.column("remove").to_pylist())

    root = str(tmp_path / "t")
    clear_tombstone_rows()
    first = {(p, None): rm(p, ts) for p, ts in [("a", 100), ("b", 200), ("c", 300)]}
    assert rows(tombstone_table(root, first, CHECKPOINT_SCHEMA, _remove_row, 0)) == [("a", 100), ("b", 200), ("c", 300)]
    second = {("a", None): first[("a", None)], ("c", None): rm("c", 900), ("d", None): rm("d", 400)}  # b left, c again
    got = tombstone_table(root, second, CHECKPOINT_SCHEMA, _remove_row, 0)
    assert rows(got) == [("a", 100), ("c", 900), ("d", 400)]
    assert rows(tombstone_table(root, second, CHECKPOINT_SCHEMA, _remove_row, 350)) == [("c", 900), ("d", 400)]
    assert rows(tombstone_table(root, second, CHECKPOINT_SCHEMA, _remove_row, 0)) == rows(got)  # expiry undone
    clear_tombstone_rows()
    fresh = tombstone_table(root, second, CHECKPOINT_SCHEMA, _remove_row, 0)
    assert sorted(got.to_pylist(), key=repr) == sorted(fresh.to_pylist(), key=repr)
