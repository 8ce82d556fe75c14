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
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dml_helpers import spark_conf
from dv_readers import executed_plan
from pyspark.errors import AnalysisException
from pyspark.sql.functions import spark_partition_id

import dvengine
from dvengine import DeltaTable
from dvengine.commands.options import CONF_DV_READER
from dvengine.engine.spark.reader import RowTrackingMetadataWarning
from dvengine.engine.spark.row_ids import read_row_tracking_df
from dvengine.log import load_snapshot
from dvengine.read.row_ids import read_row_tracking
from tests.interop import rows_delta_rs, sort_rows
from tests.test_row_tracking import (
    Model,
    _apply_upsert_of_7_100_101,
    _commit,
    _info,
    _mark,
    _mark_now,
    _replay,
    delta_spark_table,
)

META = ["_metadata.row_id", "_metadata.row_commit_version", "_metadata.base_row_id",
        "_metadata.default_row_commit_version", "_metadata.file_path", "_metadata.row_index"]


def _model(frame: Any) -> Model:
    return {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
            for r in frame.select("id", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()}


def _check(spark: Any, root: Path, model: Model) -> set[int]:
    """``toDF()``'s metadata fields equal the model, the Arrow reader and the Spark row plan; each
    row's ``base_row_id`` / ``default_row_commit_version`` are its file's in the raw log. Returns the
    ids of rows whose row id is not ``base_row_id + row_index`` (taken from a materialized column)."""
    rows = DeltaTable.forPath(spark, str(root)).toDF().select("id", "v", *META).collect()
    assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in rows} == model
    live, _ = _replay(root, load_snapshot(str(root)).version)
    by_name = {path.rsplit("/", 1)[-1]: add for path, add in live.items()}
    for r in rows:
        add = by_name[r["file_path"].rsplit("/", 1)[-1]]
        assert (r["base_row_id"], r["default_row_commit_version"]) == (add["baseRowId"], add["defaultRowCommitVersion"])
    arrow = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
             for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert arrow == model
    plan = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
            for r in read_row_tracking_df(spark, load_snapshot(str(root))).collect()}
    assert plan == model
    return {r["id"] for r in rows if r["row_id"] != r["base_row_id"] + r["row_index"]}


def test_metadata_row_id_follows_dml_with_dvs(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = delta_spark_table(root)
    # Delta's copy-on-write UPDATE left ids 10-19 in a file whose baseRowId is 20: materialized ids.
    assert _check(spark, root, model) == set(range(10, 20))
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
    assert _model(spark.read.format("delta").load(str(root))) == model
    assert _model(table.scan("id >= 0")) == model
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


def _column_mapped_table(root: Path) -> Model:
    """A partitioned table with column mapping (name) and row tracking as Delta Spark writes it:
    physical column names in the Parquet files and the partition values, files under random
    two-letter prefixes (not Hive-style folders), and one file rewritten by a copy-on-write UPDATE
    with materialized id / commit version columns."""
    phys = {name: f"col-{uuid.uuid4()}" for name in ("id", "p", "v")}
    fields = [{"name": name, "type": "string" if name == "p" else "long", "nullable": True,
               "metadata": {"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": phys[name]}}
              for i, name in enumerate(("id", "p", "v"))]
    row_id_col, version_col = f"_row-id-col-{uuid.uuid4()}", f"_row-commit-version-col-{uuid.uuid4()}"
    configuration = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true",
                     "delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3",
                     "delta.rowTracking.materializedRowIdColumnName": row_id_col,
                     "delta.rowTracking.materializedRowCommitVersionColumnName": version_col}
    _commit(root, 0, [
        _info("CREATE TABLE", None),
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping", "deletionVectors"],
                      "writerFeatures": ["columnMapping", "deletionVectors", "domainMetadata", "rowTracking"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": ["p"],
                      "configuration": configuration, "createdTime": int(time.time() * 1000)}},
    ])

    def add(prefix: str, part: str, ids: list[int], values: list[int], base: int, version: int,
            materialized: tuple[list[int], list[int | None]] | None = None) -> dict[str, Any]:
        (root / prefix).mkdir(exist_ok=True)
        path = f"{prefix}/part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        columns = {phys["id"]: pa.array(ids, pa.int64()), phys["v"]: pa.array(values, pa.int64())}
        if materialized:
            columns[row_id_col] = pa.array(materialized[0], pa.int64())
            columns[version_col] = pa.array(materialized[1], pa.int64())
        pq.write_table(pa.table(columns), root / path)
        stats = {"numRecords": len(ids), "minValues": {phys["id"]: min(ids), phys["v"]: min(values)},
                 "maxValues": {phys["id"]: max(ids), phys["v"]: max(values)}, "nullCount": {phys["id"]: 0, phys["v"]: 0}}
        return {"path": path, "partitionValues": {phys["p"]: part}, "size": (root / path).stat().st_size,
                "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats),
                "baseRowId": base, "defaultRowCommitVersion": version}

    a = add("Qx", "a", [0, 1, 2, 3], [0, 10, 20, 30], 0, 1)
    b = add("k7", "b b", [4, 5, 6, 7], [40, 50, 60, 70], 4, 1)
    _commit(root, 1, [_info("WRITE", 0), {"add": a}, {"add": b}, _mark(7)])
    # UPDATE SET v = -1 WHERE id = 5, copy-on-write: b's rows keep their ids in the new file.
    c = add("Zr", "b b", [4, 5, 6, 7], [40, -1, 60, 70], 8, 2, ([4, 5, 6, 7], [1, None, 1, 1]))
    remove = {"path": b["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": True,
              "partitionValues": b["partitionValues"], "size": b["size"], "baseRowId": 4, "defaultRowCommitVersion": 1}
    _commit(root, 2, [_info("UPDATE", 1), {"remove": remove}, {"add": c}, _mark(11)])
    model: Model = {i: [i * 10, i, 1] for i in range(8)}
    model[5] = [-1, 5, 2]
    return model


def test_column_mapping_and_partitions_outside_hive_folders(spark: Any, tmp_path: Path) -> None:
    """Physical names differ from logical ones and partition values are not in the paths: the
    format fills the partition column per file instead of the Python plan's join, so
    ``_metadata`` stays reachable; then a DELETE with a DV and an UPDATE (DV) by dvengine."""
    root = tmp_path / "cm"
    model = _column_mapped_table(root)
    parts = {i: "a" if i < 4 else "b b" for i in range(8)}
    table = DeltaTable.forPath(spark, str(root))
    for step in ("as written", "delete", "update"):
        if step == "delete":
            table.delete("id = 1")
            del model[1]
        elif step == "update":
            version = table.updateMetrics("id IN (2, 6)", {"v": "v + 1"})["version"]
            for i in (2, 6):
                model[i] = [model[i][0] + 1, model[i][1], version]  # type: ignore[operator]
        frame = table.toDF()
        rows = frame.select("id", "p", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()
        assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in rows} == model, step
        assert {r["id"]: r["p"] for r in rows} == {i: parts[i] for i in model}, step
        arrow = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
                 for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
        assert arrow == model, step
        # A filter on the partition column reaches the scan as a filter on a column the files lack.
        got = frame.where("p = 'b b'").select("id", "_metadata.row_id").collect()
        assert {r["id"]: r["row_id"] for r in got} == {i: model[i][1] for i in model if parts[i] == "b b"}, step
    assert rows_delta_rs(root, ["id", "p", "v"]) == sort_rows([(i, parts[i], vals[0]) for i, vals in model.items()])
    # Row by row (Parquet's non-vectorized reader, what nested schemas get): the same fields.
    with spark_conf(spark, "spark.sql.parquet.enableVectorizedReader", "false"):
        frame = table.toDF()
        plan = executed_plan(frame)
        assert "RowTrackingParquet" in plan and "ColumnarToRow" not in plan, plan
        rows = frame.select("id", "p", "v", "_metadata.row_id", "_metadata.row_commit_version").collect()
        assert {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in rows} == model
        assert {r["id"]: r["p"] for r in rows} == {i: parts[i] for i in model}


def test_hive_style_partitions(spark: Any, tmp_path: Path) -> None:
    """A table dvengine creates with row tracking and Hive-style partition folders (Spark's own
    partition discovery serves the partition column), after an UPDATE with a DV."""
    root = tmp_path / "hive"
    data = pa.table({"id": pa.array(range(6), pa.int64()), "p": pa.array([i % 2 for i in range(6)], pa.int64()),
                     "v": pa.array(range(6), pa.int64())})
    dvengine.write(data, str(root), partitionBy=["p"], configuration={"delta.enableRowTracking": "true"})
    table = DeltaTable.forPath(spark, str(root))
    table.update("id IN (1, 4)", {"v": "v + 100"})
    truth = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]]
             for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert len(truth) == 6 and truth[1][2] == truth[4][2] == 1
    assert _model(table.toDF()) == truth
    assert _model(table.toDF().where("p = 1")) == {i: vals for i, vals in truth.items() if i % 2 == 1}


def test_typed_partition_values_filled_by_the_format(spark: Any, tmp_path: Path) -> None:
    """Partition columns of types Spark's discovery does not parse as Delta writes them (timestamp,
    decimal, double) and dates, booleans, NULLs: filled per file by the format; the rows equal
    what the Python plan (its partition join) and delta-rs read."""
    import datetime as dt
    from decimal import Decimal

    root = tmp_path / "typed"
    n = 6
    data = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "ts": pa.array([dt.datetime(2024, 1, 1 + i % 2, 12, 30, tzinfo=dt.UTC) for i in range(n)], pa.timestamp("us", "UTC")),
        "d": pa.array([dt.date(2020, 2, 29), None] * (n // 2), pa.date32()),
        "dec": pa.array([Decimal("-1.25"), Decimal("3.50"), None] * (n // 3), pa.decimal128(10, 2)),
        "x": pa.array([0.5, -2.0] * (n // 2), pa.float64()),
        "b": pa.array([True, False, None] * (n // 3), pa.bool_()),
        "v": pa.array(range(n), pa.int64()),
    })
    parts = ["ts", "d", "dec", "x", "b"]
    dvengine.write(data, str(root), partitionBy=parts, configuration={"delta.enableRowTracking": "true"})
    DeltaTable.forPath(spark, str(root)).delete("id = 3")
    columns = ["id", *parts, "v"]
    frame = DeltaTable.forPath(spark, str(root)).toDF()
    got = sort_rows([tuple(r[c] for c in columns) for r in frame.select(*columns, "_metadata.row_id").collect()])
    with spark_conf(spark, CONF_DV_READER, "python"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RowTrackingMetadataWarning)
        python_plan = sort_rows([tuple(r[c] for c in columns) for r in DeltaTable.forPath(spark, str(root)).toDF().collect()])
    assert got == python_plan and len(got) == n - 1
    ids = {r["id"]: r["row_id"] for r in frame.select("id", "_metadata.row_id").collect()}
    assert ids == {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}


def test_row_ids_of_a_file_of_several_row_groups_split_across_tasks(spark: Any, tmp_path: Path) -> None:
    """One file of 4 row groups (written with pyarrow ``row_group_size``), read with a
    ``maxPartitionBytes`` small enough that Spark splits it into several tasks (Parquet splits
    by row group), after DV DELETEs and a DV UPDATE hitting every row group: each task must
    count the physical row index from the start of the file, not of its split, and apply the
    DV to the right rows. Truth: the Arrow reader (``read_row_tracking``) and, for rows not
    updated, ``baseRowId`` + physical index from the raw log."""
    root = tmp_path / "t"
    root.mkdir()
    config = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true",
              "delta.rowTracking.materializedRowIdColumnName": "_row-id-col-" + str(uuid.uuid4()),
              "delta.rowTracking.materializedRowCommitVersionColumnName": "_row-commit-version-col-" + str(uuid.uuid4())}
    schema = {"type": "struct", "fields": [{"name": n, "type": "long", "nullable": True, "metadata": {}} for n in ("id", "v")]}
    _commit(root, 0, [_info("CREATE TABLE", None),
                      {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                                    "writerFeatures": ["deletionVectors", "domainMetadata", "rowTracking"]}},
                      {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                    "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": config,
                                    "createdTime": int(time.time() * 1000)}}])
    rows, group = 40_000, 10_000
    ids = pa.array(range(rows), pa.int64())
    values = pa.array([(i * 2654435761) % 1_000_003 for i in range(rows)], pa.int64())  # not dictionary-friendly
    pq.write_table(pa.table({"id": ids, "v": values}), root / "big.parquet", row_group_size=group, compression="none")
    assert pq.ParquetFile(root / "big.parquet").metadata.num_row_groups == 4
    small = pa.table({"id": pa.array([-3, -2, -1], pa.int64()), "v": pa.array([0, 0, 0], pa.int64())})
    pq.write_table(small, root / "small.parquet")
    adds = []
    for name, table, base in (("small.parquet", small, 0), ("big.parquet", None, 3)):
        n = rows if table is None else table.num_rows
        stats = {"numRecords": n, "minValues": {}, "maxValues": {}, "nullCount": {}}
        adds.append({"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                             "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats),
                             "baseRowId": base, "defaultRowCommitVersion": 1}})
    _commit(root, 1, [_info("WRITE", 0), *adds, _mark(rows + 2)])

    local = DeltaTable.forPath(None, str(root))
    deleted = [0, 9_999, 10_000, 15_000, 20_001, 29_999, 30_000, 39_999]
    local.delete(f"id IN ({', '.join(map(str, deleted))})", mode="dv")
    updated = [5, 12_345, 25_000, 35_000]
    local.update(f"id IN ({', '.join(map(str, updated))})", {"v": "-v"}, mode="dv")
    big = next(f for f in load_snapshot(str(root)).files if f.path == "big.parquet")
    assert big.deletion_vector is not None and big.deletion_vector.cardinality == len(deleted) + len(updated)

    truth = {r["id"]: (r["row_id"], r["row_commit_version"]) for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert len(truth) == rows + 3 - len(deleted)
    assert all(truth[i][0] == 3 + i for i in range(rows) if i not in deleted)  # updated rows keep theirs too
    for vectorized in ("true", "false"):  # batches and Spark's row-by-row Parquet reader
        with spark_conf(spark, "spark.sql.files.maxPartitionBytes", str(64 * 1024)), \
                spark_conf(spark, "spark.sql.files.openCostInBytes", "0"), \
                spark_conf(spark, "spark.sql.parquet.enableVectorizedReader", vectorized):
            frame = DeltaTable.forPath(spark, str(root)).toDF().select(
                "id", "_metadata.row_id", "_metadata.row_commit_version", "_metadata.row_index", "_metadata.file_path",
                spark_partition_id().alias("task"))
            got = frame.collect()
        tasks = {r["task"] for r in got if r["file_path"].endswith("big.parquet")}
        assert len(tasks) >= 3, f"big.parquet was not split across tasks: {tasks}"
        assert len(got) == len(truth)
        assert {r["id"]: (r["row_id"], r["row_commit_version"]) for r in got} == truth
        assert len({r["row_id"] for r in got}) == len(got)
        for r in got:
            if r["file_path"].endswith("big.parquet"):
                assert r["row_index"] == r["id"] and r["row_id"] == 3 + r["id"]
