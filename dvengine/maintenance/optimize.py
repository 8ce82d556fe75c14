"""OPTIMIZE (bin-packing compaction): which files, grouped how, committed how, reported how.

Delta's rules (OptimizeTableCommand / OptimizeStats in delta-spark), kept engine-neutral here so
the embedded executor (and later Spark) only has to turn a bin of files into new files:

- candidates are the live files of the partitions the partition-only ``where`` selects;
- a candidate is compacted when it is smaller than ``optimize.minFileSize`` or its DV deletes a
  larger fraction of its physical rows than ``optimize.maxDeletedRowsRatio`` (a DV'd file without
  ``numRecords`` always qualifies);
- per partition, files sorted by size are packed into bins of at most ``optimize.maxFileSize``
  bytes; a bin holding a single file is left alone (rewriting one file only to itself buys
  nothing in Delta's eyes; REORG PURGE is the command that rewrites single files);
- everything is committed as one ``OPTIMIZE`` transaction: ``remove`` of every compacted (path,
  DV) and ``add`` of the new files, all with ``dataChange=false`` so streaming and CDF readers see
  no new data. The compacted files are recorded as read, so a concurrent DELETE/UPDATE that
  removes or re-DVs one of them fails one of the two commits instead of losing rows; concurrent
  appends do not conflict (compaction does not change rows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dvengine.commands.options import ConfLookup, conf_number
from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.commit.commit_info import ParameterValue, delta_json, predicate_parameter
from dvengine.commit.transaction import Transaction
from dvengine.errors import CommitError, InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import BoundPredicate, is_partition_only, parse_predicate, partition_might_match
from dvengine.log import Snapshot
from dvengine.protocol.actions import Action, AddFile
from dvengine.protocol.features import check_writable
from dvengine.writing.stats import num_indexed_cols

OPERATION = "OPTIMIZE"
CONF_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
CONF_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
CONF_MAX_DELETED_ROWS_RATIO = "spark.databricks.delta.optimize.maxDeletedRowsRatio"
DEFAULT_MIN_FILE_SIZE = 1024 * 1024 * 1024
DEFAULT_MAX_FILE_SIZE = 1024 * 1024 * 1024
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05

# Turns one bin (files of one partition) into new data files of ``snapshot``'s table; the files
# must carry ``dataChange=false`` or will be given it.
BinRewriter = Callable[[Snapshot, Sequence[AddFile]], list[AddFile]]


@dataclass(frozen=True)
class OptimizeSettings:
    """Delta's three compaction confs, validated (Delta refuses negatives and ratios outside [0, 1])."""

    min_file_size: int = DEFAULT_MIN_FILE_SIZE
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    max_deleted_rows_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO

    @classmethod
    def from_conf(cls, conf: Callable[[str], str | None]) -> OptimizeSettings:
        settings = cls(
            int(conf_number(conf, CONF_MIN_FILE_SIZE, DEFAULT_MIN_FILE_SIZE, int)),
            int(conf_number(conf, CONF_MAX_FILE_SIZE, DEFAULT_MAX_FILE_SIZE, int)),
            max_deleted_rows_ratio(conf),
        )
        if settings.min_file_size < 0:
            raise InvalidArgumentError(f"{CONF_MIN_FILE_SIZE} has to be positive, got {settings.min_file_size}")
        if settings.max_file_size < 0:
            raise InvalidArgumentError(f"{CONF_MAX_FILE_SIZE} has to be positive, got {settings.max_file_size}")
        return settings


@dataclass(frozen=True)
class Bin:
    partition_values: Mapping[str, str | None]
    files: tuple[AddFile, ...]


@dataclass
class OptimizePlan:
    snapshot: Snapshot
    predicate: BoundPredicate | None
    candidates: list[AddFile]
    bins: list[Bin] = field(default_factory=list)

    @property
    def files(self) -> list[AddFile]:
        return [f for b in self.bins for f in b.files]


def partition_predicate(snapshot: Snapshot, condition: str | None) -> BoundPredicate | None:
    """The ``where`` of OPTIMIZE, which Delta allows on partition columns only."""
    if condition is None:
        return None
    if not isinstance(condition, str):
        raise TypeError(f"the OPTIMIZE partition filter must be a SQL string, got {type(condition).__name__}")
    predicate = parse_predicate(condition, snapshot.schema)
    if not is_partition_only(predicate, snapshot.partition_columns):
        parts = {p.lower() for p in snapshot.partition_columns}
        others = sorted(c for c in predicate.columns if c.lower() not in parts)
        raise InvalidPredicateError(
            f"Predicate references non-partition column {', '.join(repr(c) for c in others)}. "
            f"Only the partition columns may be referenced: [{', '.join(snapshot.partition_columns)}] "
            f"(OPTIMIZE partition filter {condition!r}; nothing was written)"
        )
    return predicate


def max_deleted_rows_ratio(conf: Callable[[str], str | None]) -> float:
    """OPTIMIZE's ``maxDeletedRowsRatio`` (also auto compaction's), checked to be a share."""
    ratio = float(conf_number(conf, CONF_MAX_DELETED_ROWS_RATIO, DEFAULT_MAX_DELETED_ROWS_RATIO, float))
    if not 0.0 <= ratio <= 1.0:
        raise InvalidArgumentError(f"{CONF_MAX_DELETED_ROWS_RATIO} must be in range [0.0, 1.0], got {ratio}")
    return ratio


def _deleted_ratio(add: AddFile) -> float:
    physical = add.num_records
    return 0.0 if not physical else add.deleted_row_count / physical


def should_compact(add: AddFile, settings: OptimizeSettings) -> bool:
    """Delta's filterCandidateFileList: small, or too many of its rows deleted."""
    return add.size < settings.min_file_size or too_many_deleted_rows(add, settings.max_deleted_rows_ratio)


def too_many_deleted_rows(add: AddFile, ratio: float) -> bool:
    """A file with a DV but no row count, or whose DV hides more than ``ratio`` of its rows."""
    if add.deletion_vector is not None and add.num_records is None:
        return True
    return _deleted_ratio(add) > ratio


def pack_bins(files: Sequence[AddFile], max_bin_size: int) -> list[list[AddFile]]:
    """Delta's groupFilesIntoBins for one partition: size-sorted, greedy, single-file bins dropped."""
    bins: list[list[AddFile]] = []
    current: list[AddFile] = []
    current_size = 0
    for add in sorted(files, key=lambda a: a.size):
        if add.size + current_size > max_bin_size:
            bins.append(current)
            current, current_size = [add], add.size
        else:
            current.append(add)
            current_size += add.size
    if current:
        bins.append(current)
    return [b for b in bins if len(b) > 1]


def files_by_partition(
    snapshot: Snapshot, condition: str | None, keep: Callable[[AddFile], bool] = lambda _add: True
) -> tuple[BoundPredicate | None, list[AddFile], list[list[AddFile]]]:
    """The partition-only ``condition`` bound, the live files it selects, and those of them ``keep``
    accepts grouped by partition: what OPTIMIZE, ZORDER BY and clustering plan from (checked writable)."""
    check_writable(snapshot.protocol, snapshot.metadata)
    predicate = partition_predicate(snapshot, condition)
    candidates = [
        add
        for add in snapshot.files
        if predicate is None or partition_might_match(predicate, snapshot.partition_values_logical(add))
    ]
    by_partition: dict[tuple[tuple[str, object], ...], list[AddFile]] = {}
    for add in candidates:
        if keep(add):
            # typed values, so "1" and "01" of an int partition are one partition (as in Delta)
            key = tuple(sorted((k, repr(v)) for k, v in snapshot.partition_values_logical(add).items()))
            by_partition.setdefault(key, []).append(add)
    return predicate, candidates, list(by_partition.values())


def plan_optimize(snapshot: Snapshot, condition: str | None, settings: OptimizeSettings) -> OptimizePlan:
    predicate, candidates, groups = files_by_partition(snapshot, condition, lambda add: should_compact(add, settings))
    plan = OptimizePlan(snapshot, predicate, candidates)
    for files in groups:
        for packed in pack_bins(files, settings.max_file_size):
            plan.bins.append(Bin(dict(packed[0].partition_values), tuple(packed)))
    return plan


def purge_plan(snapshot: Snapshot) -> OptimizePlan:
    """Every live file carrying a DV, each in a bin of its own (REORG ... APPLY (PURGE))."""
    check_writable(snapshot.protocol, snapshot.metadata)
    with_dvs = [f for f in snapshot.files if f.deletion_vector is not None]
    plan = OptimizePlan(snapshot, None, list(snapshot.files))
    plan.bins = [Bin(dict(f.partition_values), (f,)) for f in with_dvs]
    return plan


def _size_metrics(sizes: Sequence[int]) -> dict[str, Any]:
    """Delta's FileSizeMetrics: min/max None (null) when there are no files."""
    if not sizes:
        return {"min": None, "max": None, "avg": 0.0, "totalFiles": 0, "totalSize": 0}
    return {
        "min": min(sizes),
        "max": max(sizes),
        "avg": sum(sizes) / len(sizes),
        "totalFiles": len(sizes),
        "totalSize": sum(sizes),
    }


def optimize_metrics(
    plan: OptimizePlan, added: Sequence[AddFile], started_ms: int, ended_ms: int, num_batches: int
) -> dict[str, Any]:
    """The OptimizeMetrics struct of delta-spark's result row (zOrder/clustering stats are null)."""
    removed = plan.files
    dvs = [f.deletion_vector for f in removed if f.deletion_vector is not None]
    schema_size = len(plan.snapshot.schema.fields)
    indexed = num_indexed_cols(plan.snapshot.configuration)
    return {
        "numFilesAdded": len(added),
        "numFilesRemoved": len(removed),
        "filesAdded": _size_metrics([a.size for a in added]),
        "filesRemoved": _size_metrics([a.size for a in removed]),
        "partitionsOptimized": len({tuple(sorted(b.partition_values.items())) for b in plan.bins}),
        "zOrderStats": None,
        "clusteringStats": None,
        "numBins": len(plan.bins),
        "numBatches": num_batches,
        "totalConsideredFiles": len(plan.candidates),
        "totalFilesSkipped": len(plan.candidates) - len(removed),
        "preserveInsertionOrder": False,
        "numFilesSkippedToReduceWriteAmplification": 0,
        "numBytesSkippedToReduceWriteAmplification": 0,
        "startTimeMs": started_ms,
        "endTimeMs": ended_ms,
        "totalClusterParallelism": 1,
        "totalScheduledTasks": 0,
        "autoCompactParallelismStats": None,
        "deletionVectorStats": (
            {"numDeletionVectorsRemoved": len(dvs), "numDeletionVectorRowsRemoved": sum(d.cardinality for d in dvs)}
            if dvs
            else None
        ),
        "numTableColumns": schema_size,
        "numTableColumnsWithStats": schema_size if indexed < 0 else min(indexed, schema_size),
    }


def _histogram(sizes: Sequence[int]) -> dict[str, int]:
    """FileSizeStatsWithHistogram of the commit metrics (index count/4, count/2, 3*count/4)."""
    ordered = sorted(sizes)
    n = len(ordered)
    return {
        "minFileSize": ordered[0],
        "p25FileSize": ordered[n // 4],
        "p50FileSize": ordered[n // 2],
        "p75FileSize": ordered[n * 3 // 4],
        "maxFileSize": ordered[-1],
    }


def commit_metrics(plan: OptimizePlan, added: Sequence[AddFile]) -> dict[str, int]:
    """operationMetrics of the OPTIMIZE commitInfo, named as OptimizeExecutor.createMetrics names them."""
    removed = plan.files
    dvs = [f.deletion_vector for f in removed if f.deletion_vector is not None]
    return {
        **_histogram([a.size for a in added]),
        "numAddedFiles": len(added),
        "numRemovedFiles": len(removed),
        "numAddedBytes": sum(a.size for a in added),
        "numRemovedBytes": sum(a.size for a in removed),
        "numDeletionVectorsRemoved": len(dvs),
        "numDeletionVectorRowsRemoved": sum(d.cardinality for d in dvs),
        "numDeletionVectorBytesRemoved": sum(d.size_in_bytes for d in dvs),
    }


def optimize_parameters(
    predicate: str, z_order_by: Sequence[str] = (), cluster_by: Sequence[str] = (), auto: bool = False, full: bool = False
) -> dict[str, ParameterValue]:
    """operationParameters of Delta's ``DeltaOperations.Optimize`` (``predicate`` already JSON text:
    OPTIMIZE's condition or auto compaction's partitions): ``zOrderBy`` / ``clusterBy`` compact
    JSON lists (``zOrderBy`` empty when clustering), ``auto`` a JSON boolean, and ``isFull``
    (``OPTIMIZE t FULL``) only for a clustered table ("isFull is not relevant for non-clustering
    tables, so skip it")."""
    params: dict[str, ParameterValue] = {
        "predicate": predicate,
        "zOrderBy": delta_json([] if cluster_by else list(z_order_by)),
        "clusterBy": delta_json(list(cluster_by)),
        "auto": auto,
    }
    if cluster_by:
        params["isFull"] = full
    return params


def operation_parameters(predicate: BoundPredicate | None, z_order_by: Sequence[str] = ()) -> dict[str, ParameterValue]:
    """A manual OPTIMIZE [ZORDER BY] of an unclustered table."""
    return optimize_parameters(predicate_parameter(predicate), z_order_by)


def run_optimize(
    plan: OptimizePlan,
    rewrite_bin: BinRewriter,
    operation: str = OPERATION,
    parameters: Mapping[str, ParameterValue] | None = None,
    conf: ConfLookup | None = None,
) -> tuple[dict[str, Any], int | None]:
    """Rewrite every bin and commit once; returns (Delta's OptimizeMetrics, committed version or None).
    ``conf``: the session's conf, which the commit reads (``commitInfo.userMetadata``).

    Nothing is committed when no bin was formed. New files are deleted again when the commit (or
    the row-count check) fails, so a failed OPTIMIZE leaves the table folder as it was.
    """
    started_ms = int(time.time() * 1000)
    snapshot = plan.snapshot
    if not plan.bins:
        return optimize_metrics(plan, [], started_ms, int(time.time() * 1000), 0), None
    params = operation_parameters(plan.predicate) if parameters is None else parameters
    txn = Transaction(snapshot.table_root, snapshot, operation, params, conf=conf)
    txn.record_read(plan.files, lambda add: False)
    written = WrittenFiles(snapshot.table_root)
    added: list[AddFile] = []
    try:
        for b in plan.bins:
            new_files = [replace(a, data_change=False) for a in rewrite_bin(snapshot, b.files)]
            written.add_data_files(new_files)
            added.extend(new_files)
            expected = sum((f.num_records or 0) - f.deleted_row_count for f in b.files)
            got = sum(a.num_records or 0 for a in new_files)
            if all(f.num_records is not None for f in b.files) and got != expected:
                raise CommitError(
                    f"OPTIMIZE of {snapshot.table_root} wrote {got} rows for a bin whose files hold {expected} live rows "
                    f"(partition {dict(b.partition_values)}); nothing was committed"
                )
    except BaseException:
        written.remove_all()
        raise
    now_ms = int(time.time() * 1000)
    actions: list[Action] = [f.to_remove(now_ms, data_change=False) for f in plan.files]
    actions.extend(added)
    txn.add_actions(actions)
    version = commit_or_clean_up(txn, commit_metrics(plan, added), written)
    return optimize_metrics(plan, added, started_ms, int(time.time() * 1000), 1), version
