"""Shared by the dynamic partition overwrite tests: a partitioned table with DVs in two partitions,
the live files replayed from the raw log JSON without dvengine, and the three independent readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows
from raw_log import commit_actions

import dvengine
from dvengine import DeltaTable

COLUMNS = ["id", "p", "v"]
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])
Row = tuple[Any, ...]


def table(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLUMNS, r, strict=True)) for r in rows], schema=SCHEMA)


def seed(root: Path, configuration: dict[str, str] | None = None) -> list[Row]:
    """Partitions a, b, c and NULL over three commits; DVs in a and b (mode dv); the model rows."""
    rows = [(i, p, i * 10) for i, p in enumerate(["a", "a", "a", "b", "b", "b", "c", "c", None, None])]
    dvengine.write(table(rows[:6]), str(root), partitionBy=["p"], configuration=configuration)
    dvengine.write(table(rows[6:]), str(root), mode="append")
    dvengine.write(table([(20, "a", 200), (21, "b", 210)]), str(root), mode="append")
    rows += [(20, "a", 200), (21, "b", 210)]
    DeltaTable.forPath(None, str(root)).delete("id IN (1, 4)", mode="dv")
    return [r for r in rows if r[0] not in (1, 4)]


def live_files(root: Path, before: int) -> dict[str, dict[str, Any]]:
    """The live add actions after ``before``, replayed from the raw JSON (path -> add)."""
    live: dict[str, dict[str, Any]] = {}
    for version in range(before + 1):
        for action in commit_actions(root, version):
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return live


def files_state(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def commit(root: Path, version: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    actions = commit_actions(root, version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    return info, [a["remove"] for a in actions if "remove" in a], [a["add"] for a in actions if "add" in a]


def assert_readers(root: Path, expected: list[Row]) -> None:
    want = sort_rows(expected)
    assert rows_arrow(root, COLUMNS) == want
    assert rows_delta_rs(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want
