"""Checkpoints we write must be read back identically by dvengine, delta-rs and DuckDB.

Every interop test deletes the JSON commits up to the checkpoint, so the table state can only
come from the checkpoint file we wrote.

DuckDB incantation (no network here): the pip package ``duckdb-ext-delta`` ships the extension
binary at ``site-packages/duckdb_ext/extensions/v<duckdb version>/<platform>/delta.duckdb_extension``;
pointing DuckDB's ``extension_directory`` at ``site-packages/duckdb_ext/extensions`` makes a
plain ``LOAD delta`` work (``INSTALL``/``LOAD delta`` without it tries to download and fails).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from dvengine.errors import InvalidArgumentError, VersionNotFoundError
from dvengine.log import Snapshot, load_snapshot
from dvengine.log.checkpoint_writer import (
    cleanup_expired_logs,
    last_checkpoint_json,
    maybe_checkpoint,
    parse_interval_ms,
    write_checkpoint,
)
from dvengine.protocol.actions import CommitInfo, Metadata, Protocol, action_to_line
from tests.conftest import GOLDEN_NAMES, GOLDEN_TABLES, load_expected

DAY_MS = 86_400_000


def _duckdb() -> duckdb.DuckDBPyConnection:
    import duckdb_ext  # type: ignore[import-untyped]

    con = duckdb.connect()
    con.execute(f"SET extension_directory='{os.path.join(next(iter(duckdb_ext.__path__)), 'extensions')}'")
    con.execute("LOAD delta")
    return con


def _comparable(snap: Snapshot) -> tuple[Any, ...]:
    files = tuple((a.path, a.deletion_vector, a.size, a.stats, dict(a.partition_values), a.tags) for a in snap.files)
    return (snap.version, snap.protocol, snap.metadata, files, dict(snap.app_transactions), dict(snap.domain_metadata))


def _checkpoint_only(table: Path, keep_tombstones: bool = True) -> Snapshot:
    before = load_snapshot(str(table))
    write_checkpoint(before, now_ms=before.timestamp_ms if keep_tombstones else None)
    log = table / "_delta_log"
    for p in log.iterdir():
        if p.name.endswith(".json") or (p.name.endswith(".checkpoint.parquet") and not p.name.startswith(f"{before.version:020d}")):
            p.unlink()
    return before


def _sorted_rows(table: pa.Table, columns: list[str]) -> list[list[Any]]:
    return sorted(([row[c] for c in columns] for row in table.to_pylist()), key=repr)


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_interop_checkpoint_only(golden_copy: Any, name: str) -> None:
    table = golden_copy(name)
    before = _checkpoint_only(table)
    expected = load_expected(name)
    columns = expected["columns"]
    rows = sorted(expected["versions"][str(before.version)]["rows"], key=repr)

    after = load_snapshot(str(table))
    assert _comparable(after) == _comparable(before)
    assert {r.key for r in after.tombstones} == {r.key for r in before.tombstones}

    dt = DeltaTable(str(table))
    assert dt.version() == before.version
    assert {os.path.normpath(u.removeprefix("file://")) for u in dt.file_uris()} == {
        os.path.normpath(str(table / a.path)) for a in before.files
    }
    result = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
    assert _sorted_rows(result, columns) == rows

    duck = _duckdb().execute(f"select * from delta_scan('{table}')").fetch_arrow_table()
    assert _sorted_rows(duck, columns) == rows


def _parquet_columns(path: Path) -> dict[str, tuple[str, str]]:
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        col = schema.column(i)
        if "_parsed" not in col.path:
            out[col.path] = (col.physical_type, str(col.logical_type))
    return out


def test_schema_matches_delta_spark_checkpoint(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    path = Path(write_checkpoint(load_snapshot(str(table))))
    golden = GOLDEN_TABLES / "dv-partitioned-with-checkpoint" / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    assert _parquet_columns(path) == _parquet_columns(golden)


def test_checkpoint_content_and_last_checkpoint(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    snap = load_snapshot(str(table))
    path = write_checkpoint(snap, now_ms=snap.timestamp_ms)
    t = pq.read_table(path)
    adds = [a for a in t.column("add").to_pylist() if a is not None]
    removes = [r for r in t.column("remove").to_pylist() if r is not None]
    assert len(adds) == len(snap.files) and not any(a["dataChange"] for a in adds)
    assert len(removes) == len(snap.tombstones)
    hint = last_checkpoint_json(str(table))
    assert hint == {"version": 15, "size": t.num_rows, "sizeInBytes": os.path.getsize(path), "numOfAddFiles": 15}
    # an older checkpoint never moves _last_checkpoint backwards, and is used for its version
    at_12 = load_snapshot(str(table), version=12)
    write_checkpoint(at_12)
    assert last_checkpoint_json(str(table))["version"] == 15  # type: ignore[index]
    for v in range(12):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    assert _comparable(load_snapshot(str(table), version=12)) == _comparable(at_12)


def test_expired_tombstones_are_dropped(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    snap = load_snapshot(str(table))
    newest_delete = max(r.deletion_timestamp or 0 for r in snap.tombstones)
    path = write_checkpoint(snap, now_ms=newest_delete + 7 * DAY_MS)  # exactly at the boundary: expired
    assert all(r is None for r in pq.read_table(path).column("remove").to_pylist())
    path = write_checkpoint(snap, now_ms=newest_delete + 7 * DAY_MS - 1)
    assert sum(r is not None for r in pq.read_table(path).column("remove").to_pylist()) >= 1


# --- maybe_checkpoint and cleanup --------------------------------------------------------------

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})


def _synthetic(table: Path, versions: int, config: dict[str, str]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for v in range(versions):
        actions: list[Any] = [CommitInfo({"timestamp": 1000 + v})]
        if v == 0:
            actions += [Protocol(1, 2), Metadata("id", SCHEMA, configuration=config)]
        (log / f"{v:020d}.json").write_text("\n".join(action_to_line(a) for a in actions) + "\n")


def test_maybe_checkpoint_follows_interval(tmp_path: Path) -> None:
    _synthetic(tmp_path, 8, {"delta.checkpointInterval": "3"})
    assert not maybe_checkpoint(str(tmp_path), 0)
    assert not maybe_checkpoint(str(tmp_path), 4)
    assert maybe_checkpoint(str(tmp_path), 6)
    assert (tmp_path / "_delta_log" / "00000000000000000006.checkpoint.parquet").exists()
    assert last_checkpoint_json(str(tmp_path))["version"] == 6  # type: ignore[index]
    # fresh files: nothing expired, nothing cleaned
    assert (tmp_path / "_delta_log" / "00000000000000000000.json").exists()


def test_maybe_checkpoint_default_interval(tmp_path: Path) -> None:
    _synthetic(tmp_path, 11, {})
    assert not maybe_checkpoint(str(tmp_path), 5)
    assert maybe_checkpoint(str(tmp_path), 10)


def _age(table: Path, versions: range, age_ms: int, now_ms: int) -> None:
    for v in versions:
        for p in (table / "_delta_log").glob(f"{v:020d}.*"):
            t = (now_ms - age_ms) / 1000
            os.utime(p, (t, t))


def test_cleanup_keeps_everything_needed_inside_retention(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    now = int(time.time() * 1000)
    write_checkpoint(load_snapshot(str(table)))  # checkpoint at 15 too
    _age(table, range(13), 40 * DAY_MS, now)  # 0..12 expired, 13..15 inside 30 days
    deleted = cleanup_expired_logs(str(table), now_ms=now)
    # version 13 is the oldest retained; it needs checkpoint 10 and commits 11..13
    assert sorted(Path(p).name for p in deleted) == [f"{v:020d}.json" for v in range(10)]
    for v in (10, 13, 15):
        assert load_snapshot(str(table), version=v).version == v
    with pytest.raises(VersionNotFoundError):
        load_snapshot(str(table), version=9)


def test_cleanup_all_expired_keeps_latest_checkpoint(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    now = int(time.time() * 1000)
    expected = load_snapshot(str(table))
    write_checkpoint(expected)
    _age(table, range(16), 40 * DAY_MS, now)
    deleted = {Path(p).name for p in cleanup_expired_logs(str(table), now_ms=now)}
    assert "00000000000000000010.checkpoint.parquet" in deleted and "00000000000000000014.json" in deleted
    assert "00000000000000000015.json" not in deleted
    assert _comparable(load_snapshot(str(table))) == _comparable(expected)


def test_cleanup_respects_table_properties(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    _synthetic(tmp_path / "off", 11, {"delta.enableExpiredLogCleanup": "false"})
    assert maybe_checkpoint(str(tmp_path / "off"), 10)
    _age(tmp_path / "off", range(11), 400 * DAY_MS, now)
    assert cleanup_expired_logs(str(tmp_path / "off"), now_ms=now) == []

    _synthetic(tmp_path / "short", 11, {"delta.logRetentionDuration": "interval 2 days"})
    assert maybe_checkpoint(str(tmp_path / "short"), 10)
    _age(tmp_path / "short", range(11), 3 * DAY_MS, now)
    assert len(cleanup_expired_logs(str(tmp_path / "short"), now_ms=now)) == 10
    _synthetic(tmp_path / "long", 11, {"delta.logRetentionDuration": "interval 4 days"})
    assert maybe_checkpoint(str(tmp_path / "long"), 10)
    _age(tmp_path / "long", range(11), 3 * DAY_MS, now)
    assert cleanup_expired_logs(str(tmp_path / "long"), now_ms=now) == []


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 30 days", 30 * DAY_MS),
        ("interval 1 week", 7 * DAY_MS),
        ("168 hours", 7 * DAY_MS),
        ("interval 7 days", 7 * DAY_MS),
        ("INTERVAL 1 DAY 12 HOURS", DAY_MS * 3 // 2),
        ("interval 90 minutes", 90 * 60_000),
        ("2 weeks", 14 * DAY_MS),
        ("interval 0 seconds", 0),
    ],
)
def test_parse_interval(text: str, ms: int) -> None:
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize("text", ["", "interval", "interval 1 month", "3 years", "7 parsecs", "-1 day", "7 days junk"])
def test_parse_interval_rejects(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_interval_ms(text)
