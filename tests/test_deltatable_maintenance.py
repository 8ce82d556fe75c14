"""OPTIMIZE, CLONE, CONVERT TO DELTA, protocol changes and manifests (issue #12 part B).

The first tests re-express delta-spark's python/delta/tests/test_deltatable.py for these methods
(only the import and the table creation changed: tables are written with ``dvengine.write``).
The others check results against independent readers (delta-rs, DuckDB) and in-memory models,
and that failures leave the table exactly as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    OperationNotAllowedError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    UnsupportedFeatureError,
)

KV = ["key", "value"]


def _write(path: Path | str, rows: list[tuple[str, int]], mode: str = "append", **kw: Any) -> None:
    dvengine.write(pa.table({"key": [r[0] for r in rows], "value": [r[1] for r in rows]}), str(path), mode=mode, **kw)


def _folder_state(path: Path | str) -> dict[str, bytes]:
    """Every file under a folder with its bytes: 'unchanged' means byte-for-byte."""
    out = {}
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, path)] = Path(full).read_bytes()
    return out


def dt_text(epoch_ms: int) -> str:
    """A timestamp string (UTC, millisecond precision) as cloneAtTimestamp takes it."""
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _last(path: Path | str) -> dict[str, Any]:
    return DeltaTable.forPath(None, path).history(1)[0]


# --- delta-spark's test_deltatable.py, re-expressed -------------------------------------------


def test_optimize(tmp_path: Path) -> None:
    _write(tmp_path, [("a", 1), ("a", 2)], mode="error")
    _write(tmp_path, [("a", 3), ("a", 4)])
    _write(tmp_path, [("b", 1), ("b", 2)])
    dt = DeltaTable.forPath(None, tmp_path)
    res = dt.optimize().executeCompaction()
    op_params = _last(tmp_path)["operationParameters"]
    assert res["metrics"]["numFilesAdded"] == 1
    assert res["metrics"]["numFilesRemoved"] == 3
    assert op_params["predicate"] == "[]"
    with pytest.raises(InvalidPredicateError, match="Predicate references non-partition column 'key'. "
                       r"Only the partition columns may be referenced: \[\]"):
        dt.optimize().where("key = 'a'").executeCompaction()


def test_optimize_w_partition_filter(tmp_path: Path) -> None:
    _write(tmp_path, [("a", 1), ("a", 2)], mode="error", partitionBy=["key"])
    _write(tmp_path, [("a", 3), ("a", 4)])
    _write(tmp_path, [("b", 1), ("b", 2)])
    dt = DeltaTable.forPath(None, tmp_path)
    res = dt.optimize().where("key = 'a'").executeCompaction()
    op_params = _last(tmp_path)["operationParameters"]
    assert res["metrics"]["numFilesAdded"] == 1
    assert res["metrics"]["numFilesRemoved"] == 2
    assert json.loads(op_params["predicate"]) == ["`key` = 'a'"]
    with pytest.raises(InvalidPredicateError, match=r"non-partition column 'value'. .*: \[key\]"):
        dt.optimize().where("value = 1").executeCompaction()


def _zorder_table(path: Path) -> None:
    """delta-spark's table: values 0..99, col1 = value % 7, col2 = value % 27, partitioned by p = value % 10,
    written by 4 tasks (here 4 appends), so each partition holds 4 files."""
    for task in range(4):
        values = [v for v in range(100) if (v // 10) % 4 == task]
        dvengine.write(pa.table({"value": values, "col1": [v % 7 for v in values], "col2": [v % 27 for v in values],
                                 "p": [v % 10 for v in values]}), str(path), mode="append", partitionBy=["p"])


def test_optimize_zorder_by(tmp_path: Path) -> None:
    _zorder_table(tmp_path)
    dt = DeltaTable.forPath(None, tmp_path)
    num_files_pre = len(dt.snapshot().files)
    metrics = dt.optimize().executeZOrderBy(["col1", "col2"])["metrics"]
    assert metrics["numFilesAdded"] == 10  # one file per partition
    assert metrics["numFilesRemoved"] == num_files_pre == 40
    assert metrics["totalFilesSkipped"] == 0
    assert metrics["totalConsideredFiles"] == num_files_pre
    assert metrics["zOrderStats"]["strategyName"] == "all"
    assert metrics["zOrderStats"]["numOutputCubes"] == 10
    before = _folder_state(tmp_path)
    with pytest.raises(InvalidArgumentError, match="p is a partition column. Z-Ordering can only be performed on data columns"):
        dt.optimize().where("p = 1").executeZOrderBy(["p"])
    with pytest.raises(TypeError, match="Z-order column must be str"):
        dt.optimize().executeZOrderBy([1])
    assert _folder_state(tmp_path) == before


def test_optimize_zorder_by_w_partition_filter(tmp_path: Path) -> None:
    _zorder_table(tmp_path)
    dt = DeltaTable.forPath(None, tmp_path)
    num_files_pre = sum(1 for f in dt.snapshot().files if f.partition_values["p"] == "2")
    metrics = dt.optimize().where("p = 2").executeZOrderBy(["col1", "col2"])["metrics"]
    assert metrics["numFilesAdded"] == 1
    assert metrics["numFilesRemoved"] == num_files_pre == 4
    assert metrics["totalFilesSkipped"] == 0
    assert metrics["totalConsideredFiles"] == num_files_pre
    assert metrics["zOrderStats"]["strategyName"] == "all"
    assert metrics["zOrderStats"]["numOutputCubes"] == 1


def test_optimize_returns_delta_sparks_dataframe_with_a_session(spark: Any, tmp_path: Path) -> None:
    _write(tmp_path, [("a", 1), ("a", 2)], mode="error")
    _write(tmp_path, [("a", 3), ("a", 4)])
    _write(tmp_path, [("b", 1), ("b", 2)])
    res = DeltaTable.forPath(spark, tmp_path).optimize().executeCompaction()
    row = res.first()
    assert row.path == str(tmp_path)
    assert (row.metrics.numFilesAdded, row.metrics.numFilesRemoved) == (1, 3)
    assert row.metrics.filesRemoved.totalFiles == 3
    assert row.metrics.deletionVectorStats is None


def test_convertToDelta(tmp_path: Path) -> None:
    rows = [("a", 1), ("b", 2), ("c", 3)]
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"key": ["a", "b"], "value": [1, 2]}), plain / "part-0.parquet")
    pq.write_table(pa.table({"key": ["c"], "value": [3]}), plain / "part-1.parquet")
    DeltaTable.convertToDelta(None, f"parquet.`{plain}`")
    assert rows_delta_rs(plain, KV) == rows_duckdb(plain, KV) == rows_arrow(plain, KV) == sort_rows(rows)

    for name, schema in (("ddl", "value int"), ("spark_type", None)):
        folder = tmp_path / name
        for key, value in rows:
            (folder / f"value={value}").mkdir(parents=True)
            pq.write_table(pa.table({"key": [key]}), folder / f"value={value}" / "part-0.parquet")
        if schema is None:
            from pyspark.sql.types import IntegerType, StructType

            dt = DeltaTable.convertToDelta(None, f"parquet.`{folder}`", StructType().add("value", IntegerType(), True))
        else:
            dt = DeltaTable.convertToDelta(None, f"parquet.`{folder}`", schema)
        assert type(dt) is type(DeltaTable.forPath(None, folder))
        assert dt.snapshot().partition_columns == ("value",)
        assert rows_delta_rs(folder, KV) == rows_duckdb(folder, KV) == rows_arrow(folder, KV) == sort_rows(rows)


def _feature_table(path: Path) -> DeltaTable:
    _write(path, [("a", 1)], mode="error", configuration={"delta.enableDeletionVectors": "false"})
    return DeltaTable.forPath(None, path)


def _versions(dt: DeltaTable) -> tuple[int, int]:
    p = dt.snapshot().protocol
    return p.min_reader_version, p.min_writer_version


def test_protocolUpgrade(tmp_path: Path) -> None:
    dt = _feature_table(tmp_path)
    dt.upgradeTableProtocol(1, 3)
    dt.upgradeTableProtocol(1, 2)  # downgrades are not applied: a no-op, as in delta-spark
    assert _versions(dt) == (1, 3)
    for bad in ("abc", [1], [], {}):
        with pytest.raises(ValueError, match="readerVersion"):
            dt.upgradeTableProtocol(bad, 3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="writerVersion"):
            dt.upgradeTableProtocol(1, bad)  # type: ignore[arg-type]


def test_addFeatureSupport(tmp_path: Path) -> None:
    dt = _feature_table(tmp_path)
    with pytest.raises(UnsupportedFeatureError, match="'abc'"):
        dt.addFeatureSupport("abc")
    for bad in (12345, [12345], {}, []):
        with pytest.raises(ValueError, match="featureName needs to be a string"):
            dt.addFeatureSupport(bad)  # type: ignore[arg-type]
    dt.addFeatureSupport("appendOnly")
    assert _versions(dt) == (1, 2)  # implied by writer version 2 already: a no-op
    dt.addFeatureSupport("deletionVectors")
    p = dt.snapshot().protocol
    assert _versions(dt) == (3, 7)
    assert sorted(p.writer_features or ()) == ["appendOnly", "deletionVectors", "invariants"]
    assert p.reader_features == ("deletionVectors",)


def test_dropFeatureSupport(tmp_path: Path) -> None:
    dt = _feature_table(tmp_path)
    dt.addFeatureSupport("deletionVectors")  # never used: no DV anywhere in history
    assert _versions(dt) == (3, 7)
    dt.dropFeatureSupport("deletionVectors")
    assert _versions(dt) == (1, 2)  # normalized back to the legacy protocol
    assert _last(tmp_path)["operation"] == "DROP FEATURE"
    with pytest.raises(UnsupportedFeatureError, match="__invalid_feature__"):
        dt.dropFeatureSupport("__invalid_feature__")
    with pytest.raises(OperationNotAllowedError, match="does not support feature 'deletionVectors'"):
        dt.dropFeatureSupport("deletionVectors")
    with pytest.raises(UnsupportedFeatureError, match="not implemented"):
        dt.dropFeatureSupport("appendOnly")
    for bad in (12345, [12345], {}, []):
        with pytest.raises(ValueError, match="featureName needs to be a string"):
            dt.dropFeatureSupport(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truncateHistory needs to be a boolean"):
        dt.dropFeatureSupport("deletionVectors", 12345)  # type: ignore[arg-type]
    assert _versions(dt) == (1, 2)


def test_clone(tmp_path: Path) -> None:
    src, t2, t3 = tmp_path / "src", tmp_path / "t2", tmp_path / "t3"
    _write(src, [("a", 1), ("b", 2), ("c", 3)], mode="error")
    _write(src, [("d", 4), ("e", 5), ("f", 6)], mode="overwrite")
    dt = DeltaTable.forPath(None, src)
    dt.clone(str(t2), True, False, {"foo": "bar"})
    assert DeltaTable.forPath(None, t2).snapshot().configuration["foo"] == "bar"
    assert rows_arrow(t2, KV) == rows_delta_rs(t2, KV) == [("d", 4), ("e", 5), ("f", 6)]
    dt.cloneAtVersion(0, str(t3), True)
    assert rows_arrow(t3, KV) == rows_delta_rs(t3, KV) == [("a", 1), ("b", 2), ("c", 3)]
    dt.clone(str(t3), True, True)
    assert rows_arrow(t3, KV) == rows_delta_rs(t3, KV) == [("d", 4), ("e", 5), ("f", 6)]
    assert _last(t3)["operationMetrics"]["numRemovedFiles"] == "1"
    t4 = tmp_path / "t4"
    first_commit_ms = DeltaTable.forPath(None, src).history()[-1]["timestamp"]
    stamp = dt_text(first_commit_ms)
    dt.cloneAtTimestamp(stamp, str(t4), True)
    assert rows_arrow(t4, KV) == [("a", 1), ("b", 2), ("c", 3)]
    with pytest.raises(TableAlreadyExistsError):
        dt.clone(str(t3), True, False)


def test_clone_invalid_inputs(tmp_path: Path) -> None:
    src, t2 = tmp_path / "src", str(tmp_path / "t2")
    _write(src, [("a", 1), ("b", 2), ("c", 3)], mode="error")
    dt = DeltaTable.forPath(None, src)
    cases = [
        (lambda: dt.clone(10), "target needs to be a string but got"),  # type: ignore[arg-type]
        (lambda: dt.clone(t2, isShallow=10), "isShallow needs to be a boolean but got"),  # type: ignore[arg-type]
        (lambda: dt.clone(t2, False, replace=10), "replace needs to be a boolean but got"),  # type: ignore[arg-type]
        (lambda: dt.clone(t2, False, False, properties=10), "properties needs to be a dict but got"),  # type: ignore[arg-type]
        (lambda: dt.clone(t2, False, False, properties={"key": 10}), "All property values including 10"),  # type: ignore[dict-item]
        (lambda: dt.cloneAtVersion("0", t2, False, False), "version needs to be an int but got"),  # type: ignore[arg-type]
        (lambda: dt.cloneAtTimestamp(10, t2, False, False), "timestamp needs to be a string but got"),  # type: ignore[arg-type]
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert not os.path.exists(t2)


def test_generate(tmp_path: Path) -> None:
    for i in range(10):
        dvengine.write(pa.table({"id": list(range(i * 10, i * 10 + 10))}), str(tmp_path), mode="append")
    dt = DeltaTable.forPath(None, tmp_path)
    dt.generate("symlink_format_manifest")
    lines = (tmp_path / "_symlink_format_manifest" / "manifest").read_text().splitlines()
    expected = {str(tmp_path / f.path) for f in dt.snapshot().files}
    assert len(lines) == 10 and {line.removeprefix("file:") for line in lines} == expected


# --- beyond delta-spark's tests ----------------------------------------------------------------


def _dv_table(path: Path, partitioned: bool) -> list[tuple[Any, ...]]:
    """Several small files per partition, then DV deletes; returns the model's rows."""
    model: list[tuple[Any, ...]] = []
    for batch in range(4):
        ids = list(range(batch * 50, batch * 50 + 50))
        rows = [(i, "even" if i % 2 == 0 else "odd") for i in ids]
        model.extend(rows)
        dvengine.write(pa.table({"id": ids, "p": [r[1] for r in rows]}), str(path), mode="append",
                       partitionBy=["p"] if partitioned else None)
    DeltaTable.forPath(None, path).delete("id % 7 = 0", mode="dv")
    return [r for r in model if r[0] % 7 != 0]


@pytest.mark.parametrize("partitioned", [False, True])
def test_optimize_removes_dvs_and_all_readers_agree(tmp_path: Path, partitioned: bool) -> None:
    model = _dv_table(tmp_path, partitioned)
    dt = DeltaTable.forPath(None, tmp_path)
    dv_files = [f for f in dt.snapshot().files if f.deletion_vector is not None]
    assert dv_files
    res = dt.optimize().executeCompaction()["metrics"]
    snap = dt.snapshot()
    assert all(f.deletion_vector is None for f in snap.files)
    assert len(snap.files) == (2 if partitioned else 1)
    assert res["deletionVectorStats"] == {
        "numDeletionVectorsRemoved": len(dv_files),
        "numDeletionVectorRowsRemoved": sum(f.deletion_vector.cardinality for f in dv_files if f.deletion_vector),
    }
    assert res["partitionsOptimized"] == (2 if partitioned else 1)
    assert res["filesRemoved"]["totalFiles"] == res["numFilesRemoved"] == (8 if partitioned else 4)
    commit = _last(tmp_path)
    assert commit["operation"] == "OPTIMIZE"
    log = (tmp_path / "_delta_log" / f"{snap.version:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in log]
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    cols = ["id", "p"]
    want = sort_rows(model)
    assert rows_arrow(tmp_path, cols) == rows_delta_rs(tmp_path, cols) == rows_duckdb(tmp_path, cols) == want
    # time travel still sees the DV'd version, with the same rows
    assert sort_rows([(r["id"], r["p"]) for r in dt.toArrow(version=snap.version - 1).to_pylist()]) == want


def test_optimize_follows_deltas_size_and_ratio_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dv_table(tmp_path, partitioned=False)
    dt = DeltaTable.forPath(None, tmp_path)
    sizes = sorted(f.size for f in dt.snapshot().files)
    # every file counts as large, and no DV deletes more than the ratio allows: nothing to do
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MINFILESIZE", "1")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXDELETEDROWSRATIO", "0.5")
    version = dt.version()
    res = dt.optimize().executeCompaction()["metrics"]
    assert (res["numFilesRemoved"], res["totalFilesSkipped"], dt.version()) == (0, 4, version)
    # ratio 0.1 < 7/50: every DV'd file qualifies; maxFileSize fits two files per bin (the two largest)
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXDELETEDROWSRATIO", "0.1")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXFILESIZE", str(sizes[2] + sizes[3]))
    res = dt.optimize().executeCompaction()["metrics"]
    assert (res["numFilesRemoved"], res["numFilesAdded"], res["numBins"]) == (4, 2, 2)
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXDELETEDROWSRATIO", "1.5")
    with pytest.raises(InvalidArgumentError, match="maxDeletedRowsRatio"):
        dt.optimize().executeCompaction()


def test_failed_optimize_leaves_the_table_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dv_table(tmp_path, partitioned=True)
    before = _folder_state(tmp_path)
    dt = DeltaTable.forPath(None, tmp_path)
    with pytest.raises(InvalidPredicateError):
        dt.optimize().where("id > 3").executeCompaction()
    from dvengine.commit import transaction

    def refuse(*args: Any, **kwargs: Any) -> int:
        raise OSError("disk full (injected)")

    monkeypatch.setattr(transaction.Transaction, "commit", refuse)
    with pytest.raises(OSError, match="injected"):
        dt.optimize().executeCompaction()
    assert _folder_state(tmp_path) == before


def test_shallow_clone_with_dvs_reads_writes_and_vacuums_apart_from_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB is left out: its delta extension here prefixes every add.path with the table root
    (duckdb/duckdb-delta#74), so it cannot read any shallow clone's absolute paths."""
    src, clone = tmp_path / "src", tmp_path / "clone"
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")  # DV files ('u'), not inline DVs
    model = _dv_table(src, partitioned=True)
    source_before = _folder_state(src)
    c = DeltaTable.forPath(None, src).clone(str(clone), isShallow=True)
    source_dvs = {f.path: f.deletion_vector for f in DeltaTable.forPath(None, src).snapshot().files}
    files = c.snapshot().files
    assert all(f.path.startswith(f"file://{src}/") for f in files)
    assert any(f.deletion_vector is not None and f.deletion_vector.storage_type == "p" for f in files)
    for f in files:
        old = source_dvs[os.path.relpath(f.path.removeprefix("file://"), src)]
        assert (old is None) == (f.deletion_vector is None)
        if old is not None and f.deletion_vector is not None:
            assert old.storage_type == "u" and f.deletion_vector.storage_type == "p"
            assert f.deletion_vector.path_or_inline_dv.startswith(f"file://{src}/deletion_vector_")
            assert (f.deletion_vector.offset, f.deletion_vector.cardinality) == (old.offset, old.cardinality)
    cols = ["id", "p"]
    assert rows_arrow(clone, cols) == rows_delta_rs(clone, cols) == sort_rows(model)
    c.delete("id < 20", mode="dv")
    c.update("id = 101", {"p": "'changed'"}, mode="rewrite")
    clone_model = [(i, "changed" if i == 101 else p) for i, p in model if i >= 20]
    c.vacuum(0.0, enforceRetention=False)
    assert rows_arrow(clone, cols) == rows_delta_rs(clone, cols) == sort_rows(clone_model)
    assert _folder_state(src) == source_before  # nothing written, nothing deleted in the source
    assert rows_arrow(src, cols) == sort_rows(model)


def test_deep_clone_is_independent_and_readable_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, deep = tmp_path / "src", tmp_path / "deep"
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    model = _dv_table(src, partitioned=True)
    d = DeltaTable.forPath(None, src).clone(str(deep), isShallow=False)
    files = d.snapshot().files
    assert all("://" not in f.path for f in files)
    assert any(f.deletion_vector is not None for f in files)
    assert all(f.deletion_vector is None or f.deletion_vector.storage_type == "u" for f in files)
    shutil.rmtree(src)
    cols = ["id", "p"]
    assert rows_arrow(deep, cols) == rows_delta_rs(deep, cols) == rows_duckdb(deep, cols) == sort_rows(model)


def test_convert_refuses_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    (folder / "part=1").mkdir(parents=True)
    (folder / "part=x").mkdir(parents=True)
    pq.write_table(pa.table({"v": [1]}), folder / "part=1" / "a.parquet")
    pq.write_table(pa.table({"v": [2]}), folder / "part=x" / "b.parquet")
    before = _folder_state(folder)
    with pytest.raises(InvalidArgumentError, match="parquet.`"):
        DeltaTable.convertToDelta(None, f"delta.`{folder}`")
    with pytest.raises(SchemaMismatchError, match="'x'.*'part'"):
        DeltaTable.convertToDelta(None, f"parquet.`{folder}`", "part int")
    with pytest.raises(SchemaMismatchError, match="partition column"):
        DeltaTable.convertToDelta(None, f"parquet.`{folder}`")
    with pytest.raises(InvalidArgumentError, match="unsupported type"):
        DeltaTable.convertToDelta(None, f"parquet.`{folder}`", "part widget")
    shutil.rmtree(folder / "part=x")
    pq.write_table(pa.table({"v": ["text"]}), folder / "part=1" / "c.parquet")
    with pytest.raises(SchemaMismatchError, match="column 'v'"):
        DeltaTable.convertToDelta(None, f"parquet.`{folder}`", "part int")
    assert not (folder / "_delta_log").exists()
    assert set(_folder_state(folder)) == (set(before) - {"part=x/b.parquet"}) | {"part=1/c.parquet"}


def test_convert_stats_match_the_files(tmp_path: Path) -> None:
    pq.write_table(pa.table({"v": [5, 1, None, 9]}), tmp_path / "f.parquet")
    dt = DeltaTable.convertToDelta(None, f"parquet.`{tmp_path}`")
    stats = json.loads(dt.snapshot().files[0].stats or "{}")
    assert (stats["numRecords"], stats["minValues"]["v"], stats["maxValues"]["v"], stats["nullCount"]["v"]) == (4, 1, 9, 1)
    assert rows_duckdb(tmp_path, ["v"]) == rows_delta_rs(tmp_path, ["v"]) == sort_rows([(5,), (1,), (None,), (9,)])


def test_generate_refuses_dvs_and_writes_per_partition(tmp_path: Path) -> None:
    _dv_table(tmp_path, partitioned=True)
    dt = DeltaTable.forPath(None, tmp_path)
    before = _folder_state(tmp_path)
    with pytest.raises(OperationNotAllowedError, match="deletion vectors"):
        dt.generate("symlink_format_manifest")
    assert _folder_state(tmp_path) == before
    with pytest.raises(InvalidArgumentError, match="mode"):
        dt.generate("other")
    dt.optimize().executeCompaction()
    dt.generate("symlink_format_manifest")
    for part in ("even", "odd"):
        lines = (tmp_path / "_symlink_format_manifest" / f"p={part}" / "manifest").read_text().splitlines()
        live = {str(tmp_path / f.path) for f in dt.snapshot().files if f.partition_values["p"] == part}
        assert {line.removeprefix("file:") for line in lines} == live


def test_drop_dv_feature_purges_then_stops_while_history_has_dvs(tmp_path: Path) -> None:
    model = _dv_table(tmp_path, partitioned=False)
    dt = DeltaTable.forPath(None, tmp_path)
    with pytest.raises(OperationNotAllowedError, match="still reference DVs"):
        dt.dropFeatureSupport("deletionVectors")
    snap = dt.snapshot()
    assert snap.configuration["delta.enableDeletionVectors"] == "false"
    assert all(f.deletion_vector is None for f in snap.files)
    assert "deletionVectors" in (snap.protocol.writer_features or ())
    assert rows_arrow(tmp_path, ["id", "p"]) == rows_delta_rs(tmp_path, ["id", "p"]) == sort_rows(model)


def test_optimize_conflicts_with_a_concurrent_delete_of_its_files(tmp_path: Path) -> None:
    from dvengine.engine.local.optimize import rewrite_files
    from dvengine.errors import CommitConflictError
    from dvengine.log import load_snapshot
    from dvengine.maintenance.optimize import OptimizeSettings, plan_optimize, run_optimize

    model = _dv_table(tmp_path, partitioned=False)
    plan = plan_optimize(load_snapshot(str(tmp_path)), None, OptimizeSettings())
    DeltaTable.forPath(None, tmp_path).delete("id = 2", mode="dv")  # re-DVs a file OPTIMIZE is compacting
    after_delete = _folder_state(tmp_path)
    with pytest.raises(CommitConflictError):
        run_optimize(plan, rewrite_files)
    assert _folder_state(tmp_path) == after_delete
    assert rows_arrow(tmp_path, ["id", "p"]) == sort_rows([r for r in model if r[0] != 2])


def test_optimize_is_not_invalidated_by_a_concurrent_append(tmp_path: Path) -> None:
    from dvengine.engine.local.optimize import rewrite_files
    from dvengine.log import load_snapshot
    from dvengine.maintenance.optimize import OptimizeSettings, plan_optimize, run_optimize

    model = _dv_table(tmp_path, partitioned=False)
    plan = plan_optimize(load_snapshot(str(tmp_path)), None, OptimizeSettings())
    dvengine.write(pa.table({"id": [1000], "p": ["new"]}), str(tmp_path), mode="append")
    _metrics, version = run_optimize(plan, rewrite_files)
    assert version == DeltaTable.forPath(None, tmp_path).version()
    want = sort_rows([*model, (1000, "new")])
    assert rows_arrow(tmp_path, ["id", "p"]) == rows_delta_rs(tmp_path, ["id", "p"]) == want


def test_convert_spark_style_int96_timestamps_and_null_partitions(tmp_path: Path) -> None:
    """Spark writes TIMESTAMP as INT96 by default: Delta types it ``timestamp`` (UTC), not NTZ."""
    import datetime as dt

    ts = pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC"))
    for folder in ("day=__HIVE_DEFAULT_PARTITION__", "day=2024-01-02"):
        (tmp_path / folder).mkdir()
        pq.write_table(pa.table({"ts": ts, "n": [1, 2]}), tmp_path / folder / "f.parquet", use_deprecated_int96_timestamps=True)
    dt_ = DeltaTable.convertToDelta(None, f"parquet.`{tmp_path}`", "day date")
    assert [(f.name, f.type.simple_string()) for f in dt_.snapshot().schema.fields] == [
        ("ts", "timestamp"), ("n", "long"), ("day", "date")
    ]
    noon = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    want = sort_rows([(noon, 1, None), (None, 2, None), (noon, 1, dt.date(2024, 1, 2)), (None, 2, dt.date(2024, 1, 2))])
    cols = ["ts", "n", "day"]
    assert rows_arrow(tmp_path, cols) == rows_delta_rs(tmp_path, cols) == rows_duckdb(tmp_path, cols) == want


def test_spark_reads_shallow_clones_and_converted_tables(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interop import rows_spark

    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    src, clone, plain = tmp_path / "src", tmp_path / "clone", tmp_path / "plain"
    model = _dv_table(src, partitioned=True)
    DeltaTable.forPath(spark, src).clone(str(clone), isShallow=True)
    assert rows_spark(spark, clone, ["id", "p"]) == sort_rows(model)
    plain.mkdir()
    pq.write_table(pa.table({"key": ["a", "b"], "value": [1, 2]}), plain / "part-0.parquet")
    DeltaTable.convertToDelta(spark, f"parquet.`{plain}`")
    assert rows_spark(spark, plain, KV) == [("a", 1), ("b", 2)]


@pytest.mark.parametrize("name", ["dv-partitioned-with-checkpoint", "basic-dv-no-checkpoint"])
def test_optimize_and_clone_golden_delta_spark_dv_tables(
    golden_copy: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Tables whose DVs Delta Spark wrote: a shallow clone and OPTIMIZE give the expected rows."""
    from conftest import load_expected

    expected = load_expected(name)
    latest = max(expected["versions"], key=int)
    want = sort_rows(expected["versions"][latest]["rows"])
    cols = expected["columns"]
    path = golden_copy(name)
    clone = tmp_path / "clone"
    DeltaTable.forPath(None, path).clone(str(clone), isShallow=True)
    assert rows_arrow(clone, cols) == rows_delta_rs(clone, cols) == want
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXDELETEDROWSRATIO", "0")
    before = DeltaTable.forPath(None, path).snapshot().files
    def part(f: Any) -> str:
        return json.dumps(dict(f.partition_values), sort_keys=True)

    per_partition = Counter(part(f) for f in before)
    # Delta's rule: a file alone in its partition forms a one-file bin, which OPTIMIZE skips
    lone_dv_files = sorted(f.path for f in before if f.deletion_vector is not None and per_partition[part(f)] == 1)
    DeltaTable.forPath(None, path).optimize().executeCompaction()
    snap = DeltaTable.forPath(None, path).snapshot()
    assert sorted(f.path for f in snap.files if f.deletion_vector is not None) == lone_dv_files
    assert len(snap.files) == len(per_partition)
    assert rows_arrow(path, cols) == rows_delta_rs(path, cols) == rows_duckdb(path, cols) == want
    assert rows_arrow(clone, cols) == want  # the clone still reads the source's old files


def test_failed_clone_and_bad_protocol_requests_leave_everything_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, deep, busy = tmp_path / "src", tmp_path / "deep", tmp_path / "busy"
    monkeypatch.setenv("DVENGINE_DV_INLINEMAXBYTES", "0")
    _dv_table(src, partitioned=True)
    source_before = _folder_state(src)
    busy.mkdir()
    (busy / "notes.txt").write_text("not a table")
    dt = DeltaTable.forPath(None, src)
    with pytest.raises(InvalidArgumentError, match="non-empty folder"):
        dt.clone(str(busy), isShallow=True)
    with pytest.raises(InvalidArgumentError, match="must not be the source"):
        dt.clone(str(src / "inner"), isShallow=True)
    with pytest.raises(InvalidArgumentError, match="delta.appendOnly"):
        dt.clone(str(deep), isShallow=True, properties={"delta.appendOnly": "maybe"})
    from dvengine.commit import transaction

    def refuse(*args: Any, **kwargs: Any) -> int:
        raise OSError("disk full (injected)")

    with monkeypatch.context() as m:
        m.setattr(transaction.Transaction, "commit", refuse)
        with pytest.raises(OSError, match="injected"):
            dt.clone(str(deep), isShallow=False)
    assert _folder_state(deep) == {}  # every copied data and DV file removed again
    assert _folder_state(busy) == {"notes.txt": b"not a table"}
    version = dt.version()
    with pytest.raises(InvalidArgumentError, match="readerVersion must be 1, 2 or 3"):
        dt.upgradeTableProtocol(4, 7)
    with pytest.raises(InvalidArgumentError, match="requires writerVersion 7"):
        dt.upgradeTableProtocol(3, 5)
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV1"):
        dt.addFeatureSupport("icebergCompatV1")  # a Delta feature dvengine could not honour when writing
    assert dt.version() == version
    assert _folder_state(src) == source_before


def test_drop_check_constraints_normalizes_to_legacy(tmp_path: Path) -> None:
    dt = _feature_table(tmp_path)
    dt.addFeatureSupport("checkConstraints")
    p = dt.snapshot().protocol
    assert (p.min_reader_version, p.min_writer_version) == (1, 7)
    assert sorted(p.writer_features or ()) == ["appendOnly", "checkConstraints", "invariants"]
    dt.dropFeatureSupport("checkConstraints")
    assert _versions(dt) == (1, 2)
    assert rows_arrow(tmp_path, KV) == rows_delta_rs(tmp_path, KV) == [("a", 1)]
