"""UPDATE: DV'd originals plus new files with only the updated rows; checked against a model
through dvengine (Arrow, Spark), delta-rs and DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute
import pytest
from dml_helpers import data_listing, log_listing, make_table
from interop import assert_all_readers
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError, InvalidPredicateError, SchemaViolationError

COLS = ["id", "name", "part"]


@pytest.mark.parametrize("mode", ["dv", "rewrite", "auto"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_update_matches_model_in_every_mode(spark: Any, tmp_path: Path, mode: str, partitioned: bool) -> None:
    rows = make_table(spark, tmp_path / "t", partition_by=["part"] if partitioned else None)
    table = DeltaTable.forPath(spark, tmp_path / "t")
    metrics = table.updateMetrics("id % 10 = 3", {"name": "concat(name, '_x')", "id": "id + 1000"}, mode=mode)
    model = [(i + 1000, n + "_x", p) if i % 10 == 3 else (i, n, p) for i, n, p in rows]
    assert metrics["numUpdatedRows"] == 20
    if mode == "dv":
        assert metrics["numCopiedRows"] == 0 and metrics["numDeletionVectorsAdded"] > 0
    if mode == "rewrite":
        assert metrics["numDeletionVectorsAdded"] == 0 and metrics["numCopiedRows"] == len(rows) - 20
    assert_all_readers(spark, tmp_path / "t", COLS, model)
    # update rows that already were updated, and rows in files that carry DVs now
    table.updateMetrics("id >= 1000 OR id < 3", {"part": "part + 10"}, mode=mode)
    model = [(i, n, p + 10) if (i >= 1000 or i < 3) else (i, n, p) for i, n, p in model]
    assert_all_readers(spark, tmp_path / "t", COLS, model)


def test_update_moves_rows_between_partitions(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", partition_by=["part"])
    metrics = DeltaTable.forPath(spark, tmp_path / "t").updateMetrics("part = 1 AND id < 30", {"part": "2"}, mode="dv")
    assert metrics["numCopiedRows"] == 0
    model = [(i, n, 2) if (p == 1 and i < 30) else (i, n, p) for i, n, p in rows]
    assert_all_readers(spark, tmp_path / "t", COLS, model)
    assert sorted(p.name for p in (tmp_path / "t").iterdir() if p.name.startswith("part=")) == ["part=0", "part=1", "part=2"]


def test_update_with_columns_and_without_condition(spark: Any, tmp_path: Path) -> None:
    rows = make_table(spark, tmp_path / "t", n=50, files=2)
    DeltaTable.forPath(spark, tmp_path / "t").updateMetrics(set={"name": F.upper(F.col("name"))}, mode="dv")
    assert_all_readers(spark, tmp_path / "t", COLS, [(i, n.upper(), p) for i, n, p in rows])
    DeltaTable.forPath(spark, tmp_path / "t").updateMetrics(F.col("id") > 40, {"id": F.col("id") * 2})
    assert_all_readers(spark, tmp_path / "t", COLS, [(i * 2 if i > 40 else i, n.upper(), p) for i, n, p in rows])


def test_update_matching_nothing_commits_nothing(spark: Any, tmp_path: Path) -> None:
    make_table(spark, tmp_path / "t")
    before = log_listing(tmp_path / "t")
    metrics = DeltaTable.forPath(spark, tmp_path / "t").updateMetrics("id < 0", {"name": "'x'"})
    assert metrics["numUpdatedRows"] == 0 and metrics["version"] is None
    assert log_listing(tmp_path / "t") == before


def _not_null_table(spark: Any, path: Path) -> None:
    from dvengine.engine.spark.write_api import write

    schema = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), False)])
    write(spark.createDataFrame([(i, f"n{i}") for i in range(20)], schema), str(path), spark=spark)


@pytest.mark.parametrize(
    ("assignments", "error", "fragment"),
    [
        ({"name": "NULL"}, SchemaViolationError, "NOT NULL"),
        ({"id": "CAST(NULL AS BIGINT)"}, SchemaViolationError, "NOT NULL"),
        ({"id": "'not a number'"}, SchemaViolationError, ""),
        ({"id": "array(1, 2)"}, SchemaViolationError, "cannot be stored"),
        # all values are checked in one analysis; the failing one is then named
        ({"name": "'ok'", "id": "array(1, 2)"}, SchemaViolationError, "'ARRAY\\(1, 2\\)' cannot be stored in column 'id'"),
        ({"nope": "1"}, InvalidPredicateError, "nope"),
        ({"name": "no_such_col"}, InvalidPredicateError, "no_such_col"),
        ({"name": "rand()"}, InvalidPredicateError, "rand"),
        ({}, InvalidArgumentError, "at least one"),
    ],
)
def test_bad_updates_raise_and_leave_table_unchanged(
    spark: Any, tmp_path: Path, assignments: dict[str, str], error: type[Exception], fragment: str
) -> None:
    _not_null_table(spark, tmp_path / "t")
    before = (log_listing(tmp_path / "t"), data_listing(tmp_path / "t"))
    with pytest.raises(error, match=fragment or None):
        DeltaTable.forPath(spark, tmp_path / "t").updateMetrics("id < 5", assignments, mode="dv")
    assert (log_listing(tmp_path / "t"), data_listing(tmp_path / "t")) == before
    assert DeltaTable.forPath(None, tmp_path / "t").toArrow().num_rows == 20


def test_update_unions_with_golden_dv(spark: Any, golden_copy: Any) -> None:
    path = golden_copy("basic-dv-no-checkpoint")  # ids 2..9 live
    metrics = DeltaTable.forPath(spark, path).updateMetrics("id IN (0, 2, 9)", {"id": "id * 100"}, mode="dv")
    assert metrics["numUpdatedRows"] == 2  # id 0 is already deleted by the golden DV
    assert_all_readers(spark, path, ["id"], [(i,) for i in (200, 3, 4, 5, 6, 7, 8, 900)])


def test_dv_update_writes_far_fewer_bytes_than_rewrite(spark: Any, tmp_path: Path) -> None:
    for name in ("dv", "rewrite"):
        make_table(spark, tmp_path / name, n=20_000, files=4)
    dv = DeltaTable.forPath(spark, tmp_path / "dv").updateMetrics("id % 1000 = 1", {"name": "'changed'"}, mode="dv")
    cow = DeltaTable.forPath(spark, tmp_path / "rewrite").updateMetrics("id % 1000 = 1", {"name": "'changed'"}, mode="rewrite")
    assert dv["numUpdatedRows"] == cow["numUpdatedRows"] == 20
    assert dv["numAddedBytes"] * 5 < cow["numAddedBytes"], (dv["numAddedBytes"], cow["numAddedBytes"])
    changed = DeltaTable.forPath(None, tmp_path / "dv").toArrow().filter(pa.compute.equal(pa.compute.field("name"), "changed"))
    assert changed.num_rows == 20
