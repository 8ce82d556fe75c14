"""Dense identity values for rows a Spark row plan inserts (MERGE inserts into identity tables).

PROTOCOL.md "Identity Columns": new values are ``start + k * step`` beyond the column's high-water
mark, unique, and the commit stores the new mark. The in-process MERGE hands out ``mark + step``,
``mark + 2 * step`` ... in source order; here the rows live in Spark partitions, so each partition
gets a dense range: one small job counts the rows needing a value per partition (over a persisted
frame, so the second pass sees the same partitions), the driver turns the counts into offsets,
and a ``mapInArrow`` pass gives the ``i``-th such row of partition ``p`` the value
``first + (offset[p] + i) * step``. ``monotonically_increasing_id`` would be unique too, but its
gaps (partition id << 33) would push the mark by billions per MERGE; the values here are exactly
those the in-process path would give (up to order), and the mark is the last of them.

A task that sees a different number of such rows than was counted for its partition (the frame
recomputed differently after eviction) fails the command rather than risk a duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dvengine.engine.spark.identifiers import quote
from dvengine.errors import CommitError, SchemaViolationError
from dvengine.writing.identity import IdentitySpec

_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_PARTITION = "__identity_partition"


@dataclass(frozen=True)
class IdentityTarget:
    """One identity column of the frame: its column name there, its spec, and which rows need a value."""

    column: str
    spec: IdentitySpec
    needs: Column


@dataclass(frozen=True)
class _Plan:
    column: str
    flag: str
    first: int
    step: int
    offsets: dict[int, int]  # partition id -> index of its first row needing a value
    counts: dict[int, int]  # partition id -> rows needing a value there


def with_identity_values(
    frame: DataFrame, targets: Sequence[IdentityTarget], persisted: list[DataFrame], operation: str
) -> tuple[DataFrame, dict[str, int]]:
    """``frame`` with new identity values in the targets' columns (BIGINT) where their rows need
    them, and the new high-water mark of each column that got values (for ``record_marks``).

    ``frame`` is persisted (appended to ``persisted``; the caller unpersists) so that the counting
    job and every later use see the same partitions."""
    if not targets:
        return frame, {}
    flags = [f"__identity_needs{k}" for k in range(len(targets))]
    by_column = {t.column: t for t in targets}
    columns = [F.col(quote(c)).cast("long").alias(c) if c in by_column else F.col(quote(c)) for c in frame.columns]
    base = frame.select(
        *columns,
        *[F.coalesce(t.needs, F.lit(False)).alias(flag) for t, flag in zip(targets, flags)],
        F.spark_partition_id().alias(_PARTITION),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(base)
    counted = (
        base.select(_PARTITION, *flags)
        .groupBy(_PARTITION)
        .agg(*[F.sum(F.col(flag).cast("long")).alias(flag) for flag in flags])
        .collect()
    )
    plans: list[_Plan] = []
    marks: dict[str, int] = {}
    for target, flag in zip(targets, flags):
        counts = {int(row[_PARTITION]): int(row[flag] or 0) for row in counted}
        total = sum(counts.values())
        if not total:
            continue
        spec = target.spec
        first, last = spec.first_new_value(), spec.first_new_value() + (total - 1) * spec.step
        if not _LONG_MIN <= last <= _LONG_MAX:
            raise SchemaViolationError(
                f"{operation} would insert {total} rows into IDENTITY column {spec.name!r}, but values from {first} in "
                f"steps of {spec.step} leave the BIGINT range; nothing was written"
            )
        offsets, running = {}, 0
        for partition in sorted(counts):
            offsets[partition], running = running, running + counts[partition]
        plans.append(_Plan(target.column, flag, first, spec.step, offsets, counts))
        mark = spec.mark_after([first, last])
        assert mark is not None
        marks[spec.name] = mark
    if not plans:
        return base.drop(*flags, _PARTITION), {}
    return base.mapInArrow(_assign(plans, operation), base.schema).drop(*flags, _PARTITION), marks


def _assign(plans: Sequence[_Plan], operation: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: each persisted partition's rows needing values get the next of its
    range. The partition is the one recorded in the persisted rows (``_PARTITION``), not the task's
    ``partitionId()``: a later plan may read the frame inside a union, whose tasks are numbered
    after the union's earlier children (a MERGE's change-data frames do)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: list[dict[int, int]] = [{} for _ in plans]
        for batch in batches:
            arrays = list(batch.columns)
            partitions = batch.column(batch.schema.get_field_index(_PARTITION))
            for partition in pc.unique(partitions).to_pylist():
                here = pc.equal(partitions, pa.scalar(partition, partitions.type))
                for k, plan in enumerate(plans):
                    needs = pc.and_(here, pc.fill_null(batch.column(plan.flag), False))
                    n = int(pc.sum(needs.cast(pa.int64())).as_py() or 0)
                    if not n:
                        continue
                    done = seen[k].get(partition, 0)
                    start = plan.offsets.get(partition, 0) + done
                    values = pa.array(plan.first + plan.step * (start + np.arange(n, dtype=np.int64)), pa.int64())
                    index = batch.schema.get_field_index(plan.column)
                    arrays[index] = pc.replace_with_mask(arrays[index].cast(pa.int64()), needs, values)
                    seen[k][partition] = done + n
            yield pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
        for k, plan in enumerate(plans):
            for partition, n in seen[k].items():
                if n != plan.counts.get(partition, 0):
                    raise CommitError(
                        f"{operation}: partition {partition} holds {n} rows needing IDENTITY values for column "
                        f"{plan.column!r}, but {plan.counts.get(partition, 0)} were counted (the rows were recomputed "
                        "differently); no values were committed"
                    )

    return run


_ROW_BITS = 33  # monotonically_increasing_id() = task partition << 33 | row index within the task


def with_appended_identity_values(
    frame: DataFrame, specs: Mapping[str, IdentitySpec], persisted: list[DataFrame], operation: str
) -> tuple[DataFrame, dict[str, int]]:
    """``frame`` with a new value in every row of each identity column of ``specs`` (an append:
    every row needs one), and the new high-water marks.

    The same dense values as ``with_identity_values`` (row ``i`` of persisted partition ``p`` gets
    ``first + step * (offset[p] + i)``), computed in the JVM: an append needs no per-row flag, so
    ``i`` is the row's index within the task that reads persisted partition ``p`` (the low bits of
    ``monotonically_increasing_id()``; a task reads exactly one persisted partition, and Spark
    never pushes a filter below the nondeterministic projection) and the offsets are a literal array.
    A row whose index reaches its partition's counted size (the rows recomputed differently after
    an eviction) fails the command instead of repeating a value. Measured against a Python
    ``mapInArrow`` pass: ``benchmarks/results/identity-append/``."""
    base = frame.select("*", F.spark_partition_id().alias(_PARTITION)).persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(base)
    counts = {int(row[_PARTITION]): int(row["count"]) for row in base.groupBy(_PARTITION).count().collect()}
    total = sum(counts.values())
    if not total:
        return base.drop(_PARTITION), {}
    offsets, running = {}, 0
    for partition in sorted(counts):
        offsets[partition], running = running, running + counts[partition]
    index = F.monotonically_increasing_id().bitwiseAND(F.lit((1 << _ROW_BITS) - 1))
    def by_partition(numbers: dict[int, int]) -> Column:
        """``numbers[partition]`` of each row: an array literal indexed by partition id (O(1) per
        row; a map literal's lookup scans its keys, which with thousands of partitions dominated)."""
        dense = [numbers.get(p, 0) for p in range(max(numbers) + 1)]
        return F.element_at(F.array(*[F.lit(n).cast("long") for n in dense]), F.col(_PARTITION) + 1)

    size, offset = by_partition(counts), by_partition(offsets)
    position = F.when(index < size, offset + index).otherwise(F.raise_error(F.lit(
        f"{operation}: a persisted partition holds more rows than were counted (the rows were recomputed "
        "differently); no IDENTITY values were committed"
    )))
    marks: dict[str, int] = {}
    values: dict[str, Column] = {}
    for name, spec in specs.items():
        first = spec.first_new_value()
        last = first + (total - 1) * spec.step
        if not _LONG_MIN <= last <= _LONG_MAX:
            raise SchemaViolationError(
                f"{operation} would insert {total} rows into IDENTITY column {spec.name!r}, but values from {first} in "
                f"steps of {spec.step} leave the BIGINT range; nothing was written"
            )
        mark = spec.mark_after([first, last])
        assert mark is not None
        marks[spec.name] = mark
        values[name] = (F.lit(first) + F.lit(spec.step) * position).cast("long").alias(name)
    return base.select(*[values.get(c, F.col(quote(c))) for c in frame.columns]), marks
