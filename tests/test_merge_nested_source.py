"""MERGE whose source carries nested columns (struct, array, map), on both executors.

The local executor's hash join (Acero) refuses nested non-key columns; it used to fail with a raw
``pyarrow.ArrowInvalid`` on any source holding a struct. Source rows now go through the join as
keys and positions and are gathered afterwards. Truth: an in-memory model of the MERGE, and the
table read back by dvengine and by delta-rs; the Spark executor must give the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import dvengine
from dvengine import DeltaTable

STRUCT = pa.struct([("a", pa.int64()), ("b", pa.string())])
SCHEMA = pa.schema([("id", pa.int64()), ("s", STRUCT), ("l", pa.list_(pa.int64())), ("m", pa.map_(pa.string(), pa.int64()))])
TARGET = [
    {"id": 1, "s": {"a": 1, "b": "x"}, "l": [1], "m": [("k", 1)]},
    {"id": 2, "s": {"a": 2, "b": "y"}, "l": [2, 2], "m": []},
    {"id": 3, "s": None, "l": None, "m": None},
    {"id": 5, "s": {"a": 5, "b": "v"}, "l": [], "m": [("d", 5)]},
]
SOURCE = [
    {"id": 2, "s": {"a": 20, "b": "yy"}, "l": [20], "m": [("z", 2)]},
    {"id": 3, "s": {"a": 30, "b": None}, "l": None, "m": None},
    {"id": 4, "s": {"a": 40, "b": "w"}, "l": [4, 4], "m": [("q", 4)]},
    {"id": 5, "s": None, "l": [50], "m": None},
]


def _model() -> list[dict[str, Any]]:
    """matched: s, l from the source, except id 5 which the DELETE clause takes; not matched: insert id, s, m."""
    source = {r["id"]: r for r in SOURCE}
    rows = []
    for row in TARGET:
        src = source.get(row["id"])
        if src is None:
            rows.append(row)
        elif row["id"] != 5:
            rows.append({**row, "s": src["s"], "l": src["l"]})
    targets = {r["id"] for r in TARGET}
    rows += [{"id": r["id"], "s": r["s"], "l": None, "m": r["m"]} for r in SOURCE if r["id"] not in targets]
    return sorted(rows, key=lambda r: r["id"])


def _normalized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Maps as sorted (key, value) lists whatever reader produced them."""
    return [{**r, "m": None if r["m"] is None else sorted((k, v) for k, v in (r["m"].items() if isinstance(r["m"], dict) else r["m"]))}
            for r in sorted(rows, key=lambda r: r["id"])]


def test_merge_with_struct_array_and_map_source_columns(merge_engine: tuple[str, Any], tmp_path: Path) -> None:
    name, spark = merge_engine
    path = str(tmp_path / "t")
    dvengine.write(pa.Table.from_pylist(TARGET, schema=SCHEMA), path)
    source_table = pa.Table.from_pylist(SOURCE, schema=SCHEMA)
    source = source_table if spark is None else spark.createDataFrame(
        [{**r, "m": None if r["m"] is None else dict(r["m"])} for r in SOURCE],
        "id long, s struct<a: long, b: string>, l array<long>, m map<string, long>",
    ).alias("src")
    metrics = (
        DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedDelete("src.id = 5")
        .whenMatchedUpdate(set={"s": "src.s", "l": "src.l"})
        .whenNotMatchedInsert(values={"id": "src.id", "s": "src.s", "m": "src.m"})
        .withEngine(name).executeMetrics()
    )
    assert metrics["executionEngine"] == name
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"], metrics["numTargetRowsInserted"]) == (2, 1, 1)
    expected = _normalized(_model())
    assert _normalized(DeltaTable.forPath(None, path).toArrow().to_pylist()) == expected

    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    read = pa.table(QueryBuilder().register("t", RsTable(path)).execute("select * from t").read_all())
    assert _normalized(read.to_pylist()) == expected
