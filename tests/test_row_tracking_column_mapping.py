"""Row tracking on column-mapped tables (``delta.columnMapping.mode`` name and id), both executors.

The table is ``tests/test_row_tracking.py``'s Delta Spark table (an INSERT of two files, a
copy-on-write UPDATE leaving materialized row id / commit version columns) created with column
mapping, as Delta Spark writes it: data columns in the Parquet files under ``col-<uuid>`` physical
names with field ids, stats keyed by physical name, the materialized columns under their own
(configuration) names. dvengine then changes it: DELETE with DVs, UPDATE (ids kept), MERGE update +
insert, OPTIMIZE, PURGE, appends. After every step the in-memory model of (value, stable row id,
stable row commit version) must equal what dvengine reads, delta-rs and DuckDB must read the
model's values, the raw log must keep the protocol's invariants, and every live data file must hold
exactly the physical columns (field ids in id mode) plus, if any, the materialized ones by name:
a writer that stored a logical name, dropped a field id or lost the materialized ids fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import dvengine
from dvengine import DeltaTable
from dvengine.log import load_snapshot
from dvengine.maintenance.properties import set_table_properties
from dvengine.read.row_ids import read_row_tracking
from tests.test_read_column_mapping import _enable_deletion_vectors
from tests.test_row_tracking import (
    Model,
    _mark_now,
    _replay,
    check_invariants,
    check_model,
    delta_spark_table,
    run_dml_steps,
    run_row_plan_steps,
)

MODES = ["name", "id"]


def check_physical_files(root: Path, mapping: str) -> None:
    """Every live file (naive JSON replay) stores the schema's physical names, with the field ids in
    id mode, and nothing else but the two materialized row tracking columns."""
    snapshot = load_snapshot(str(root))
    config = snapshot.configuration
    materialized = {config["delta.rowTracking.materializedRowIdColumnName"],
                    config["delta.rowTracking.materializedRowCommitVersionColumnName"]}
    physical = {f.physical_name: f.field_id for f in snapshot.schema.fields}
    assert set(physical).isdisjoint({"id", "v"}), "the table must really be mapped"
    live, _ = _replay(root, snapshot.version)
    for path in live:
        schema = pq.read_schema(root / path)
        data = {f.name: f for f in schema if f.name not in materialized}
        assert set(data) == set(physical), f"{path}: columns {schema.names}, physical {sorted(physical)}"
        if mapping == "id":
            for name, field in data.items():
                assert (field.metadata or {}).get(b"PARQUET:field_id") == str(physical[name]).encode(), f"{path}: {name}"


@pytest.mark.parametrize("mode", MODES)
def test_column_mapped_delta_spark_table_changed_locally(tmp_path: Path, mode: str) -> None:
    root = tmp_path / mode
    model = delta_spark_table(root, mode)
    check_model(root, model)  # Delta's materialized ids read beside physically named columns
    check_physical_files(root, mode)
    run_dml_steps(root, model, None, "local")
    check_physical_files(root, mode)

    mark = _mark_now(root)
    dvengine.write(pa.table({"id": pa.array([300, 301], pa.int64()), "v": pa.array([1, 2], pa.int64())}),
                   str(root), mode="append")
    version = load_snapshot(str(root)).version
    new = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist() if r["id"] >= 300}
    assert sorted(new.values()) == [mark + 1, mark + 2]
    model |= {300: [1, new[300], version], 301: [2, new[301], version]}

    table = DeltaTable.forPath(None, str(root))
    table.deleteMetrics("id IN (1, 300)", mode="dv")
    retired = {model.pop(1)[1], model.pop(300)[1]}
    assert any(f.deletion_vector is not None for f in load_snapshot(str(root)).files)
    table.purge()  # copies every live row of the DV'd file: ids and commit versions kept
    assert all(f.deletion_vector is None for f in load_snapshot(str(root)).files)
    check_invariants(root, retired)  # type: ignore[arg-type]
    check_model(root, model)
    check_physical_files(root, mode)


@pytest.mark.parametrize("mode", MODES)
def test_enabling_row_tracking_on_a_column_mapped_table(tmp_path: Path, mode: str) -> None:
    """A column-mapped table made by delta-rs (an independent writer's mapping), row tracking
    enabled by SET TBLPROPERTIES (backfill: fresh ids for the existing files), then appended to and
    updated: the updated and copied rows keep their ids, stored under the materialized name."""
    root = tmp_path / mode
    write_deltalake(str(root), pa.table({"id": pa.array(range(6), pa.int64()), "v": pa.array(range(6), pa.int64())}),
                    configuration={"delta.columnMapping.mode": mode})
    _enable_deletion_vectors(root)
    set_table_properties(str(root), {"delta.enableRowTracking": "true"})
    enabled = load_snapshot(str(root)).version
    assert {"columnMapping", "rowTracking", "domainMetadata"} <= set(load_snapshot(str(root)).protocol.writer_features or ())
    model: Model = {i: [i, i, enabled] for i in range(6)}  # backfilled: ids 0..5, committed at the enabling version
    check_model(root, model)
    dvengine.write(pa.table({"id": pa.array([6], pa.int64()), "v": pa.array([6], pa.int64())}), str(root), mode="append")
    model[6] = [6, 6, load_snapshot(str(root)).version]
    version = DeltaTable.forPath(None, str(root)).updateMetrics("id = 4", {"v": "40"}, mode="rewrite")["version"]
    model[4] = [40, 4, version]
    check_model(root, model)
    check_invariants(root, set(), first=enabled)
    check_physical_files(root, mode)
    live, _ = _replay(root, version)
    rewritten = [p for p, a in live.items() if a["defaultRowCommitVersion"] == version]
    names = load_snapshot(str(root)).configuration
    stored = pq.read_table(root / rewritten[0]).column(names["delta.rowTracking.materializedRowIdColumnName"])
    assert sorted(stored.to_pylist()) == list(range(6))  # every copied and updated row's id, materialized


@pytest.mark.parametrize("mode", MODES)
def test_column_mapped_spark_row_plans_keep_row_ids(spark: Any, tmp_path: Path, mode: str) -> None:
    """The Spark row plans read the materialized columns by their names beside physically named
    (and, in id mode, field-id matched) data columns, and write them back the same way."""
    root = tmp_path / mode
    run_row_plan_steps(spark, root, delta_spark_table(root, mode))
    check_physical_files(root, mode)


def test_column_mapped_spark_file_tasks_keep_row_ids(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "id"
    model = delta_spark_table(root, "id")
    run_dml_steps(root, model, spark, "spark")
    check_physical_files(root, "id")
    mark = _mark_now(root)
    dvengine.write(spark.createDataFrame([(400, 4), (401, 5)], "id long, v long"), str(root), mode="append")
    appended = [r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist() if r["id"] >= 400]
    assert sorted(appended) == [mark + 1, mark + 2]
    check_invariants(root, set())
    check_physical_files(root, "id")

