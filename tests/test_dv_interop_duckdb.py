"""DVs we write are read correctly by an independent reader: DuckDB's delta extension
(built on delta-kernel-rs).

A golden table gets extra commits, hand-written here, that swap its DV for ours: a packed file
with a random prefix and a non-first offset, then an inline DV. DuckDB must hide exactly the
rows our bitmaps name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb
from pyroaring import BitMap64

from dvengine.dv import inline_descriptor, write_dv_file
from dvengine.protocol.actions import DeletionVectorDescriptor


def _delta_extension() -> str:
    files = metadata.files("duckdb-ext-delta") or []
    for f in files:
        if str(f).endswith("delta.duckdb_extension"):
            return str(f.locate())
    raise AssertionError("duckdb-ext-delta is installed but has no delta.duckdb_extension file")


def _scan_ids(table: Path) -> list[int]:
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        con.execute(f"LOAD '{_delta_extension()}'")
        return [int(r[0]) for r in con.execute(f"SELECT id FROM delta_scan('{table}') ORDER BY id").fetchall()]
    finally:
        con.close()


def _swap_dv(table: Path, version: int, add: dict[str, Any], new_dv: DeletionVectorDescriptor) -> dict[str, Any]:
    remove = {
        "path": add["path"],
        "deletionTimestamp": 1,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add["partitionValues"],
        "size": add["size"],
        "stats": add["stats"],
        "deletionVector": add["deletionVector"],
    }
    new_add = {**add, "deletionVector": new_dv.to_json()}
    lines = [{"commitInfo": {"timestamp": version, "operation": "DELETE"}}, {"remove": remove}, {"add": new_add}]
    (table / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return new_add


def test_duckdb_reads_our_file_and_inline_dvs(golden_copy: Callable[[str], Path]) -> None:
    table = golden_copy("basic-dv-no-checkpoint")
    assert _scan_ids(table) == [2, 3, 4, 5, 6, 7, 8, 9]  # the reader agrees on the golden DV first
    commit1 = [json.loads(line) for line in (table / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    (add,) = [a["add"] for a in commit1 if "add" in a]  # the file holding ids 0..4

    # packed file: our DV is the second one in the file (offset > 1), under a random prefix
    _, ours = write_dv_file(str(table), [BitMap64([4]), BitMap64([0, 1, 3])], random_prefix_len=2)
    assert ours.offset is not None and ours.offset > 1 and len(ours.path_or_inline_dv) == 22
    add = _swap_dv(table, 2, add, ours)
    assert _scan_ids(table) == [2, 4, 5, 6, 7, 8, 9]

    add = _swap_dv(table, 3, add, inline_descriptor(BitMap64([0, 1, 3, 4])))
    assert _scan_ids(table) == [2, 5, 6, 7, 8, 9]
