"""Column defaults (``allowColumnDefaults``): inserts that lack a column write its ``CURRENT_DEFAULT``.

Truth: a table whose log is written as Delta Spark leaves it after
``ALTER TABLE t SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')`` and
``ALTER TABLE t ALTER COLUMN status SET DEFAULT 'new'`` (the feature in the protocol, the SQL text
in the field's ``CURRENT_DEFAULT``), the rows a model predicts, read by delta-rs and DuckDB.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable

COLUMNS = ["id", "status", "qty"]


def _delta_spark_table(root: Path) -> str:
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "status", "type": "string", "nullable": False, "metadata": {"CURRENT_DEFAULT": "'new'"}},
        {"name": "qty", "type": "long", "nullable": True, "metadata": {"CURRENT_DEFAULT": "7"}},
    ]}
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE", "operationParameters": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["allowColumnDefaults", "appendOnly", "deletionVectors", "invariants"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true",
                                        "delta.feature.allowColumnDefaults": "supported"},
                      "createdTime": int(time.time() * 1000)}},
    ]
    os.makedirs(root / "_delta_log")
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def _readers(root: str, expected: list[tuple[Any, ...]]) -> None:
    want = sort_rows(expected)
    assert rows_delta_rs(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want


def test_inserts_lacking_columns_write_their_defaults_locally(tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64())}), root, mode="append")  # NOT NULL status: 'new'
    dvengine.write(pa.table({"id": pa.array([3], pa.int64()), "status": ["done"], "qty": pa.array([None], pa.int64())}),
                   root, mode="append")  # given values (NULL included) are written as given
    source = pa.table({"id": pa.array([2, 4], pa.int64())})
    (DeltaTable.forPath(None, root).alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"qty": "t.qty + 1"}).whenNotMatchedInsert(values={"id": "s.id"})
     .withEngine("local").execute())
    _readers(root, [(1, "new", 7), (2, "new", 8), (3, "done", None), (4, "new", 7)])


def test_spark_appends_write_defaults(spark: Any, tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "t")
    dvengine.write(spark.createDataFrame([(1,), (2,)], "id bigint"), root, mode="append")
    _readers(root, [(1, "new", 7), (2, "new", 7)])
