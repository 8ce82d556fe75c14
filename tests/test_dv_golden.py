"""Decode every DV of the golden tables (written by Delta Spark / Databricks) and check them
against the tables' expected rows.

The truth is the upstream projects' expected contents (``golden/expected``), not our encoder:
for each version, the Parquet rows minus the DV'd row indexes of the live files must equal the
expected rows. Log replay here is a deliberately tiny, independent one (JSON commits and the
v10 checkpoint, keyed by (path, DV unique id)), so this test does not depend on dvengine.log.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import GOLDEN_TABLES, load_expected
from pyroaring import BitMap64

from dvengine.dv import absolute_dv_path, dv_file_relative_path, load_deletion_vector, read_dv_from_file_bytes
from dvengine.protocol.actions import DeletionVectorDescriptor
from dvengine.storage.logstore import resolve_data_path

DV_TABLES = ["basic-dv-no-checkpoint", "dv-partitioned-with-checkpoint", "kernel-table-with-dv-small"]
ALL_TABLES = [*DV_TABLES, "kernel-table-without-dv-small"]


def _commits(table: Path) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    for f in sorted((table / "_delta_log").glob("*.json")):
        with open(f) as fh:
            yield int(f.stem), [json.loads(line) for line in fh if line.strip()]


def _file_actions(table: Path) -> Iterator[dict[str, Any]]:
    for _, actions in _commits(table):
        for a in actions:
            body = a.get("add") or a.get("remove")
            if body is not None:
                yield body


def _key(body: dict[str, Any]) -> tuple[str, str | None]:
    dv = body.get("deletionVector")
    return body["path"], None if dv is None else DeletionVectorDescriptor.from_json(dv).unique_id


def _replay(live: dict[tuple[str, str | None], dict[str, Any]], actions: list[dict[str, Any]]) -> None:
    for a in actions:
        if "add" in a:
            live[_key(a["add"])] = a["add"]
        elif "remove" in a:
            live.pop(_key(a["remove"]), None)


def _num_records(add: dict[str, Any]) -> int:
    return int(json.loads(add["stats"])["numRecords"])


def _partition_columns(table: Path) -> list[str]:
    for _, actions in _commits(table):
        for a in actions:
            if "metaData" in a:
                return list(a["metaData"]["partitionColumns"])
    raise AssertionError("no metaData")


def _rows_of(table: Path, live: dict[tuple[str, str | None], dict[str, Any]], columns: list[str]) -> list[list[Any]]:
    part_cols = _partition_columns(table)
    rows: list[list[Any]] = []
    for add in live.values():
        data = pq.read_table(resolve_data_path(str(table), add["path"])).to_pylist()
        assert len(data) == _num_records(add), "numRecords must be the physical row count"
        deleted = BitMap64()
        if add.get("deletionVector"):
            dv = DeletionVectorDescriptor.from_json(add["deletionVector"])
            deleted = load_deletion_vector(str(table), dv, num_records=len(data))
        for i, record in enumerate(data):
            if i in deleted:
                continue
            row = []
            for c in columns:
                if c in part_cols:
                    row.append(int(add["partitionValues"][c]))
                else:
                    row.append(record[c])
            rows.append(row)
    return sorted(rows)


@pytest.mark.parametrize("name", ALL_TABLES)
def test_every_expected_version_matches_rows_minus_dv(name: str) -> None:
    table = GOLDEN_TABLES / name
    expected = load_expected(name)
    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    checked = 0
    for version, actions in _commits(table):
        _replay(live, actions)
        want = expected["versions"].get(str(version))
        if want is None:
            continue
        got = _rows_of(table, live, expected["columns"])
        assert len(got) == want["row_count"]
        assert got == [list(r) for r in want["rows"]], f"{name} v{version}"
        checked += 1
    assert checked >= 1


def test_basic_dv_is_rows_0_and_1() -> None:
    table = GOLDEN_TABLES / "basic-dv-no-checkpoint"
    adds = [b for b in _file_actions(table) if b.get("deletionVector")]
    assert len(adds) == 1
    add = adds[0]
    dv = DeletionVectorDescriptor.from_json(add["deletionVector"])
    rows = load_deletion_vector(str(table), dv, num_records=_num_records(add))
    assert rows == BitMap64([0, 1])
    ids = pq.read_table(resolve_data_path(str(table), add["path"])).column("id").to_pylist()
    assert ids == [0, 1, 2, 3, 4]  # so the DV deletes ids 0 and 1, which the expected rows lack


def test_kernel_small_dv_deletes_values_0_and_9() -> None:
    table = GOLDEN_TABLES / "kernel-table-with-dv-small"
    (add,) = [b for b in _file_actions(table) if b.get("deletionVector")]
    dv = DeletionVectorDescriptor.from_json(add["deletionVector"])
    values = pq.read_table(resolve_data_path(str(table), add["path"])).column("value").to_pylist()
    rows = load_deletion_vector(str(table), dv, num_records=len(values))
    assert sorted(values[i] for i in rows) == [0, 9]


def _all_descriptors(name: str) -> list[DeletionVectorDescriptor]:
    table = GOLDEN_TABLES / name
    return [
        DeletionVectorDescriptor.from_json(b["deletionVector"]) for b in _file_actions(table) if b.get("deletionVector")
    ]


@pytest.mark.parametrize("name", DV_TABLES)
def test_u_descriptors_name_the_golden_files(name: str) -> None:
    table = GOLDEN_TABLES / name
    on_disk = {p.name for p in table.glob("deletion_vector_*.bin")}
    named = set()
    for dv in _all_descriptors(name):
        assert dv.storage_type == "u"
        relative = dv_file_relative_path(dv.path_or_inline_dv)
        match = re.fullmatch(r"deletion_vector_([0-9a-f-]{36})\.bin", relative)
        assert match, relative
        assert str(uuid.UUID(match.group(1))) == match.group(1)
        assert os.path.exists(absolute_dv_path(str(table), dv))
        named.add(relative)
    # Every reference exists. (dv-partitioned-with-checkpoint also holds orphan DV files nothing references.)
    assert named and named <= on_disk


@pytest.mark.parametrize("name", DV_TABLES)
def test_file_framing_of_golden_dvs(name: str) -> None:
    table = GOLDEN_TABLES / name
    for dv in _all_descriptors(name):
        path = absolute_dv_path(str(table), dv)
        data = Path(path).read_bytes()
        assert dv.offset == 1 and data[0] == 1
        payload = read_dv_from_file_bytes(data, 1, dv.size_in_bytes, path)
        assert payload[:4] == bytes.fromhex("d1d33964")
        assert len(data) == 1 + 4 + dv.size_in_bytes + 4  # one DV per file in these tables


def test_checkpoint_descriptors_decode() -> None:
    """The v10 checkpoint (Delta Spark; DV struct with an extra maxRowIndex) gives the v10 state."""
    name = "dv-partitioned-with-checkpoint"
    table = GOLDEN_TABLES / name
    checkpoint = pq.read_table(table / "_delta_log" / "00000000000000000010.checkpoint.parquet").to_pylist()
    live = {}
    with_dv = 0
    for row in checkpoint:
        add = row.get("add")
        if add is None:
            continue
        if add["deletionVector"] is not None:
            assert "maxRowIndex" in add["deletionVector"]
            dv = DeletionVectorDescriptor.from_json(add["deletionVector"])
            rows = load_deletion_vector(str(table), dv, num_records=_num_records(add))
            assert len(rows) == dv.cardinality
            with_dv += 1
        else:
            add = {k: v for k, v in add.items() if k != "deletionVector"}
        add["partitionValues"] = dict(add["partitionValues"])
        live[_key(add)] = add
    assert with_dv >= 1
    expected = load_expected(name)
    assert _rows_of(table, live, expected["columns"]) == [list(r) for r in expected["versions"]["10"]["rows"]]
    for version, actions in _commits(table):
        if version > 10:
            _replay(live, actions)
    assert _rows_of(table, live, expected["columns"]) == [list(r) for r in expected["versions"]["15"]["rows"]]


def test_replaced_dvs_grow_monotonically() -> None:
    """Each remove/add pair on the same file in one commit: the new DV contains the old one."""
    table = GOLDEN_TABLES / "dv-partitioned-with-checkpoint"
    pairs = 0
    for _, actions in _commits(table):
        removes = {a["remove"]["path"]: a["remove"] for a in actions if "remove" in a}
        for a in actions:
            add = a.get("add")
            if add is None or add["path"] not in removes or not removes[add["path"]].get("deletionVector"):
                continue
            old = load_deletion_vector(
                str(table), DeletionVectorDescriptor.from_json(removes[add["path"]]["deletionVector"])
            )
            new = load_deletion_vector(str(table), DeletionVectorDescriptor.from_json(add["deletionVector"]))
            assert old < new
            pairs += 1
    assert pairs >= 1
