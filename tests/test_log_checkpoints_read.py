"""Reading checkpoints in every layout, and falling back when one is unusable.

The truth is the state obtained by replaying the golden table's JSON commits from version 0
(which test_log_golden checks against delta-rs); each checkpoint layout built here from the
golden Delta Spark checkpoint must give the same live files.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvengine.log import Snapshot, clear_snapshot_cache, load_snapshot
from tests.conftest import copy_golden

TABLE = "dv-partitioned-with-checkpoint"
CP = "00000000000000000010.checkpoint.parquet"


def _files(snap: Snapshot) -> set[tuple[Any, ...]]:
    return {(a.path, a.deletion_vector, a.size, a.stats) for a in snap.files}


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> dict[int, set[tuple[Any, ...]]]:
    table = copy_golden(TABLE, tmp_path_factory.mktemp("truth"))
    (table / "_delta_log" / CP).unlink()
    (table / "_delta_log" / "_last_checkpoint").unlink()
    return {v: _files(load_snapshot(str(table), version=v)) for v in (10, 12, 15)}


def _only_checkpoint_can_answer(table: Path) -> None:
    """Delete commits 0..9 so versions >= 10 must come from a checkpoint."""
    for v in range(10):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    # Committed files never change under a live process; this damage stands for a fresh one.
    clear_snapshot_cache()


def test_stale_last_checkpoint_pointing_at_missing_file(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    (table / "_delta_log" / "_last_checkpoint").write_text('{"version": 7, "size": 3}')
    assert _files(load_snapshot(str(table))) == truth[15]


def test_last_checkpoint_pointing_at_older_version(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    (table / "_delta_log" / "_last_checkpoint").write_text('{"version": 0, "size": 3}')
    _only_checkpoint_can_answer(table)
    assert _files(load_snapshot(str(table))) == truth[15]


@pytest.mark.parametrize("content", ["", "{not json", "[]", '{"size": 3}'])
def test_garbage_last_checkpoint_is_ignored(golden_copy: Any, truth: dict[int, Any], content: str) -> None:
    table = golden_copy(TABLE)
    (table / "_delta_log" / "_last_checkpoint").write_text(content)
    assert _files(load_snapshot(str(table))) == truth[15]


def test_missing_last_checkpoint_still_uses_checkpoint(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    (table / "_delta_log" / "_last_checkpoint").unlink()
    _only_checkpoint_can_answer(table)
    assert _files(load_snapshot(str(table))) == truth[15]


def test_corrupt_checkpoint_falls_back_to_json_replay(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    path = table / "_delta_log" / CP
    path.write_bytes(path.read_bytes()[:100])
    assert _files(load_snapshot(str(table))) == truth[15]
    assert _files(load_snapshot(str(table), version=10)) == truth[10]


def test_checkpoint_without_protocol_is_skipped(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    path = table / "_delta_log" / CP
    t = pq.read_table(path)
    mask = pa.array([row is None for row in t.column("protocol").to_pylist()])
    pq.write_table(t.filter(mask), path)
    assert _files(load_snapshot(str(table))) == truth[15]


def test_multi_part_checkpoint(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    log = table / "_delta_log"
    t = pq.read_table(log / CP)
    (log / CP).unlink()
    half = t.num_rows // 2
    pq.write_table(t.slice(0, half), log / "00000000000000000010.checkpoint.0000000001.0000000002.parquet")
    pq.write_table(t.slice(half), log / "00000000000000000010.checkpoint.0000000002.0000000002.parquet")
    (log / "_last_checkpoint").write_text('{"version": 10, "size": 30, "parts": 2}')
    _only_checkpoint_can_answer(table)
    assert _files(load_snapshot(str(table))) == truth[15]
    assert _files(load_snapshot(str(table), version=10)) == truth[10]


def test_incomplete_multi_part_checkpoint_is_ignored(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    log = table / "_delta_log"
    t = pq.read_table(log / CP)
    (log / CP).unlink()
    # only part 1 of 2 exists: using it would lose half of the files
    pq.write_table(t.slice(0, 10), log / "00000000000000000010.checkpoint.0000000001.0000000002.parquet")
    assert _files(load_snapshot(str(table))) == truth[15]
    _only_checkpoint_can_answer(table)
    from dvengine.errors import VersionNotFoundError

    with pytest.raises(VersionNotFoundError):
        load_snapshot(str(table))


def _write_v2(table: Path, fmt: str) -> None:
    """A V2 checkpoint: table-level actions in the top file, file actions in one sidecar."""
    log = table / "_delta_log"
    t = pq.read_table(log / CP)
    (log / CP).unlink()
    (log / "_last_checkpoint").unlink()
    sidecar_name = f"{uuid.uuid4()}.parquet"
    (log / "_sidecars").mkdir()
    is_file_action = pa.array([a is not None or r is not None for a, r in zip(t.column("add").to_pylist(), t.column("remove").to_pylist())])
    pq.write_table(t.select(["add", "remove"]).filter(is_file_action), log / "_sidecars" / sidecar_name)
    size = (log / "_sidecars" / sidecar_name).stat().st_size
    top_rows = [row for row in t.to_pylist() if row["add"] is None and row["remove"] is None]
    actions: list[dict[str, Any]] = [{"checkpointMetadata": {"version": 10}}]
    for row in top_rows:
        for key in ("protocol", "metaData", "txn", "domainMetadata"):
            if row.get(key) is not None:
                value = row[key]
                if key == "metaData":
                    value = dict(value, configuration=dict(value["configuration"]), format={"provider": "parquet", "options": {}})
                actions.append({key: value})
    actions.append({"sidecar": {"path": sidecar_name, "sizeInBytes": size, "modificationTime": 0}})
    name = f"00000000000000000010.checkpoint.{uuid.uuid4()}.{fmt}"
    if fmt == "json":
        (log / name).write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    else:
        schema = pa.schema(
            [
                pa.field("checkpointMetadata", pa.struct([pa.field("version", pa.int64())])),
                t.schema.field("protocol"),
                t.schema.field("metaData"),
                pa.field(
                    "sidecar",
                    pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]),
                ),
            ]
        )
        rows = [{k: a.get(k) for k in schema.names} for a in actions]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), log / name)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_v2_checkpoint_with_sidecar(golden_copy: Any, truth: dict[int, Any], fmt: str) -> None:
    table = golden_copy(TABLE)
    _write_v2(table, fmt)
    _only_checkpoint_can_answer(table)
    assert _files(load_snapshot(str(table))) == truth[15]
    assert _files(load_snapshot(str(table), version=10)) == truth[10]


def test_v2_checkpoint_with_missing_sidecar_is_corrupt(golden_copy: Any) -> None:
    from dvengine.errors import LogCorruptedError

    table = golden_copy(TABLE)
    _write_v2(table, "json")
    _only_checkpoint_can_answer(table)
    for f in (table / "_delta_log" / "_sidecars").iterdir():
        f.unlink()
    with pytest.raises(LogCorruptedError, match="sidecar"):
        load_snapshot(str(table))


def test_stats_parsed_used_when_stats_string_missing(golden_copy: Any, truth: dict[int, Any]) -> None:
    table = golden_copy(TABLE)
    log = table / "_delta_log"
    original = pq.read_table(log / CP)
    rows = original.to_pylist()
    for row in rows:
        if row["add"] is not None:
            stats = json.loads(row["add"]["stats"])
            row["add"]["stats_parsed"] = {"numRecords": stats["numRecords"]}
            row["add"]["stats"] = None
    add_type = original.schema.field("add").type
    new_add = pa.struct([*list(add_type), pa.field("stats_parsed", pa.struct([("numRecords", pa.int64())]))])
    schema = original.schema.set(original.schema.get_field_index("add"), pa.field("add", new_add))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), log / CP)
    _only_checkpoint_can_answer(table)
    snap = load_snapshot(str(table), version=10)
    assert {a.path for a in snap.files} == {f[0] for f in truth[10]}
    assert snap.num_records == 40
