"""MERGE: upserts in every mode, clause order and conditions, NOT MATCHED BY SOURCE, insert-only.

Truth is a plain-Python model of MERGE over the rows, checked through four independent readers
(dvengine Arrow and Spark, delta-rs, DuckDB/delta-kernel-rs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import default_engine, make_table, merge_builder
from interop import assert_all_readers

COLS = ["id", "name", "part"]
Row = tuple[Any, ...]


def source_df(spark: Any, rows: list[Row], alias: str = "s") -> Any:
    data = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "part": pa.array([r[2] for r in rows], pa.int32()),
        }
    )
    return spark.createDataFrame(data).alias(alias)


def commit_lines(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(x) for x in text.splitlines()]


Matched = Sequence[tuple[Callable[[Row, Row], bool], Callable[[Row, Row], Row | None]]]
NotMatched = Sequence[tuple[Callable[[Row], bool], Callable[[Row], Row]]]
BySource = Sequence[tuple[Callable[[Row], bool], Callable[[Row], Row | None]]]


def model_merge(
    target: list[Row], source: list[Row], matched: Matched = (), not_matched: NotMatched = (), by_source: BySource = ()
) -> list[Row]:
    """Delta MERGE on ``t.id = s.id`` in plain Python: the first clause of a kind whose condition
    holds applies; an action returns the new row, or None to delete. Source ids must be unique."""
    source_by_id = {s[0]: s for s in source}
    target_ids = {t[0] for t in target}
    out: list[Row] = []
    for t in target:
        s = source_by_id.get(t[0])
        new: Row | None = t
        if s is not None:
            act = next((a for cond, a in matched if cond(t, s)), None)
            new = t if act is None else act(t, s)
        else:
            act_t = next((a for cond, a in by_source if cond(t)), None)
            new = t if act_t is None else act_t(t)
        if new is not None:
            out.append(new)
    for s in source:
        if s[0] not in target_ids:
            insert = next((a for cond, a in not_matched if cond(s)), None)
            if insert is not None:
                out.append(insert(s))
    return out


def model_upsert(target: list[Row], source: list[Row]) -> list[Row]:
    by_id = {r[0]: r for r in target}
    for r in source:
        by_id[r[0]] = r
    return list(by_id.values())



# Every MERGE here runs on the embedded executor (auto: a small source with what it evaluates
# exactly), on Spark as file tasks where possible ("spark"), and on Spark's row plan.
@pytest.fixture(autouse=True, params=["auto", "spark", "spark-rows"])
def merge_engine(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    with default_engine(spark, request.param):
        yield request.param

@pytest.mark.parametrize("mode", ["dv", "rewrite", "auto"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_upsert_matches_model(
    spark: Any, tmp_path: Path, mode: str, partitioned: bool, merge_engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dvengine.engine.spark import executor

    tasks_ran: list[int] = []
    original = executor.run_merge_tasks
    monkeypatch.setattr(executor, "run_merge_tasks", lambda ctx: tasks_ran.append(len(ctx.groups)) or original(ctx))
    path = tmp_path / "t"
    rows = make_table(spark, path, partition_by=["part"] if partitioned else None)
    # Updates of existing ids (some change partition), and new ids.
    src = [(i, f"u{i}", (i + 1) % 3) for i in range(150, 260, 4)]
    metrics = (
        merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .withMode(mode)
        .executeMetrics()
    )
    updated = sum(1 for r in src if r[0] < 200)
    assert metrics["executionEngine"] == ("local" if merge_engine == "auto" else "spark")
    assert bool(tasks_ran) == (merge_engine == "spark")  # "spark" ran file tasks, "spark-rows" did not
    assert metrics["numSourceRows"] == len(src)
    assert metrics["numTargetRowsUpdated"] == metrics["numTargetRowsMatchedUpdated"] == updated
    assert metrics["numTargetRowsInserted"] == len(src) - updated
    assert metrics["numTargetRowsDeleted"] == 0
    if mode == "dv":
        assert metrics["numTargetRowsCopied"] == 0
        assert metrics["numTargetDeletionVectorsAdded"] > 0 and metrics["numTargetFilesRemoved"] == 0
    elif mode == "rewrite":
        assert metrics["numTargetDeletionVectorsAdded"] == 0 and metrics["numTargetFilesRemoved"] > 0
        assert metrics["numTargetRowsCopied"] > 0
    assert metrics["numOutputRows"] == len(src) + metrics["numTargetRowsCopied"]
    model = model_upsert(rows, src)
    assert_all_readers(spark, path, COLS, model)
    info = commit_lines(path, metrics["version"])[0]["commitInfo"]
    assert info["operation"] == "MERGE"
    assert json.loads(info["operationParameters"]["predicate"]) == ["`t`.`id` = `s`.`id`"]
    assert json.loads(info["operationParameters"]["matchedPredicates"]) == [{"actionType": "update"}]
    assert json.loads(info["operationParameters"]["notMatchedPredicates"]) == [{"actionType": "insert"}]
    # A second upsert over files that now carry DVs must union with them.
    src2 = [(i, f"v{i}", i % 3) for i in range(0, 300, 7)]
    merge_builder(spark, str(path), "t", source_df(spark, src2), "t.id = s.id").whenMatchedUpdateAll() \
        .whenNotMatchedInsertAll().withMode(mode).executeMetrics()
    assert_all_readers(spark, path, COLS, model_upsert(model, src2))
