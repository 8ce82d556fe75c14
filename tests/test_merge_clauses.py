"""MERGE clause semantics: order and conditions, NOT MATCHED BY SOURCE, insert-only, no-op merges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dml_helpers import data_listing, default_engine, log_listing, make_table, merge_builder
from interop import assert_all_readers
from pyspark.sql import functions as F
from test_merge import COLS, commit_lines, model_merge, source_df


# Every MERGE here runs on the embedded executor (auto: a small source with what it evaluates
# exactly), on Spark as file tasks where possible ("spark"), and on Spark's row plan.
@pytest.fixture(autouse=True, params=["auto", "spark", "spark-rows"])
def merge_engine(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    with default_engine(spark, request.param):
        yield request.param

@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_clauses_apply_in_order_with_conditions(spark: Any, tmp_path: Path, mode: str) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path)
    src = [(i, f"s{i}", i % 3) for i in range(100, 300, 5)]
    metrics = (
        merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
        .whenMatchedUpdate(condition="s.id % 2 = 0", set={"name": "concat('even-', s.name)"})
        .whenMatchedDelete(condition=F.col("t.name") == "n3")
        .whenMatchedUpdate(set={"name": "upper(t.name)", "t.part": "t.part + 10"})
        .whenNotMatchedInsert(condition="s.id % 10 = 0", values={"id": "s.id", "name": "s.name"})
        .whenNotMatchedInsert(values={"id": F.col("s.id") + 1000, "name": F.lit("other"), "part": "1"})
        .withMode(mode)
        .executeMetrics()
    )
    model = model_merge(
        rows,
        src,
        matched=[
            (lambda t, s: s[0] % 2 == 0, lambda t, s: (t[0], "even-" + s[1], t[2])),
            (lambda t, s: t[1] == "n3", lambda t, s: None),
            (lambda t, s: True, lambda t, s: (t[0], t[1].upper(), t[2] + 10)),
        ],
        not_matched=[
            (lambda s: s[0] % 10 == 0, lambda s: (s[0], s[1], None)),
            (lambda s: True, lambda s: (s[0] + 1000, "other", 1)),
        ],
    )
    assert_all_readers(spark, path, COLS, model)
    matched_ids = [s[0] for s in src if s[0] < 200]
    deleted = [i for i in matched_ids if i % 2 != 0 and f"n{i % 7}" == "n3"]
    assert metrics["numTargetRowsMatchedDeleted"] == metrics["numTargetRowsDeleted"] == len(deleted)
    assert metrics["numTargetRowsMatchedUpdated"] == len(matched_ids) - len(deleted)
    assert metrics["numTargetRowsInserted"] == len(src) - len(matched_ids)
    info = commit_lines(path, metrics["version"])[0]["commitInfo"]
    matched_params = json.loads(info["operationParameters"]["matchedPredicates"])
    assert [p["actionType"] for p in matched_params] == ["update", "delete", "update"]
    assert "predicate" in matched_params[0] and "predicate" not in matched_params[2]


def test_not_matched_by_source_update_and_delete(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path, partition_by=["part"])
    src = [(i, f"s{i}", i % 3) for i in range(0, 100, 2)]
    metrics = (
        merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedBySourceUpdate(condition="t.id >= 150", set={"name": "'stale'"})
        .whenNotMatchedBySourceDelete(condition="t.id % 2 = 1")
        .withMode("dv")
        .executeMetrics()
    )
    model = model_merge(
        rows,
        src,
        matched=[(lambda t, s: True, lambda t, s: s)],
        by_source=[
            (lambda t: t[0] >= 150, lambda t: (t[0], "stale", t[2])),
            (lambda t: t[0] % 2 == 1, lambda t: None),
        ],
    )
    assert_all_readers(spark, path, COLS, model)
    assert metrics["numTargetRowsNotMatchedBySourceUpdated"] == 50
    assert metrics["numTargetRowsNotMatchedBySourceDeleted"] == 75  # odd ids below 150 (the source holds even ids only)
    assert metrics["numTargetRowsMatchedUpdated"] == 50
    assert metrics["numCandidateFiles"] == metrics["numFilesTotal"]  # every file can hold unmatched rows


def test_insert_only_merge_appends_and_touches_no_existing_file(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path)
    # 195 appears twice: duplicates are allowed when nothing can modify the target row.
    # 250 appears twice unmatched: both copies are inserted, as in Delta.
    src = [(i, f"s{i}", 0) for i in range(190, 210)] + [(195, "dup", 0), (250, "a", 1), (250, "b", 2)]
    metrics = (
        merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
        .whenNotMatchedInsertAll(condition="s.name <> 's205'")
        .executeMetrics()
    )
    new = [s for s in src if s[0] >= 200 and s[1] != "s205"]
    assert metrics["numTargetRowsInserted"] == len(new) and metrics["numTargetRowsCopied"] == 0
    assert metrics["numCandidateFiles"] == 1
    lines = commit_lines(path, metrics["version"])
    kinds = sorted(next(iter(x)) for x in lines[1:])
    assert set(kinds) == {"add"}, kinds
    assert lines[0]["commitInfo"]["isBlindAppend"] is False
    assert_all_readers(spark, path, COLS, rows + new)


def test_merge_changing_nothing_makes_no_commit(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    make_table(spark, path)
    before = (log_listing(path), data_listing(path))
    src = [(i, f"s{i}", 0) for i in range(10, 20)]
    metrics = (
        merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
        .whenMatchedUpdate(condition="s.part = 99", set={"name": "s.name"})
        .whenNotMatchedInsertAll()
        .executeMetrics()
    )
    assert metrics["version"] is None and metrics["numTargetRowsUpdated"] == 0
    assert (log_listing(path), data_listing(path)) == before


def test_unqualified_names_and_explicit_source_alias(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path, n=40, files=2)
    src = spark.createDataFrame([(5, "x"), (50, "y")], "sid long, label string")
    metrics = (
        merge_builder(spark, str(path), None, src, "id = sid", source_alias="src")
        .whenMatchedUpdate(set={"name": "label"})
        .whenNotMatchedInsert(values={"id": "src.sid", "name": "label", "part": "7"})
        .executeMetrics()
    )
    assert metrics["numTargetRowsUpdated"] == 1 and metrics["numTargetRowsInserted"] == 1
    model = [(r[0], "x", r[2]) if r[0] == 5 else r for r in rows] + [(50, "y", 7)]
    assert_all_readers(spark, path, COLS, model)


def _insert_only(spark: Any, path: Path, rows: list[tuple[int, str, int]]) -> dict[str, Any]:
    return (
        merge_builder(spark, str(path), "t", source_df(spark, rows), "t.id = s.id").whenNotMatchedInsertAll().executeMetrics()
    )


def test_insert_only_merge_conflicts_only_with_concurrent_inserts_of_matching_keys(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two concurrent upserts of the same new key must not both insert it. (A concurrent *blind*
    append is exempt under WriteSerializable, as in Delta; another MERGE is not blind.)"""
    import dvengine.engine.local.merge as local_merge
    from dvengine.engine.spark import merge_exec
    from dvengine.errors import ConcurrentAppendError
    from dvengine.log import load_snapshot

    path = tmp_path / "t"
    rows = make_table(spark, path)
    stale = load_snapshot(str(path))
    _insert_only(spark, path, [(5000, "other", 0)])  # concurrent, but no key of ours can match it
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    monkeypatch.setattr(merge_exec, "load_snapshot", lambda root: stale)
    monkeypatch.setattr(local_merge, "load_snapshot", lambda root: stale)
    _insert_only(spark, path, [(205, "new", 1)])
    monkeypatch.undo()
    assert_all_readers(spark, path, COLS, [*rows, (5000, "other", 0), (205, "new", 1)])

    stale = load_snapshot(str(path))
    _insert_only(spark, path, [(206, "racer", 0)])  # concurrent insert of the key we are about to insert
    before = (log_listing(path), data_listing(path))
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    monkeypatch.setattr(merge_exec, "load_snapshot", lambda root: stale)
    monkeypatch.setattr(local_merge, "load_snapshot", lambda root: stale)
    with pytest.raises(ConcurrentAppendError):
        _insert_only(spark, path, [(206, "mine", 2)])
    assert (log_listing(path), data_listing(path)) == before  # the new file was deleted again
    assert_all_readers(spark, path, COLS, [*rows, (5000, "other", 0), (205, "new", 1), (206, "racer", 0)])
