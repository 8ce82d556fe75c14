"""DELETE: candidate finding, DVs vs rewrite vs remove, metrics, and failure modes.

Truth is an in-memory model of the rows, checked through four independent readers
(dvengine Arrow and Spark, delta-rs, DuckDB/delta-kernel-rs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from dml_helpers import data_listing, log_listing, make_table, spark_conf
from interop import assert_all_readers
from pyspark.sql import functions as F

from dvengine import DeltaTable
from dvengine.errors import (
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    InvalidArgumentError,
    InvalidPredicateError,
    OperationNotAllowedError,
    UnsupportedFeatureError,
)
from dvengine.log import load_snapshot

COLS = ["id", "name", "part"]


@pytest.mark.parametrize("mode", ["dv", "rewrite", "auto"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_delete_matches_model_in_every_mode(spark: Any, tmp_path: Path, mode: str, partitioned: bool) -> None:
    rows = make_table(spark, tmp_path / "t", partition_by=["part"] if partitioned else None)
    table = DeltaTable.forPath(spark, tmp_path / "t")
    metrics = table.deleteMetrics("id % 10 = 3 OR name = 'n5'", mode=mode)
    model = [r for r in rows if not (r[0] % 10 == 3 or r[1] == "n5")]
    assert metrics["numDeletedRows"] == len(rows) - len(model)
    if mode == "dv":
        assert metrics["numDeletionVectorsAdded"] > 0
        assert metrics["numAddedFiles"] == 0 and metrics["numCopiedRows"] == 0
    elif mode == "rewrite":
        assert metrics["numDeletionVectorsAdded"] == 0 and metrics["numAddedFiles"] > 0
        assert metrics["numCopiedRows"] == len(model)
    assert_all_readers(spark, tmp_path / "t", COLS, model)
    # A second delete on files that now carry DVs must union with them.
    metrics = table.deleteMetrics("id < 50", mode=mode)
    model2 = [r for r in model if r[0] >= 50]
    assert metrics["numDeletedRows"] == len(model) - len(model2)
    assert_all_readers(spark, tmp_path / "t", COLS, model2)


def test_dv_commit_shape_follows_protocol(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t", files=1)
    DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 7", mode="dv")
    lines = [json.loads(x) for x in (tmp_path / "t/_delta_log/00000000000000000001.json").read_text().splitlines()]
    kinds = [next(iter(x)) for x in lines]
    assert kinds[0] == "commitInfo" and sorted(kinds[1:]) == ["add", "remove"]
    add = next(x["add"] for x in lines if "add" in x)
    remove = next(x["remove"] for x in lines if "remove" in x)
    assert add["path"] == remove["path"] and "deletionVector" not in remove
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == 200 and stats["tightBounds"] is False
    assert add["deletionVector"]["cardinality"] == 1
    assert remove["extendedFileMetadata"] is True and remove["size"] == add["size"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "DELETE" and info["readVersion"] == 0
    assert info["operationMetrics"]["numDeletedRows"] == "1"


def test_file_dvs_when_inline_limit_is_zero(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", files=3)
    spark.conf.set("dvengine.dv.inlineMaxBytes", "0")
    try:
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id % 4 = 1", mode="dv")
    finally:
        spark.conf.unset("dvengine.dv.inlineMaxBytes")
    snapshot = load_snapshot(str(tmp_path / "t"))
    dvs = [a.deletion_vector for a in snapshot.files if a.deletion_vector is not None]
    assert len(dvs) == 3 and all(d.storage_type == "u" for d in dvs)
    assert any(name.startswith("deletion_vector_") for name in os.listdir(tmp_path / "t"))
    assert_all_readers(spark, tmp_path / "t", COLS, [r for r in rows if r[0] % 4 != 1])


def test_partition_only_delete_reads_no_data(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", partition_by=["part"])
    # Destroy the files of partition 2: a delete that read them would fail.
    for f in (tmp_path / "t").glob("part=2/*.parquet"):
        f.write_bytes(b"not parquet")
    metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("part = 2")
    assert metrics["numFilesVerified"] == 0 and metrics["numFilesPrunedByPartition"] > 0
    assert metrics["numRemovedFiles"] > 0
    model = [r for r in rows if r[2] != 2]
    assert metrics["numDeletedRows"] == len(rows) - len(model)
    assert_all_readers(spark, tmp_path / "t", COLS, model)


def test_stats_skipping_reads_no_data_of_skipped_files(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", files=4)
    snapshot = load_snapshot(str(tmp_path / "t"))
    # Files sorted by id: only the one holding id 190+ can match. Hide all the others during the delete.
    hidden = []
    for add in snapshot.files:
        stats = json.loads(add.stats or "{}")
        if stats["maxValues"]["id"] < 190:
            src = tmp_path / "t" / add.path
            src.rename(src.with_suffix(".hidden"))
            hidden.append(src)
    assert len(hidden) == 3
    metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id >= 190", mode="dv")
    for src in hidden:
        src.with_suffix(".hidden").rename(src)
    assert metrics["numFilesSkippedByStats"] == 3 and metrics["numFilesVerified"] == 1
    assert metrics["numDeletedRows"] == 10
    assert_all_readers(spark, tmp_path / "t", COLS, [r for r in rows if r[0] < 190])


def test_nothing_matching_makes_no_commit(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t")
    before = log_listing(tmp_path / "t")
    metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id > 100000 OR name = 'zzz'")
    assert metrics["numDeletedRows"] == 0 and metrics["version"] is None
    assert log_listing(tmp_path / "t") == before


def test_delete_without_condition_removes_everything(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t")
    metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics()
    assert metrics["numDeletedRows"] == 200 and metrics["numFilesVerified"] == 0
    assert_all_readers(spark, tmp_path / "t", COLS, [])


def test_column_condition(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t")
    DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics((F.col("id") < 20) & (F.col("name") != "n1"), mode="dv")
    assert_all_readers(spark, tmp_path / "t", COLS, [r for r in rows if not (r[0] < 20 and r[1] != "n1")])


def test_auto_mode_rewrites_above_threshold_and_removes_emptied_files(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", n=40, files=4)  # 10 rows per file, ids sorted
    spark.conf.set("dvengine.dml.rewriteThreshold", "0.5")
    try:
        metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics(
            "id < 10 OR (id >= 10 AND id < 16) OR id = 20", mode="auto"
        )
    finally:
        spark.conf.unset("dvengine.dml.rewriteThreshold")
    # file 0: all 10 rows -> remove; file 1: 6/10 -> rewrite; file 2: 1/10 -> DV; file 3 untouched.
    assert metrics["numRemovedFiles"] == 2 and metrics["numAddedFiles"] == 1
    assert metrics["numCopiedRows"] == 4 and metrics["numDeletionVectorsAdded"] == 1
    assert_all_readers(spark, tmp_path / "t", COLS, [r for r in rows if not (r[0] < 16 or r[0] == 20)])


def test_delete_unions_with_dvs_written_by_delta_spark(spark: Any, golden_copy: Any) -> None:
    table_path = golden_copy("basic-dv-no-checkpoint")  # ids 0..9, DV deletes 0 and 1
    metrics = DeltaTable.forPath(spark, table_path).deleteMetrics("id IN (1, 3, 8)", mode="dv")
    assert metrics["numDeletedRows"] == 2  # id 1 was already deleted
    assert metrics["numDeletionVectorsUpdated"] == 1 and metrics["numDeletionVectorsAdded"] == 1
    dvs = {a.path: a.deletion_vector for a in load_snapshot(str(table_path)).files}
    assert sorted(d.cardinality for d in dvs.values() if d is not None) == [1, 3]
    assert_all_readers(spark, table_path, ["id"], [(i,) for i in (2, 4, 5, 6, 7, 9)])


def test_delete_on_partitioned_golden_table_with_checkpoint(spark: Any, golden_copy: Any) -> None:
    table_path = golden_copy("dv-partitioned-with-checkpoint")
    before = [tuple(r.values()) for r in DeltaTable.forPath(None, table_path).toArrow().to_pylist()]
    DeltaTable.forPath(spark, table_path).deleteMetrics("col1 % 2 = 0 AND part < 5", mode="dv")
    model = [r for r in before if not (r[1] % 2 == 0 and r[0] < 5)]
    assert_all_readers(spark, table_path, ["part", "col1", "col2"], model)


@pytest.mark.parametrize(
    ("condition", "fragment"),
    [
        ("no_such_column = 1", "no_such_column"),
        ("id = ", "syntax error"),
        ("rand() < 0.5", "rand"),
        ("id = 'abc'", "not a number"),
        ("id + 1", "must be boolean"),
    ],
)
def test_bad_condition_raises_and_leaves_table_unchanged(spark: Any, tmp_path: Path, condition: str, fragment: str) -> None:
    make_table(spark, tmp_path / "t")
    before = (log_listing(tmp_path / "t"), data_listing(tmp_path / "t"))
    with pytest.raises(InvalidPredicateError, match=fragment):
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics(condition)
    assert (log_listing(tmp_path / "t"), data_listing(tmp_path / "t")) == before


def test_bad_mode_raises(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t")
    with pytest.raises(InvalidArgumentError, match="mode"):
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1", mode="fast")


def test_unsupported_writer_feature_is_refused(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t")
    log = tmp_path / "t/_delta_log"
    protocol = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors", "someFutureWriterFeature"]}}
    (log / "00000000000000000001.json").write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(protocol) + "\n")
    before = (log_listing(tmp_path / "t"), data_listing(tmp_path / "t"))
    with pytest.raises(UnsupportedFeatureError, match="someFutureWriterFeature"):
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1")
    assert (log_listing(tmp_path / "t"), data_listing(tmp_path / "t")) == before


def test_dv_mode_on_table_without_dvs_is_refused_and_auto_rewrites(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", configuration={"delta.enableDeletionVectors": "false"})
    before = log_listing(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match="enableDeletionVectors"):
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1", mode="dv")
    assert log_listing(tmp_path / "t") == before
    metrics = DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1", mode="auto")
    assert metrics["numDeletionVectorsAdded"] == 0 and metrics["numAddedFiles"] == 1
    assert_all_readers(spark, tmp_path / "t", COLS, [r for r in rows if r[0] != 1])


def test_conflicting_concurrent_delete_raises_and_commits_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = make_table(spark, tmp_path / "t", files=1)
    stale = load_snapshot(str(tmp_path / "t"))
    DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1", mode="dv")  # the winner re-DVs the only file
    from dvengine.api import dml

    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    monkeypatch.setattr(dml, "load_snapshot", lambda root: stale)
    before = (log_listing(tmp_path / "t"), [r for r in rows if r[0] != 1])
    with pytest.raises(ConcurrentDeleteDeleteError):  # row 1 again: a row-level conflict
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 1 OR id = 2", mode="dv")
    assert log_listing(tmp_path / "t") == before[0]
    with spark_conf(spark, "spark.databricks.delta.rowLevelConcurrency.enabled", "false"), pytest.raises(
        ConcurrentDeleteReadError
    ):  # disjoint rows, but row-level resolution is off: Delta's file-level conflict
        DeltaTable.forPath(spark, tmp_path / "t").deleteMetrics("id = 2", mode="dv")
    assert log_listing(tmp_path / "t") == before[0]
    assert_all_readers(spark, tmp_path / "t", COLS, before[1])


@pytest.mark.parametrize(
    ("configuration", "error", "fragment"),
    [
        ({"delta.appendOnly": "true"}, OperationNotAllowedError, "append-only"),
        # CHECK constraints are enforced now (tests/test_check_constraints.py); only those the Arrow
        # evaluator cannot check refuse UPDATE and MERGE, and DELETE runs (it writes no new rows).
    ],
)
def test_dml_refused_on_tables_whose_rules_it_cannot_honour(
    spark: Any, tmp_path: Path, configuration: dict[str, str], error: type[Exception], fragment: str
) -> None:
    make_table(spark, tmp_path / "t")
    # Add the property by a metadata commit, as another engine would have.
    snapshot = load_snapshot(str(tmp_path / "t"))
    metadata = snapshot.metadata.to_json()
    metadata["configuration"] = {**metadata["configuration"], **configuration}
    (tmp_path / "t/_delta_log/00000000000000000001.json").write_text(
        json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps({"metaData": metadata}) + "\n"
    )
    before = (log_listing(tmp_path / "t"), data_listing(tmp_path / "t"))
    table = DeltaTable.forPath(spark, tmp_path / "t")
    with pytest.raises(error, match=fragment):
        table.deleteMetrics("id = 1")
    with pytest.raises(error, match=fragment):
        table.updateMetrics("id = 1", {"name": "'x'"})
    source = spark.createDataFrame([(1, "x", 0)], "id long, name string, part int").alias("s")
    with pytest.raises(error, match=fragment):
        table.alias("t").merge(source, "t.id = s.id").whenMatchedDelete().executeMetrics()
    assert (log_listing(tmp_path / "t"), data_listing(tmp_path / "t")) == before
