"""Liquid clustering (issue #22 item 2): clusterBy / CLUSTER BY create what PROTOCOL.md and Delta
Spark's ClusteringMetadataDomain prescribe; OPTIMIZE clusters incrementally (Delta's ZCube rules)
and keeps rows equal to a model and to delta-rs / DuckDB reads; the domain survives checkpoints
and replay; Delta's refusals are typed errors that leave the folder as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from clustering_rows import append_xys
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import load_snapshot
from dvengine.log.checkpoint_writer import write_checkpoint
from dvengine.maintenance.clustering import clustering_columns
from dvengine.protocol.actions import DomainMetadata, action_to_line
from dvengine.sqlcmd import table_statements
from dvengine.sqlcmd.parse import parse_sql

COLS = ["x", "y", "s"]


def _clustered(path: Path, *cols: str) -> DeltaTable:
    """A clustered table, opened session-less: ``create(None)`` takes the active SparkSession when another
    test left one (as delta-spark does), and the table it returns would then answer with DataFrames."""
    (DeltaTable.create(None).location(str(path)).addColumn("x", "BIGINT").addColumn("y", "BIGINT")
     .addColumn("s", "STRING").clusterBy(*cols).execute())
    return DeltaTable.forPath(None, str(path))


def _log(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _files_touched(path: Path, column: str, value: int) -> int:
    from deltalake import DeltaTable as RsTable

    adds = pa.table(RsTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    return sum(1 for a in adds if a[f"min.{column}"] <= value <= a[f"max.{column}"])


def _folder(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, path)] = Path(full).read_bytes()
    return out


def test_cluster_by_creates_the_features_and_domain_delta_expects(tmp_path: Path) -> None:
    _clustered(tmp_path, "x", "Y")
    actions = _log(tmp_path, 0)
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert protocol["minWriterVersion"] == 7
    assert {"clustering", "domainMetadata", "deletionVectors"} <= set(protocol["writerFeatures"])
    domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
    # ClusteringMetadataDomain(clusteringColumns: Seq[Seq[String]]) as JSON, schema spelling
    assert domains == [{"domain": "delta.clustering", "configuration": '{"clusteringColumns":[["x"],["y"]]}', "removed": False}]
    metadata = next(a["metaData"] for a in actions if "metaData" in a)
    assert metadata["partitionColumns"] == [] and "delta.feature.clustering" not in metadata["configuration"]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operationParameters"]["clusterBy"] == '["x","y"]'  # CreateTable: JsonUtils.toJson(clusterBy), compact
    detail = DeltaTable.forPath(None, tmp_path).detail()
    assert detail["clusteringColumns"] == ["x", "y"]
    assert {"clustering", "domainMetadata"} <= set(detail["tableFeatures"])


def test_optimize_clusters_keeps_rows_and_makes_both_columns_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dt = _clustered(tmp_path, "x", "y")
    model = append_xys(tmp_path, 8, 2000, seed=1)
    dt.delete("y % 9 = 0", mode="dv")
    model = [r for r in model if r[1] % 9 != 0]
    before = dt.snapshot().files
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXFILESIZE", str(sum(f.size for f in before) // 16))
    probes = [5, 250, 499, 800]
    assert all(_files_touched(tmp_path, c, v) == 8 for c in ("x", "y") for v in probes)

    res = dt.optimize().executeCompaction()["metrics"]

    snap = dt.snapshot()
    assert res["numFilesRemoved"] == 8 and res["numFilesAdded"] == len(snap.files) == 16
    assert all(f.deletion_vector is None and f.clustering_provider == "liquid" for f in snap.files)
    cubes = {f.tags["ZCUBE_ID"] for f in snap.files if f.tags}
    assert len(cubes) == 1 and all(f.tags and f.tags["ZCUBE_ZORDER_BY"] == '["x","y"]' for f in snap.files)
    want = sort_rows(model)
    assert rows_arrow(tmp_path, COLS) == rows_delta_rs(tmp_path, COLS) == rows_duckdb(tmp_path, COLS) == want
    for column in ("x", "y"):
        touched = [_files_touched(tmp_path, column, v) for v in probes]
        assert max(touched) <= 5, (column, touched)  # Hilbert on a 4 x 4 grid: ~4 of 16
    actions = _log(tmp_path, snap.version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE"
    params = info["operationParameters"]
    # DeltaOperations.Optimize on a clustered table: zOrderBy empty, isFull a JSON boolean
    assert params == {"predicate": "[]", "zOrderBy": "[]", "clusterBy": '["x","y"]', "auto": False, "isFull": False}
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    assert all(a["add"]["clusteringProvider"] == "liquid" for a in actions if "add" in a)

    # one ZCube and nothing new: nothing to do
    assert dt.optimize().executeCompaction()["metrics"]["numFilesAdded"] == 0
    assert dt.snapshot().version == snap.version


def test_optimize_is_incremental_once_a_zcube_is_big_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dt = _clustered(tmp_path, "y")
    model = append_xys(tmp_path, 3, 500, seed=2)
    dt.optimize().executeCompaction()
    first = {f.path for f in dt.snapshot().files}
    model += append_xys(tmp_path, 2, 300, seed=3)
    dt.delete("x < 100", mode="dv")  # clustered files keep their ZCube tags with a DV
    model = [r for r in model if r[0] >= 100]
    assert all(f.clustering_provider == "liquid" for f in dt.snapshot().files if f.path in first)
    # ZCubes of at least minCubeSize are finished: only the two new files are clustered
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD", "1")
    res = dt.optimize().executeCompaction()["metrics"]
    assert res["numFilesRemoved"] == 2 and res["numFilesAdded"] == 1
    snap = dt.snapshot()
    assert first <= {f.path for f in snap.files}
    assert len({f.tags["ZCUBE_ID"] for f in snap.files if f.tags}) == 2
    # by default (100 GB cubes) everything small is merged into one new ZCube, DVs dropped
    monkeypatch.delenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD")
    res = dt.optimize().executeCompaction()["metrics"]
    snap = dt.snapshot()
    assert res["numFilesRemoved"] == 2 and len(snap.files) == 1 and snap.files[0].deletion_vector is None
    assert rows_delta_rs(tmp_path, COLS) == rows_duckdb(tmp_path, COLS) == rows_arrow(tmp_path, COLS) == sort_rows(model)
    # one column: the curve is the range id (rank * 1000 // rows, equal values together), so the
    # file holds the rows in non-decreasing range id
    stored = dt.toArrow()["y"].to_pylist()
    ordered = sorted(stored)
    ids = [ordered.index(v) * 1000 // len(stored) for v in stored]
    assert ids == sorted(ids)


def test_clustering_refusals_are_typed_and_write_nothing(tmp_path: Path) -> None:
    target = tmp_path / "t"

    def builder() -> Any:
        return DeltaTable.create(None).location(str(target)).addColumn("x", "BIGINT").addColumn("y", "BIGINT")

    with pytest.raises(InvalidArgumentError, match="Clustering and partitioning cannot both be specified"):
        builder().partitionedBy("y").clusterBy("x").execute()
    with pytest.raises(InvalidArgumentError, match="CLUSTER BY supports up to 4 clustering columns, but the table has 5"):
        builder().addColumn("a", "INT").addColumn("b", "INT").addColumn("c", "INT").clusterBy("x", "y", "a", "b", "c").execute()
    with pytest.raises(InvalidArgumentError, match="'nope'"):
        builder().clusterBy("nope").execute()
    with pytest.raises(InvalidArgumentError, match="Couldn't find clustering column.*'y'"):
        builder().property("delta.dataSkippingNumIndexedCols", "1").clusterBy("y").execute()
    with pytest.raises(TypeError, match="Clustering column must be str"):
        builder().clusterBy("x", 3)
    assert not target.exists()

    dt = _clustered(target, "x")
    append_xys(target, 2, 10, seed=4)
    state = _folder(target)
    with pytest.raises(OperationNotAllowedError, match=r"cannot specify ZORDER BY. Please remove ZORDER BY \(y\)"):
        dt.optimize().executeZOrderBy("y")
    with pytest.raises(OperationNotAllowedError, match="doesn't support partition predicates"):
        dt.optimize().where("x = 1").executeCompaction()
    DeltaTable.forPath(None, target).addFeatureSupport("clustering")  # supported already: a no-op (folder checked below)
    plain = tmp_path / "plain"
    dvengine.write(pa.table({"x": [1]}), str(plain))
    with pytest.raises(UnsupportedFeatureError, match="clusterBy"):
        DeltaTable.forPath(None, plain).addFeatureSupport("clustering")
    with pytest.raises(InvalidArgumentError, match="Replacing clustered table"):
        (DeltaTable.replace(None).location(str(target)).addColumn("x", "BIGINT").addColumn("p", "STRING")
         .partitionedBy("p").execute())
    assert _folder(target) == state


def test_replace_without_cluster_by_empties_the_domain(tmp_path: Path) -> None:
    _clustered(tmp_path, "x")
    DeltaTable.replace(None).location(str(tmp_path)).addColumn("x", "BIGINT").execute()
    snap = load_snapshot(str(tmp_path))
    assert snap.domain_metadata["delta.clustering"].configuration == '{"clusteringColumns":[]}'
    assert clustering_columns(snap) == [] and "clustering" in (snap.protocol.writer_features or ())
    for batch in ([3, 1], [2]):
        dvengine.write(pa.table({"x": batch}), str(tmp_path), mode="append")
    dt = DeltaTable.forPath(None, tmp_path)
    res = dt.optimize().executeCompaction()["metrics"]  # plain compaction: one bin, files unclustered
    assert res["numFilesRemoved"] == 2 and all(f.clustering_provider is None for f in dt.snapshot().files)
    assert dt.history(1)[0]["operationParameters"]["clusterBy"] == "[]"


def test_domain_survives_checkpoints_and_replay_drops_a_removed_one(tmp_path: Path) -> None:
    dt = _clustered(tmp_path, "y", "x")
    model = append_xys(tmp_path, 3, 50, seed=5)
    write_checkpoint(load_snapshot(str(tmp_path)))
    for v in range(3):  # only the checkpoint and the commits after it remain
        (tmp_path / "_delta_log" / f"{v:020d}.json").unlink()
    snap = load_snapshot(str(tmp_path))
    assert clustering_columns(snap) == ["y", "x"]
    dt.optimize().executeCompaction()
    assert rows_delta_rs(tmp_path, COLS) == rows_duckdb(tmp_path, COLS) == sort_rows(model)
    clustered = load_snapshot(str(tmp_path))
    assert all(f.clustering_provider == "liquid" and f.tags for f in clustered.files)
    # a checkpoint keeps clusteringProvider and the ZCube tags (a column only clustered tables' checkpoints have)
    write_checkpoint(clustered)
    (tmp_path / "_delta_log" / f"{clustered.version:020d}.json").unlink()
    again = load_snapshot(str(tmp_path))
    assert {(f.path, f.clustering_provider, tuple(sorted((f.tags or {}).items()))) for f in again.files} == {
        (f.path, f.clustering_provider, tuple(sorted((f.tags or {}).items()))) for f in clustered.files
    }
    assert rows_duckdb(tmp_path, COLS) == sort_rows(model)
    # a later removed=true action drops the domain, in replay and in the next checkpoint
    version = load_snapshot(str(tmp_path)).version + 1
    removed = DomainMetadata("delta.clustering", '{"clusteringColumns":[["y"],["x"]]}', removed=True)
    (tmp_path / "_delta_log" / f"{version:020d}.json").write_text(action_to_line(removed) + "\n")
    snap = load_snapshot(str(tmp_path))
    assert "delta.clustering" not in snap.domain_metadata and clustering_columns(snap) == []
    write_checkpoint(snap)
    for v in range(3, version + 1):
        path = tmp_path / "_delta_log" / f"{v:020d}.json"
        if path.exists():
            path.unlink()
    assert load_snapshot(str(tmp_path)).domain_metadata == {}
    assert rows_delta_rs(tmp_path, COLS) == sort_rows(model)


def test_sql_create_cluster_by_parses_and_creates(tmp_path: Path) -> None:
    (stmt,) = parse_sql(f"CREATE TABLE delta.`{tmp_path}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (y, x)")
    assert stmt.cluster_by == ("y", "x")  # type: ignore[union-attr]
    table_statements.create_table(None, stmt)  # type: ignore[arg-type]
    assert clustering_columns(load_snapshot(str(tmp_path))) == ["y", "x"]


def test_sql_cluster_by_and_optimize_with_a_session(spark: Any, tmp_path: Path) -> None:
    dvengine.sql(spark, f"CREATE TABLE delta.`{tmp_path}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (x, y)")
    model = append_xys(tmp_path, 3, 100, seed=6)
    detail = dvengine.sql(spark, f"DESCRIBE DETAIL delta.`{tmp_path}`").collect()[0]
    assert list(detail.clusteringColumns) == ["x", "y"]
    out = dvengine.sql(spark, f"OPTIMIZE delta.`{tmp_path}`").collect()[0]
    assert out.metrics.numFilesRemoved == 3 and out.metrics.numFilesAdded == 1
    assert all(f.clustering_provider == "liquid" for f in load_snapshot(str(tmp_path)).files)
    assert sorted(tuple(r) for r in DeltaTable.forPath(spark, tmp_path).toDF().select(*COLS).collect()) == sort_rows(model)


def test_auto_compaction_of_a_clustered_table_clusters_incrementally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta's AutoCompact hands a clustered table to OPTIMIZE's ClusteringStrategy: a stream of
    appends, MERGEs and DELETEs with auto compaction on stays clustered (new ZCubes along the
    curve, ``clusterBy`` and ``auto`` in commitInfo), and cubes at least minCubeSize big are left
    alone; rows equal a model and delta-rs / DuckDB reads throughout."""
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_AUTOCOMPACT_ENABLED", "true")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_AUTOCOMPACT_MINNUMFILES", "4")
    dt = _clustered(tmp_path, "x", "y")

    def last_info() -> dict[str, Any]:
        return next(a["commitInfo"] for a in _log(tmp_path, dt.snapshot().version) if "commitInfo" in a)

    def readers_agree(model: list[tuple[Any, ...]]) -> None:
        assert rows_arrow(tmp_path, COLS) == rows_delta_rs(tmp_path, COLS) == rows_duckdb(tmp_path, COLS) == sort_rows(model)

    model = append_xys(tmp_path, 3, 200, seed=5)
    assert last_info()["operation"] == "WRITE" and len(dt.snapshot().files) == 3  # 3 small files: below minNumFiles
    model += append_xys(tmp_path, 1, 200, seed=6)  # the 4th small file: auto compaction clusters all four
    info = last_info()
    assert info["operation"] == "OPTIMIZE"
    params = info["operationParameters"]
    assert params == {"predicate": "[]", "zOrderBy": "[]", "clusterBy": '["x","y"]', "auto": True, "isFull": False}
    snap = dt.snapshot()
    assert len(snap.files) == 1 and snap.files[0].clustering_provider == "liquid"
    assert snap.files[0].tags is not None and snap.files[0].tags["ZCUBE_ZORDER_BY"] == '["x","y"]'
    readers_agree(model)

    # cubes of at least 1 byte are finished: the next compaction clusters only the new files
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD", "1")
    first = snap.files[0]
    model += append_xys(tmp_path, 2, 100, seed=7)
    source = pa.table({"x": [model[0][0], 5000], "y": [model[0][1], 5000], "s": [model[0][2], "new"]})
    (dt.alias("t").merge(source, "t.s = s.s", source_alias="s")
     .whenMatchedUpdate(set={"x": "s.x + 1"}).whenNotMatchedInsertAll().execute())
    model = [(r[0] + 1, r[1], r[2]) if r[2] == model[0][2] else r for r in model] + [(5000, 5000, "new")]
    assert last_info()["operationParameters"]["auto"] is True  # first cube + 2 appends + the MERGE's file
    snap = dt.snapshot()
    assert first.path in {f.path for f in snap.files}  # with the DV of the MERGE's update, not rewritten
    assert all(f.clustering_provider == "liquid" and f.tags and "ZCUBE_ID" in f.tags for f in snap.files)
    assert len({f.tags["ZCUBE_ID"] for f in snap.files if f.tags}) == 2
    readers_agree(model)

    # by default (100 GB cubes) the next trigger merges every small cube into one: here the DELETE's
    # DVs hide ~10 % of both files' rows (over maxDeletedRowsRatio), and the DVs are purged with it
    monkeypatch.delenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD")
    dt.delete("x < 100", mode="dv")
    model = [r for r in model if r[0] >= 100]
    snap = dt.snapshot()
    assert last_info()["operationParameters"]["auto"] is True
    assert len(snap.files) == 1 and snap.files[0].deletion_vector is None
    assert first.tags is not None and snap.files[0].tags is not None
    assert snap.files[0].tags["ZCUBE_ID"] != first.tags["ZCUBE_ID"]
    readers_agree(model)
