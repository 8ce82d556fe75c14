"""Replay rules on small logs: column mapping (tables written by delta-rs), DV re-keying order,
txn and domainMetadata reconciliation, and many small commits after a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dvengine.log import load_snapshot, logical_to_physical, physical_to_logical
from dvengine.log.column_mapping import column_mapping_mode, physical_column_path
from dvengine.protocol.actions import (
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    action_to_line,
)


@pytest.mark.parametrize("mode", ["name", "id", "none"])
def test_partition_values_logical_under_column_mapping(tmp_path: Path, mode: str) -> None:
    data = pa.table({"Part Col": [1, 2, 2, None], "v": ["a", "b", "c", "d"], "d": ["x", "x", "y", "y"]})
    write_deltalake(str(tmp_path), data, partition_by=["Part Col", "d"], configuration={"delta.columnMapping.mode": mode})
    snap = load_snapshot(str(tmp_path))
    assert snap.column_mapping_mode == mode
    mapping = logical_to_physical(snap.schema, snap.column_mapping_mode)
    if mode != "none":
        assert mapping["Part Col"] != "Part Col"  # delta-rs assigned a physical name
        assert set(snap.files[0].partition_values) == {mapping["Part Col"], mapping["d"]}
    assert physical_to_logical(snap.schema, mode) == {v: k for k, v in mapping.items()}
    theirs = {
        row["path"]: {"Part Col": row["partition.Part Col"], "d": row["partition.d"]}
        for row in pa.table(DeltaTable(str(tmp_path)).get_add_actions(flatten=True)).to_pylist()
    }
    ours = {a.path: snap.partition_values_logical(a) for a in snap.files}
    assert ours == theirs
    assert snap.num_records == 4


def test_physical_column_path() -> None:
    from dvengine.protocol.schema import parse_schema

    schema = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {
                        "name": "s",
                        "type": {
                            "type": "struct",
                            "fields": [
                                {"name": "x", "type": "long", "nullable": True, "metadata": {"delta.columnMapping.physicalName": "col-x"}}
                            ],
                        },
                        "nullable": True,
                        "metadata": {"delta.columnMapping.physicalName": "col-s"},
                    }
                ],
            }
        )
    )
    assert physical_column_path(schema, ["S", "X"]) == ("col-s", "col-x")
    assert physical_column_path(schema, ["s", "x"], mode="none") == ("s", "x")
    from dvengine.errors import ProtocolError, UnsupportedFeatureError

    with pytest.raises(ProtocolError, match="'y'"):
        physical_column_path(schema, ["s", "y"])
    with pytest.raises(UnsupportedFeatureError, match="columnMapping"):
        column_mapping_mode({"delta.columnMapping.mode": "magic"})


# --- hand-written logs --------------------------------------------------------------------------

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]})
PROTOCOL = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "domainMetadata"))
METADATA = Metadata(id="t", schema_string=SCHEMA, configuration={"delta.enableDeletionVectors": "true"})


def _dv(name: str, card: int) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", name.ljust(20, "0"), 36, card, offset=1)


def _add(path: str, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path, {}, 100, 1, stats='{"numRecords":10}', deletion_vector=dv)


def _write(table: Path, version: int, actions: list[Any]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [action_to_line(CommitInfo({"timestamp": 1000 + version}))] + [action_to_line(a) for a in actions]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("add_first", [True, False])
def test_dv_replacement_order_within_commit_does_not_matter(tmp_path: Path, add_first: bool) -> None:
    a0 = _add("a.parquet")
    _write(tmp_path, 0, [PROTOCOL, METADATA, a0, _add("b.parquet")])
    a1 = _add("a.parquet", _dv("one", 2))
    pair = [a1, a0.to_remove(5)]
    _write(tmp_path, 1, pair if add_first else pair[::-1])
    a2 = _add("a.parquet", _dv("two", 3))
    pair = [a2, a1.to_remove(6)]
    _write(tmp_path, 2, pair if add_first else pair[::-1])
    snap = load_snapshot(str(tmp_path))
    assert [(f.path, f.deleted_row_count) for f in snap.files] == [("a.parquet", 3), ("b.parquet", 0)]
    assert {r.key for r in snap.tombstones} == {a0.key, a1.key}
    assert snap.num_records == 17
    # a plain remove of the current logical file retires it
    _write(tmp_path, 3, [a2.to_remove(7)])
    assert [f.path for f in load_snapshot(str(tmp_path)).files] == ["b.parquet"]


def test_remove_of_a_different_dv_does_not_retire_the_live_file(tmp_path: Path) -> None:
    live = _add("a.parquet", _dv("new", 2))
    _write(tmp_path, 0, [PROTOCOL, METADATA, live])
    _write(tmp_path, 1, [RemoveFile("a.parquet", 5, deletion_vector=_dv("old", 1))])
    assert load_snapshot(str(tmp_path)).files == (live,)


def test_readd_clears_tombstone_and_num_records_none_without_stats(tmp_path: Path) -> None:
    a = AddFile("a.parquet", {}, 100, 1)
    _write(tmp_path, 0, [PROTOCOL, METADATA, a])
    _write(tmp_path, 1, [a.to_remove(5)])
    _write(tmp_path, 2, [a])
    snap = load_snapshot(str(tmp_path))
    assert snap.files == (a,) and snap.tombstones == ()
    assert snap.num_records is None


def test_txn_and_domain_metadata(tmp_path: Path) -> None:
    _write(tmp_path, 0, [PROTOCOL, METADATA, Txn("app", 1), DomainMetadata("d1", "{}"), DomainMetadata("d2", "{}")])
    _write(tmp_path, 1, [Txn("app", 2, 99), Txn("other", 7), DomainMetadata("d1", "{}", removed=True)])
    snap = load_snapshot(str(tmp_path))
    assert snap.app_transactions == {"app": Txn("app", 2, 99), "other": Txn("other", 7)}
    assert set(snap.domain_metadata) == {"d2"}
    assert load_snapshot(str(tmp_path), version=0).app_transactions == {"app": Txn("app", 1)}


def test_metadata_and_protocol_latest_wins(tmp_path: Path) -> None:
    _write(tmp_path, 0, [Protocol(1, 2), METADATA])
    new_meta = Metadata(id="t", schema_string=SCHEMA, configuration={"k": "v"})
    _write(tmp_path, 1, [PROTOCOL, new_meta])
    snap = load_snapshot(str(tmp_path))
    assert snap.protocol == PROTOCOL and snap.configuration == {"k": "v"}
    assert load_snapshot(str(tmp_path), version=0).protocol == Protocol(1, 2)


def test_many_small_commits_after_a_checkpoint(golden_copy: Any) -> None:
    """300 commits each replacing one file's DV: replay stays exact (no timing asserted)."""
    table = golden_copy("dv-partitioned-with-checkpoint")
    snap = load_snapshot(str(table))
    current = {a.path: a for a in snap.files}
    paths = sorted(current)
    for i in range(300):
        version = 16 + i
        path = paths[i % len(paths)]
        old = current[path]
        new = AddFile(
            path, old.partition_values, old.size, old.modification_time, stats=old.stats, deletion_vector=_dv(f"v{version}", 1)
        )
        _write(table, version, [old.to_remove(version), new] if i % 2 else [new, old.to_remove(version)])
        current[path] = new
    final = load_snapshot(str(table))
    assert final.version == 315
    assert {a.key for a in final.files} == {a.key for a in current.values()}
