"""Log replay against golden tables, with delta-rs and the golden expectations as truth.

For every golden table and every version we compare our Snapshot with what delta-rs (an
independent Rust implementation) reports: the live data files, which of them carry a deletion
vector and how many rows each DV deletes, typed partition values, protocol, and the row count
asserted by the upstream project in ``expected/<table>.json``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from dvengine.log import Snapshot, load_snapshot
from tests.conftest import GOLDEN_NAMES, GOLDEN_TABLES, load_expected

CASES = [
    (name, v)
    for name in GOLDEN_NAMES
    for v in range(len(sorted((GOLDEN_TABLES / name / "_delta_log").glob("*.json"))))
]


def _uri_to_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def _delta_rs_state(path: Path, version: int) -> dict[str, Any]:
    dt = DeltaTable(str(path), version=version)
    files = {os.path.normpath(_uri_to_path(u)) for u in dt.file_uris()}
    deleted = {
        os.path.normpath(_uri_to_path(row["filepath"])): row["selection_vector"].count(False)
        for row in pa.table(dt.deletion_vectors()).to_pylist()
    }
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    parts = {
        os.path.normpath(str(path / row["path"])): {k[len("partition.") :]: v for k, v in row.items() if k.startswith("partition.")}
        for row in adds
    }
    return {"files": files, "deleted": deleted, "parts": parts, "protocol": dt.protocol()}


def _our_state(snap: Snapshot) -> dict[str, Any]:
    root = Path(snap.table_root)
    files = {os.path.normpath(str(root / a.path)) for a in snap.files}
    deleted = {os.path.normpath(str(root / a.path)): a.deleted_row_count for a in snap.files if a.deletion_vector}
    parts = {os.path.normpath(str(root / a.path)): snap.partition_values_logical(a) for a in snap.files}
    return {"files": files, "deleted": deleted, "parts": parts}


@pytest.mark.parametrize(("name", "version"), CASES)
def test_snapshot_matches_delta_rs_and_expected(name: str, version: int) -> None:
    path = GOLDEN_TABLES / name
    snap = load_snapshot(str(path), version=version)
    ours = _our_state(snap)
    theirs = _delta_rs_state(path, version)
    assert snap.version == version
    assert ours["files"] == theirs["files"]
    assert ours["deleted"] == theirs["deleted"]
    assert ours["parts"] == theirs["parts"]
    assert snap.protocol.min_reader_version == theirs["protocol"].min_reader_version
    assert snap.protocol.min_writer_version == theirs["protocol"].min_writer_version
    assert set(snap.protocol.reader_features or ()) == set(theirs["protocol"].reader_features or ())
    expected = load_expected(name)["versions"].get(str(version))
    if expected is not None:
        assert snap.num_records == expected["row_count"]


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_latest_is_default(name: str) -> None:
    path = GOLDEN_TABLES / name
    latest = load_snapshot(str(path))
    assert latest.version == DeltaTable(str(path)).version()
    assert latest.files == load_snapshot(str(path), version=latest.version).files
    assert latest.column_mapping_mode == "none"
    assert [f.name for f in latest.schema.fields] == load_expected(name)["columns"]


def test_files_are_sorted_and_unique_by_path() -> None:
    snap = load_snapshot(str(GOLDEN_TABLES / "dv-partitioned-with-checkpoint"))
    paths = [a.path for a in snap.files]
    assert paths == sorted(paths)
    assert len(set(paths)) == len(paths)


def _comparable(snap: Snapshot) -> tuple[Any, ...]:
    # dataChange differs by design (checkpoints store false), everything else must be identical.
    files = tuple((a.path, a.deletion_vector, a.size, a.stats, dict(a.partition_values)) for a in snap.files)
    return (snap.version, snap.protocol, snap.metadata, files, dict(snap.app_transactions), snap.timestamp_ms)


def test_checkpoint_and_full_json_replay_agree(golden_copy: Any) -> None:
    original = GOLDEN_TABLES / "dv-partitioned-with-checkpoint"
    no_cp = golden_copy("dv-partitioned-with-checkpoint")
    (no_cp / "_delta_log" / "00000000000000000010.checkpoint.parquet").unlink()
    (no_cp / "_delta_log" / "_last_checkpoint").unlink()
    for version in range(16):
        from_cp = load_snapshot(str(original), version=version)
        from_json = load_snapshot(str(no_cp), version=version)
        assert _comparable(from_cp)[:-1] == _comparable(from_json)[:-1], version
        assert from_cp.timestamp_ms == from_json.timestamp_ms
        assert {r.key for r in from_cp.tombstones} == {r.key for r in from_json.tombstones}


def test_replay_keys_by_path_and_dv_id() -> None:
    """At v15 one file had its DV replaced several times: exactly one logical copy is live."""
    snap = load_snapshot(str(GOLDEN_TABLES / "dv-partitioned-with-checkpoint"))
    by_path: dict[str, int] = {}
    for add in snap.files:
        by_path[add.path] = by_path.get(add.path, 0) + 1
    assert set(by_path.values()) == {1}
    # the tombstones include the superseded (path, old DV) pairs of files still live
    live_paths = {a.path for a in snap.files}
    assert any(r.path in live_paths for r in snap.tombstones)
