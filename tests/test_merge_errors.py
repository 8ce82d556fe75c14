"""MERGE failure modes: each raises a typed error and leaves the log and data folder untouched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dml_helpers import data_listing, log_listing, make_table, merge_builder
from interop import assert_all_readers
from test_merge import COLS, source_df

from dvengine import DeltaTable
from dvengine.api.merge_builder import DeltaMergeBuilder
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    MergeCardinalityError,
    SchemaMismatchError,
    SchemaViolationError,
)


def _state(path: Path) -> tuple[list[str], list[str]]:
    return log_listing(path), data_listing(path)


def test_duplicate_matches_raise_and_write_nothing(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path)
    before = _state(path)
    src = [(10, "a", 0), (10, "b", 0), (300, "c", 1)]
    with pytest.raises(MergeCardinalityError, match="multiple source rows"):
        DeltaTable.forPath(spark, str(path)).alias("t").merge(source_df(spark, src), "t.id = s.id") \
            .whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode("dv").executeMetrics()
    assert _state(path) == before
    # Delta's rule: the check applies even when the matched clause's own condition is false.
    with pytest.raises(MergeCardinalityError):
        DeltaTable.forPath(spark, str(path)).alias("t").merge(source_df(spark, src), "t.id = s.id") \
            .whenMatchedDelete(condition="s.part = 5").executeMetrics()
    assert _state(path) == before
    assert_all_readers(spark, path, COLS, rows)


def test_duplicates_allowed_for_a_single_unconditional_delete(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path)
    src = [(10, "a", 0), (10, "b", 0), (11, "c", 0)]
    metrics = DeltaTable.forPath(spark, str(path)).alias("t").merge(source_df(spark, src), "t.id = s.id").whenMatchedDelete().executeMetrics()
    assert metrics["numTargetRowsDeleted"] == 2
    assert_all_readers(spark, path, COLS, [r for r in rows if r[0] not in (10, 11)])


Configure = Callable[[DeltaMergeBuilder], DeltaMergeBuilder]

BAD_MERGES: list[tuple[str, Configure, type[Exception], str]] = [
    ("unknown source column", lambda b: b.whenMatchedUpdate(set={"name": "s.nope"}), InvalidPredicateError, "nope"),
    ("unknown target column", lambda b: b.whenMatchedUpdate(set={"nope": "s.name"}), SchemaMismatchError, "nope"),
    ("uncastable value", lambda b: b.whenMatchedUpdate(set={"id": "s.name"}), SchemaViolationError, "id"),
    ("impossible cast", lambda b: b.whenMatchedUpdate(set={"part": "array(1, 2)"}), SchemaViolationError, "cast"),
    ("insert reads target", lambda b: b.whenNotMatchedInsert(values={"id": "t.id"}), InvalidPredicateError, "t.id"),
    ("bad condition", lambda b: b.whenMatchedDelete(condition="s.id +"), InvalidPredicateError, r"s\.id \+"),
    ("non-boolean condition", lambda b: b.whenMatchedDelete(condition="s.id + 1"), InvalidPredicateError, "boolean"),
    (
        "unconditional clause not last",
        lambda b: b.whenMatchedDelete().whenMatchedUpdateAll(condition="s.id > 0"),
        InvalidArgumentError,
        "last",
    ),
]


@pytest.mark.parametrize(("label", "configure", "error", "fragment"), BAD_MERGES, ids=[m[0] for m in BAD_MERGES])
def test_bad_clause_raises_and_leaves_table_unchanged(
    spark: Any, tmp_path: Path, label: str, configure: Configure, error: type[Exception], fragment: str
) -> None:
    path = tmp_path / "t"
    make_table(spark, path, n=40, files=2)
    before = _state(path)
    src = [(5, "u5", 0), (500, "u500", 1)]
    builder = DeltaTable.forPath(spark, str(path)).alias("t").merge(source_df(spark, src), "t.id = s.id")
    with pytest.raises(error, match=fragment):
        configure(builder).executeMetrics()
    assert _state(path) == before


def test_update_all_with_source_missing_a_column(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    make_table(spark, path, n=40, files=2)
    before = _state(path)
    src = spark.createDataFrame([(5, "x")], "id long, name string").alias("s")
    with pytest.raises(SchemaMismatchError, match="part"):
        merge_builder(spark, str(path), "t", src, "t.id = s.id").whenMatchedUpdateAll().executeMetrics()
    assert _state(path) == before


def test_null_into_not_null_column_is_refused(spark: Any, tmp_path: Path) -> None:
    from dvengine.engine.spark.write_api import write

    path = tmp_path / "t"
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long not null, name string")
    write(df, str(path), spark=spark)
    before = _state(path)
    src = spark.createDataFrame([(3, "x"), (30, "y")], "id long, name string").alias("s")
    with pytest.raises(SchemaViolationError, match="NOT NULL"):
        merge_builder(spark, str(path), "t", src, "t.id = s.id") \
            .whenMatchedUpdate(set={"id": "CASE WHEN s.name = 'x' THEN NULL ELSE s.id END"}).withMode("dv").executeMetrics()
    assert _state(path) == before
    with pytest.raises(SchemaViolationError, match="NOT NULL"):
        merge_builder(spark, str(path), "t", src, "t.id = s.id").whenNotMatchedInsert(values={"name": "s.name"}).executeMetrics()
    assert _state(path) == before
    # A valid merge on the same table still works and keeps the column NOT NULL.
    merge_builder(spark, str(path), "t", src, "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics()
    expected = [(i, "x" if i == 3 else f"n{i}") for i in range(20)] + [(30, "y")]
    assert_all_readers(spark, path, ["id", "name"], expected)


def test_bad_mode_and_same_aliases(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    make_table(spark, path, n=20, files=1)
    builder = merge_builder(spark, str(path), "t", source_df(spark, [(1, "a", 0)]), "t.id = s.id")
    with pytest.raises(InvalidArgumentError, match="mode"):
        builder.withMode("fast")
    with pytest.raises(InvalidArgumentError, match="alias"):
        merge_builder(spark, str(path), "s", source_df(spark, [(1, "a", 0)]), "s.id = s.id") \
            .whenMatchedDelete().executeMetrics()
    with pytest.raises(InvalidArgumentError, match="WHEN"):
        builder.executeMetrics()
