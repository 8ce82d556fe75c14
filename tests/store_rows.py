"""Rows of the object-store lifecycle tests (S3 on moto, Azure Blob on Azurite): the table's
columns, its rows as Arrow, and dvengine's read of a table on a store, so both stores' tests
build and compare the same rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from interop import sort_rows

from dvengine import DeltaTable

COLUMNS = ["id", "part", "val"]
Row = tuple[Any, ...]
Model = dict[int, Row]


def arrow_rows(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "part": pa.array([r[1] for r in rows], pa.string()),
            "val": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def make_rows(ids: range, val: int = 0) -> list[Row]:
    return [(i, f"p{i % 3}", i * 10 + val) for i in ids]


def dvengine_rows(uri: str, options: dict[str, str], version: int | None = None) -> list[Row]:
    table = DeltaTable.forPath(None, uri, storage_options=options).toArrow(version=version)
    return sort_rows([tuple(d[c] for c in COLUMNS) for d in table.to_pylist()])
