"""The four independent readers of a Delta table, returning comparable sorted row lists.

Model-based tests compare an in-memory model with what dvengine's Arrow and Spark readers,
delta-rs (QueryBuilder: its DV-aware path) and DuckDB's delta extension (delta-kernel-rs)
return, so a bug must fool four implementations at once to go unnoticed.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dvengine import DeltaTable

Row = tuple[Any, ...]


def sort_rows(rows: Sequence[Sequence[Any]]) -> list[Row]:
    return sorted((tuple(r) for r in rows), key=lambda r: tuple((v is None, v) for v in r))


def _arrow_rows(table: pa.Table, columns: Sequence[str]) -> list[Row]:
    return sort_rows([tuple(d[c] for c in columns) for d in table.to_pylist()])


def rows_arrow(path: str | Path, columns: Sequence[str]) -> list[Row]:
    return _arrow_rows(DeltaTable.forPath(None, path).toArrow(), columns)


def rows_spark(spark: Any, path: str | Path, columns: Sequence[str]) -> list[Row]:
    df = DeltaTable.forPath(spark, path).toDF()
    return sort_rows([tuple(r[c] for c in columns) for r in df.collect()])


def rows_delta_rs(path: str | Path, columns: Sequence[str]) -> list[Row]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    cols = ", ".join(f'"{c}"' for c in columns)
    reader = QueryBuilder().register("t", RsTable(str(path))).execute(f"select {cols} from t")
    return _arrow_rows(pa.table(reader.read_all()), columns)  # arro3 -> pyarrow via the Arrow C interface


def duckdb_delta_extension() -> str:
    for f in metadata.files("duckdb-ext-delta") or []:
        if str(f).endswith("delta.duckdb_extension"):
            return str(f.locate())
    raise AssertionError("duckdb-ext-delta is installed but has no delta.duckdb_extension file")


def rows_duckdb(path: str | Path, columns: Sequence[str]) -> list[Row]:
    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        con.execute(f"LOAD '{duckdb_delta_extension()}'")
        cols = ", ".join(f'"{c}"' for c in columns)
        table = con.execute(f"select {cols} from delta_scan('{path}')").fetch_arrow_table()
        return _arrow_rows(table, columns)
    finally:
        con.close()


def assert_all_readers(
    spark: Any,
    path: str | Path,
    columns: Sequence[str],
    expected: Sequence[Sequence[Any]],
    skip: Sequence[str] = (),
) -> None:
    """Every reader returns exactly ``expected`` (order-insensitive); ``skip`` names readers to leave out."""
    want = sort_rows(expected)
    readers = {
        "dvengine arrow": lambda: rows_arrow(path, columns),
        "dvengine spark": lambda: rows_spark(spark, path, columns),
        "delta-rs": lambda: rows_delta_rs(path, columns),
        "duckdb": lambda: rows_duckdb(path, columns),
    }
    for name, read in readers.items():
        if name in skip:
            continue
        got = read()
        assert got == want, f"{name} disagrees with the model: {len(got)} rows vs {len(want)} expected"
