"""Bringing a small Spark MERGE source to the embedded executor: one job, no shuffle when Spark knows
the row count, and never a wrong answer about the ``localMaxSourceRows`` limit.

Truth: the rows of the Arrow table each frame was made from, and the job / stage counts Spark's
own status tracker reports (not dvengine's bookkeeping).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvengine.bench.spark_jobs import count_spark_jobs
from dvengine.engine.spark.merge import collect_small_source, known_row_count


def _rows(n: int) -> pa.Table:
    ids = np.arange(n, dtype=np.int64)
    return pa.table({"id": ids, "value": ids * 0.5, "cat": (ids % 7).astype(np.int32)})


@contextmanager
def _stages(spark: Any) -> Iterator[list[int]]:
    """Jobs and stages started inside the block, as [jobs, stages], from the status tracker."""
    out: list[int] = []
    with count_spark_jobs(spark, "collect") as jobs:
        group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
        yield out
    tracker = spark.sparkContext.statusTracker()
    ids = tracker.getJobIdsForGroup(group)
    stages = sum(len(info.stageIds) for info in (tracker.getJobInfo(i) for i in ids) if info is not None)
    out += [int(jobs.jobs or 0), stages]


def _same(table: pa.Table | None, expected: pa.Table) -> None:
    assert table is not None
    assert table.sort_by("id").to_pylist() == expected.to_pylist()


def test_a_loaded_cache_is_collected_in_one_stage(spark: Any) -> None:
    data = _rows(5_000)
    frame = spark.createDataFrame(data).cache()
    frame.count()
    source = frame.alias("s")
    assert known_row_count(source) == (5_000, True)
    with _stages(spark) as counted:
        table = collect_small_source(source, 1_000_000)
    assert counted == [1, 1], counted  # no limit(): its shuffle into one partition would be a second stage
    _same(table, data)
    frame.unpersist()


def test_an_exact_count_above_the_limit_runs_no_job(spark: Any) -> None:
    frame = spark.createDataFrame(_rows(300)).repartition(2).cache()
    frame.count()
    with _stages(spark) as counted:
        assert collect_small_source(frame.select("id", "cat"), 299) is None
    assert counted == [0, 0]
    _same(collect_small_source(frame, 300), _rows(300))  # exactly at the limit: collected
    frame.unpersist()


def test_an_unloaded_cache_or_a_file_source_goes_through_the_limit(spark: Any, tmp_path: Path) -> None:
    data = _rows(2_000)
    pq.write_table(data, tmp_path / "part.parquet")
    files = spark.read.parquet(str(tmp_path))
    assert known_row_count(files) is None  # a file scan's statistics are estimates, not used
    _same(collect_small_source(files, 2_000), data)
    assert collect_small_source(files, 1_999) is None
    unloaded = spark.read.parquet(str(tmp_path)).filter("id >= 0").cache()  # never materialized
    assert known_row_count(unloaded) is None
    _same(collect_small_source(unloaded, 5_000), data)
    unloaded.unpersist()


@pytest.mark.parametrize(("limit", "collected"), [(50, True), (49, False), (10, False)])
def test_a_plan_bound_is_an_upper_bound_only(spark: Any, limit: int, collected: bool) -> None:
    # range(100) filtered keeps maxRows = 100 while holding 50 rows: a bound above the limit
    # must not refuse (the limit path counts), a bound at or below it needs no limit.
    frame = spark.range(100).filter("id % 2 = 0")
    bound = known_row_count(frame)
    assert bound == (100, False)
    table = collect_small_source(frame, limit)
    assert (table is not None) == collected
    if table is not None:
        assert sorted(table.column("id").to_pylist()) == list(range(0, 100, 2))
    with _stages(spark) as counted:
        small = collect_small_source(spark.range(40), 40)
    assert small is not None and small.num_rows == 40 and counted[0] == 1
