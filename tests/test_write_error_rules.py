"""delta-spark's write and error rules: missing nullable columns, AnalysisException, isDeltaTable,
evaluation errors that say where they happened.

Truth: the rows a model predicts, read back by delta-rs and DuckDB; delta-spark's documented
semantics for isDeltaTable (DeltaTableUtils.findDeltaTableRoot + tableExists) and for which
errors are AnalysisException.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows
from pyspark.errors import AnalysisException

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    DvengineError,
    EvaluationError,
    SchemaMismatchError,
    SchemaViolationError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnresolvedColumnError,
)
from dvengine.log import latest_version


def _table(path: Path) -> str:
    dvengine.write(
        pa.table({"id": pa.array([1, 2], pa.int64()), "note": ["a", "b"], "score": pa.array([1.5, 2.5])}), str(path)
    )
    return str(path)


def _readers(path: str, expected: list[tuple[Any, ...]]) -> None:
    want = sort_rows(expected)
    assert rows_delta_rs(path, ["id", "note", "score"]) == want
    assert rows_duckdb(path, ["id", "note", "score"]) == want


# --- missing nullable columns are written as NULL --------------------------------------------------


def test_an_append_lacking_nullable_columns_writes_nulls_locally(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([3], pa.int64())}), path, mode="append")
    dvengine.write(pa.table({"SCORE": [4.5], "id": pa.array([4], pa.int64())}), path, mode="append")  # any order/case
    _readers(path, [(1, "a", 1.5), (2, "b", 2.5), (3, None, None), (4, None, 4.5)])
    assert latest_version(path) == 2


def test_an_append_lacking_nullable_columns_writes_nulls_on_spark(spark: Any, tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    dvengine.write(spark.createDataFrame([(3,)], "id bigint"), path, mode="append")
    _readers(path, [(1, "a", 1.5), (2, "b", 2.5), (3, None, None)])


def test_an_overwrite_lacking_nullable_columns_keeps_the_schema(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([9], pa.int64())}), path, mode="overwrite")
    _readers(path, [(9, None, None)])
    assert [f.name for f in DeltaTable.forPath(None, path).snapshot().schema.fields] == ["id", "note", "score"]


def test_a_missing_not_null_column_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    DeltaTable.create(None).location(path).addColumn("id", "bigint", nullable=False).addColumn("note", "string").execute()
    before = sorted(os.listdir(path))
    with pytest.raises(SchemaViolationError, match="'id'"):
        dvengine.write(pa.table({"note": ["x"]}), path, mode="append")
    assert latest_version(path) == 0 and sorted(os.listdir(path)) == before


def test_extra_columns_are_still_refused(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    with pytest.raises(SchemaMismatchError, match="extra"):
        dvengine.write(pa.table({"id": pa.array([3], pa.int64()), "extra": [1]}), path, mode="append")
    assert latest_version(path) == 0


# --- errors scripts catch as AnalysisException ------------------------------------------------------


def test_delta_spark_analysis_errors_are_pyspark_analysis_exceptions(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    cases = [
        (lambda: DeltaTable.forPath(None, str(tmp_path / "nope")), TableNotFoundError),
        (lambda: DeltaTable.forName(None, "no_such_table_26"), TableNotFoundError),
        (lambda: dvengine.write(pa.table({"id": [1]}), path), TableAlreadyExistsError),
        (lambda: dvengine.write(pa.table({"id": ["x"]}), path, mode="append"), SchemaMismatchError),
        (lambda: DeltaTable.forPath(None, path).delete("nope = 1"), UnresolvedColumnError),
    ]
    for call, cls in cases:
        with pytest.raises(AnalysisException) as info:
            call()
        assert isinstance(info.value, cls) and isinstance(info.value, DvengineError)
        assert str(info.value) and info.value.getMessage().endswith(str(info.value))  # pyspark's accessors work
    assert latest_version(path) == 0


def test_analysis_errors_keep_their_message_and_survive_pickling() -> None:
    error = TableNotFoundError("/x is not a Delta table")
    assert str(error) == "/x is not a Delta table"
    assert error.getCondition() == "DELTA_MISSING_DELTA_TABLE"
    again = pickle.loads(pickle.dumps(error))  # how errors come back from Spark's Python workers
    assert type(again) is TableNotFoundError and str(again) == str(error) and isinstance(again, AnalysisException)


def test_runtime_errors_are_not_analysis_exceptions() -> None:
    assert not issubclass(EvaluationError, AnalysisException)  # Spark: SparkArithmeticException & co.
    assert not issubclass(SchemaViolationError, AnalysisException)


# --- isDeltaTable as delta-spark ---------------------------------------------------------------------


def test_isDeltaTable_follows_delta_spark(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2], "day": ["a", "b"]}), str(root), partitionBy=["day"])
    part = next(p for p in root.iterdir() if p.name.startswith("day="))
    data_file = next(part.iterdir())
    assert DeltaTable.isDeltaTable(None, str(root)) is True
    assert DeltaTable.isDeltaTable(None, f"file://{root}") is True
    assert DeltaTable.isDeltaTable(None, str(part)) is True  # inside a table: findDeltaTableRoot walks up
    assert DeltaTable.isDeltaTable(None, str(data_file)) is True
    assert DeltaTable.isDeltaTable(None, str(root / "not_there")) is True  # walks up from a missing child too
    assert DeltaTable.isDeltaTable(None, str(root / "_delta_log")) is False  # the walk stops at _delta_log
    assert DeltaTable.isDeltaTable(None, str(tmp_path / "missing")) is False
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"a": [1]}), plain / "part-0.parquet")
    assert DeltaTable.isDeltaTable(None, str(plain)) is False
    empty_log = tmp_path / "empty"
    (empty_log / "_delta_log").mkdir(parents=True)
    assert DeltaTable.isDeltaTable(None, str(empty_log)) is False  # strictCheck: a log without commits


# --- evaluation errors say where ----------------------------------------------------------------------


def _numbers(path: Path) -> str:
    dvengine.write(
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "n": pa.array([1, 2, 2**62], pa.int64()), "name": ["a", "7", "c"]}),
        str(path),
    )
    return str(path)


def test_a_local_evaluation_error_names_the_expression_part_and_column(tmp_path: Path) -> None:
    path = _numbers(tmp_path / "t")
    with pytest.raises(EvaluationError) as info:
        DeltaTable.forPath(None, path).delete("id > 0 AND n * 4 > 0", engine="local")
    text = str(info.value)
    assert "`id` > 0 AND `n` * 4 > 0" in text and "'`n` * 4'" in text and "column 'n'" in text
    assert latest_version(path) == 0


@pytest.mark.parametrize("strategy", ["rows", "files"])
def test_a_spark_evaluation_error_names_the_expression_and_column(spark: Any, tmp_path: Path, strategy: str) -> None:
    path = _numbers(tmp_path / "t")
    table = DeltaTable.forPath(spark, path)
    spark.conf.set("dvengine.spark.dmlStrategy", "rows")
    try:
        with pytest.raises(EvaluationError) as info:
            table.delete("id > 0 AND name > 5")  # Spark casts name to a number: 'a' fails
    finally:
        spark.conf.unset("dvengine.spark.dmlStrategy")
    text = str(info.value)
    assert "`id` > 0 AND `name` > 5" in text and "column 'name'" in text and "CAST_INVALID_INPUT" in text
    if strategy == "files":  # file tasks run the local evaluator in the workers: the local message comes back
        spark.conf.set("dvengine.spark.dmlStrategy", "files")
        try:
            with pytest.raises(EvaluationError, match="column 'n'"):
                table.delete("n * 4 > 0", engine="spark")
        finally:
            spark.conf.unset("dvengine.spark.dmlStrategy")
    assert latest_version(path) == 0
