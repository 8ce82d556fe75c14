"""Counting the Spark jobs one command starts, from Spark's own status tracker.

A small DML on Spark is dominated by fixed per-job costs (scheduling, task launch, a Python
worker round trip), so the number of jobs a command starts explains its latency better than any
timer. The bench tags every job started from this thread with a fresh job group and asks the
status tracker which jobs carry it: the count comes from Spark, not from dvengine's own bookkeeping,
so it cannot under-report a job dvengine did not know it started (a `count()`, a broadcast, a
Parquet write's commit job).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_GROUP_PROPERTY = "spark.jobGroup.id"
_sequence = itertools.count()


@dataclass
class JobCount:
    """Filled in when the ``count_spark_jobs`` block ends; None while it runs."""

    jobs: int | None = None


@contextmanager
def count_spark_jobs(spark: SparkSession | None, label: str) -> Iterator[JobCount]:
    """Count the Spark jobs started (from this thread) inside the block; None without a session.

    The caller's job group, if any, is put back afterwards, so user code around the bench keeps
    its own tagging.
    """
    result = JobCount()
    if spark is None:
        yield result
        return
    context = spark.sparkContext
    previous = context.getLocalProperty(_GROUP_PROPERTY)
    group = f"dvengine-bench-{label}-{next(_sequence)}"
    context.setJobGroup(group, f"dvengine bench: {label}")
    try:
        yield result
    finally:
        result.jobs = len(context.statusTracker().getJobIdsForGroup(group))
        context.setLocalProperty(_GROUP_PROPERTY, previous)  # type: ignore[arg-type]
