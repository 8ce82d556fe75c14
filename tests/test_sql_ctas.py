"""``CREATE [OR REPLACE] TABLE ... USING delta AS query`` / ``REPLACE TABLE ... AS query`` through
``dvengine.sql`` (issue 26). The query runs on Spark (a Delta source read by dvengine); the rows,
schema (every column nullable, as Delta's CTAS), partitioning and properties are checked in the
raw log and read back by delta-rs and DuckDB; refusals leave the folder byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SqlParseError, TableAlreadyExistsError, TableNotFoundError
from dvengine.storage.catalog import WAREHOUSE_OVERRIDE_CONF


def _last(root: Path, kind: str) -> dict[str, Any]:
    found = [json.loads(line)[kind] for p in sorted((root / "_delta_log").glob("*.json"))
             for line in p.read_text().splitlines() if kind in json.loads(line)]
    return found[-1]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_ctas_from_a_delta_table_and_values(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    dvengine.write(pa.table({"id": pa.array(range(6), pa.int64()), "v": [f"v{i}" for i in range(6)]}), str(src))
    DeltaTable.forPath(None, str(src)).delete("id = 0")  # a DV: the query must see 5 rows
    dst = tmp_path / "dst"
    dvengine.sql(spark, f"""CREATE TABLE delta.`{dst}` USING delta PARTITIONED BY (part)
        TBLPROPERTIES ('delta.appendOnly' = 'true', 'delta.feature.allowColumnDefaults' = 'supported')
        AS SELECT id, upper(v) AS v, CAST(id % 2 AS INT) AS part FROM delta.`{src}` WHERE id < 5""")
    meta = _last(dst, "metaData")
    assert meta["partitionColumns"] == ["part"]
    assert meta["configuration"]["delta.appendOnly"] == "true"
    assert "allowColumnDefaults" in _last(dst, "protocol")["writerFeatures"]
    fields = json.loads(meta["schemaString"])["fields"]
    assert [(f["name"], f["type"], f["nullable"]) for f in fields] == [
        ("id", "long", True), ("v", "string", True), ("part", "integer", True)]
    want = [(i, f"V{i}", i % 2) for i in range(1, 5)]
    assert rows_delta_rs(dst, ["id", "v", "part"]) == want
    assert rows_duckdb(dst, ["id", "v", "part"]) == want

    name = "ctas_values_t"
    dvengine.sql(spark, f"CREATE TABLE {name} USING delta AS VALUES (1, 'x'), (2, 'y') AS t(a, b)")
    root = Path(spark.conf.get(WAREHOUSE_OVERRIDE_CONF)) / name
    assert DeltaTable.forName(None, name).path == str(root)
    assert rows_delta_rs(root, ["a", "b"]) == [(1, "x"), (2, "y")]
    fields = json.loads(_last(root, "metaData")["schemaString"])["fields"]
    assert all(f["nullable"] for f in fields)  # literals are NOT NULL in Spark; Delta's CTAS makes all nullable
    table_id = _last(root, "metaData")["id"]

    # OR REPLACE: new schema and rows in one commit, same table id; IF NOT EXISTS leaves it.
    dvengine.sql(spark, f"CREATE OR REPLACE TABLE {name} USING delta AS SELECT 'z' AS c")
    assert _last(root, "metaData")["id"] == table_id
    assert [f["name"] for f in json.loads(_last(root, "metaData")["schemaString"])["fields"]] == ["c"]
    assert rows_delta_rs(root, ["c"]) == [("z",)]
    before = _files(root)
    dvengine.sql(spark, f"CREATE TABLE IF NOT EXISTS {name} USING delta AS SELECT 1 AS other")
    assert _files(root) == before
    dvengine.sql(spark, f"REPLACE TABLE {name} USING delta AS SELECT 5L AS n")
    assert rows_delta_rs(root, ["n"]) == [(5,)]


def test_ctas_refusals(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(spark, f"CREATE TABLE delta.`{root}` USING delta AS SELECT 1 AS a")
    before = _files(root)
    cases: list[tuple[str, type[Exception], str]] = [
        (f"CREATE TABLE delta.`{root}` USING delta AS SELECT 2 AS a", TableAlreadyExistsError, "already exists"),
        (f"REPLACE TABLE delta.`{tmp_path / 'none'}` USING delta AS SELECT 2 AS a", TableNotFoundError, "does not exist"),
        (f"CREATE TABLE delta.`{root}` (a INT) USING delta AS SELECT 2 AS a", SqlParseError, "column list"),
    ]
    for text, error, words in cases:
        with pytest.raises(error, match=words):
            dvengine.sql(spark, text)
        assert _files(root) == before, text
    assert not (tmp_path / "none").exists()
