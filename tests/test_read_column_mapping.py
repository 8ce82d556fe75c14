"""Readers on column-mapped tables (name and id modes) written by delta-rs, an independent writer:
rows come back under logical names, in schema order, partition folders under physical names,
and a DELETE through dvengine keeps the mapping intact."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from dv_readers import dv_reader
from interop import assert_all_readers, sort_rows

from dvengine import DeltaTable
from dvengine.log import load_snapshot

COLS = ["Id Col", "value", "Part Col", "d"]


def _data() -> pa.Table:
    return pa.table(
        {
            "Id Col": pa.array(range(30), pa.int64()),
            "value": pa.array([f"v{i}" for i in range(30)]),
            "Part Col": pa.array([f"p {i % 3}" for i in range(30)]),
            "d": pa.array([dt.date(2024, 1, 1 + i % 2) for i in range(30)]),
        }
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_table_reads_under_logical_names(spark: Any, tmp_path: Path, mode: str) -> None:
    root = tmp_path / mode
    write_deltalake(str(root), _data(), partition_by=["Part Col", "d"], configuration={"delta.columnMapping.mode": mode})
    snapshot = load_snapshot(str(root))
    physical = {f.name: f.physical_name for f in snapshot.schema.fields}
    assert physical["Id Col"] != "Id Col"  # really mapped, so a reader using physical names would fail
    expected = [tuple(r.values()) for r in _data().to_pylist()]

    arrow = DeltaTable.forPath(None, root).toArrow()
    assert arrow.column_names == COLS
    assert sort_rows([tuple(r.values()) for r in arrow.to_pylist()]) == sort_rows(expected)
    df = DeltaTable.forPath(spark, root).toDF()
    assert df.columns == COLS
    assert sort_rows([tuple(r) for r in df.collect()]) == sort_rows(expected)

    # delta-rs made this table without deletion vectors, so the default mode rewrites the files,
    # which must be written under the physical names (and field ids) of the mapping.
    metrics = DeltaTable.forPath(spark, root).deleteMetrics("`Id Col` % 4 = 1 AND `Part Col` <> 'p 0'")
    model = [r for r in expected if not (r[0] % 4 == 1 and r[2] != "p 0")]
    assert metrics["numDeletedRows"] == len(expected) - len(model)
    assert metrics["numDeletionVectorsAdded"] == 0 and metrics["numAddedFiles"] > 0
    # DuckDB's delta extension (1.4.4) returns NULL for the partition columns of column-mapped
    # tables written by delta-rs, before dvengine ever touches them, so it cannot judge here.
    assert_all_readers(spark, root, COLS, model, skip=("duckdb",))


def _enable_deletion_vectors(root: Path) -> None:
    """Commit 1: protocol (3, 7) with just columnMapping and deletionVectors, and the property on.

    (delta-rs would add every feature its legacy writer version implies, generatedColumns among
    them, which dvengine does not write; ALTER TABLE upgrades the same way.)"""
    log = root / "_delta_log"
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines() if line]
    metadata = next(a["metaData"] for a in actions if "metaData" in a)
    metadata["configuration"]["delta.enableDeletionVectors"] = "true"
    features = ["columnMapping", "deletionVectors"]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features, "writerFeatures": features}
    (log / f"{1:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n" + json.dumps({"metaData": metadata}) + "\n")


def _nested_data() -> pa.Table:
    point = pa.struct([pa.field("x `q`", pa.int64()), pa.field("y y", pa.string())])
    return pa.table(
        {
            "id": pa.array(range(12), pa.int64()),
            "Pt": pa.array([{"x `q`": i, "y y": f"s{i}"} for i in range(12)], point),
            "pts": pa.array([[{"x `q`": i, "y y": "a"}] * (i % 3) for i in range(12)], pa.list_(point)),
            "tags": pa.array([[("k", i)] for i in range(12)], pa.map_(pa.string(), pa.int64())),
        }
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_nested_names_read_in_spark(spark: Any, tmp_path: Path, mode: str) -> None:
    """Nested fields have physical names too: the Spark read renames them back (a CAST whose type
    text must quote names with spaces and back-quotes), before and after deletion vectors."""
    root = tmp_path / mode
    write_deltalake(str(root), _nested_data(), configuration={"delta.columnMapping.mode": mode})
    snapshot = load_snapshot(str(root))
    point = snapshot.schema.get("Pt").type
    assert [f.physical_name for f in point.fields] != [f.name for f in point.fields]  # nested names mapped
    expected = _nested_data().to_pylist()

    def spark_rows() -> list[dict[str, Any]]:
        rows = [r.asDict(recursive=True) for r in DeltaTable.forPath(spark, root).toDF().orderBy("id").collect()]
        for r in rows:  # Spark hands a map back as a dict, Arrow as (key, value) pairs
            r["tags"] = sorted(r["tags"].items())
        return rows

    assert spark_rows() == expected
    _enable_deletion_vectors(root)
    DeltaTable.forPath(spark, root).delete("id = 7")  # 1 row of 12: a DV, so the DV scan path renames too
    assert any(add.deletion_vector is not None for add in load_snapshot(str(root)).files)
    for reader in ("jvm", "python"):
        with dv_reader(spark, reader):
            assert spark_rows() == [r for r in expected if r["id"] != 7], reader
