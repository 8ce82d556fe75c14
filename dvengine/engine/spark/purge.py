"""REORG TABLE ... APPLY (PURGE): rewrite files carrying deletion vectors so deleted rows are gone.

DVs make deletes cheap but leave the deleted rows physically in the Parquet files: they still
cost scan time and, for privacy deletes, they are still on disk. PURGE rewrites each selected
file without its deleted rows and commits, in one transaction, ``remove`` of the old (path, DV)
and ``add`` of the new files - all with ``dataChange=false``, because the table's rows do not
change (streaming readers and CDC consumers must not see these as new data). The old files
and their DV files become unreferenced and VACUUM reclaims them once outside retention.

The files rewritten are recorded as read, so a concurrent DELETE/UPDATE that changes one of
them makes one of the two commits fail with a typed conflict instead of losing its DV.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dvengine.commands.options import session_conf
from dvengine.commit.commit_info import ParameterValue, predicate_parameter
from dvengine.commit.transaction import Transaction
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.reader import scan_logical
from dvengine.engine.spark.row_ids import carried, scan_with_row_ids
from dvengine.engine.spark.writer import delete_written_files, write_parquet_files
from dvengine.errors import CommitError, InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import BoundPredicate, is_partition_only, parse_predicate, partition_might_match
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.actions import Action, AddFile
from dvengine.protocol.features import check_writable
from dvengine.read.row_ids import tracked_columns
from dvengine.storage.logstore import normalize_table_path

OPERATION = "REORG"


def _physical_rows(add: AddFile) -> int | None:
    return add.num_records


def _deleted_ratio(add: AddFile) -> float:
    physical = _physical_rows(add)
    if not physical:
        return 1.0  # unknown or zero physical rows: a DV'd file is always worth purging
    return add.deleted_row_count / physical


def _partition_predicate(snapshot: Snapshot, condition: str | None) -> BoundPredicate | None:
    if condition is None:
        return None
    predicate = parse_predicate(condition, snapshot.schema)
    if not is_partition_only(predicate, snapshot.partition_columns):
        raise InvalidPredicateError(
            f"PURGE condition {condition!r} must reference partition columns only "
            f"(partition columns: {list(snapshot.partition_columns)}); it references {sorted(predicate.columns)}"
        )
    return predicate


def select_files_to_purge(
    snapshot: Snapshot, predicate: BoundPredicate | None, min_deleted_ratio: float
) -> list[AddFile]:
    """Live files with a DV, in the partitions the predicate selects, deleted ratio >= the minimum."""
    chosen = []
    for add in snapshot.files:
        if add.deletion_vector is None or add.deleted_row_count == 0:
            continue
        if predicate is not None and not partition_might_match(predicate, snapshot.partition_values_logical(add)):
            continue
        if _deleted_ratio(add) >= min_deleted_ratio:
            chosen.append(add)
    return chosen


def _check_ratio(min_deleted_ratio: float) -> float:
    if isinstance(min_deleted_ratio, bool) or not isinstance(min_deleted_ratio, (int, float)):
        raise InvalidArgumentError(f"min_deleted_ratio must be a number in [0, 1], got {min_deleted_ratio!r}")
    if not 0.0 <= float(min_deleted_ratio) <= 1.0:
        raise InvalidArgumentError(f"min_deleted_ratio must be in [0, 1], got {min_deleted_ratio}")
    return float(min_deleted_ratio)


def _size_metrics(sizes: list[int]) -> dict[str, int]:
    if not sizes:
        return {}
    ordered = sorted(sizes)

    def pct(p: float) -> int:
        return ordered[min(len(ordered) - 1, int(p * (len(ordered) - 1) + 0.5))]

    return {
        "minFileSize": ordered[0],
        "p25FileSize": pct(0.25),
        "p50FileSize": pct(0.5),
        "p75FileSize": pct(0.75),
        "maxFileSize": ordered[-1],
    }


def purge(
    spark: SparkSession, table_root: str, condition: str | None = None, min_deleted_ratio: float = 0.0
) -> dict[str, Any]:
    """Rewrite the selected DV-carrying files without their deleted rows; return Delta-like metrics.

    ``condition`` is a Spark SQL predicate on partition columns only (else
    :class:`InvalidPredicateError`); ``min_deleted_ratio`` in [0, 1] keeps files whose
    deleted/physical row ratio is below it as they are. ``metrics["version"]`` is the committed
    version, or None when no file needed purging (nothing is committed then).
    """
    started = time.monotonic()
    ratio = _check_ratio(min_deleted_ratio)
    root = normalize_table_path(table_root)
    snapshot = load_snapshot(root)
    check_writable(snapshot.protocol, snapshot.metadata)
    predicate = _partition_predicate(snapshot, condition)
    files = select_files_to_purge(snapshot, predicate, ratio)

    metrics: dict[str, Any] = {
        "numRemovedFiles": 0,
        "numAddedFiles": 0,
        "numRemovedBytes": 0,
        "numAddedBytes": 0,
        "numDeletionVectorsRemoved": 0,
        "numDeletionVectorRowsRemoved": 0,
        "numCopiedRows": 0,
        "numFilesConsidered": len(snapshot.files),
    }
    if not files:
        metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
        metrics["version"] = None
        return metrics

    params: dict[str, ParameterValue] = {"predicate": predicate_parameter(predicate), "applyPurge": True}  # DeltaOperations.Reorg
    txn = Transaction(root, snapshot, OPERATION, params, conf=session_conf(spark))
    # A never-matching predicate: appends cannot invalidate a purge (it does not change rows),
    # but removal or re-DV of a file we rewrite must conflict (read_paths).
    txn.record_read(files, lambda add: False)
    now_ms = int(time.time() * 1000)
    actions: list[Action] = [add.to_remove(now_ms, data_change=False) for add in files]
    expected_rows = sum((_physical_rows(a) or 0) - a.deleted_row_count for a in files)
    to_rewrite = [a for a in files if _physical_rows(a) != a.deleted_row_count]

    new_files: list[AddFile] = []
    if to_rewrite:
        # copied rows keep their stable row ids and commit versions (row tracking enabled)
        tracked = tracked_columns(snapshot)
        if tracked is None:
            survivors = scan_logical(spark, snapshot, to_rewrite)
        else:
            scanned = scan_with_row_ids(spark, snapshot, to_rewrite)
            survivors = scanned.select(*[F.col(quote(f.name)) for f in snapshot.schema.fields], *carried(scanned, updated=False))
        new_files = [
            replace(a, data_change=False)
            for a in write_parquet_files(
                survivors, root, snapshot.schema, snapshot.partition_columns, materialized=tracked
            )
        ]
    try:
        written_rows = sum(_physical_rows(a) or 0 for a in new_files)
        if written_rows != expected_rows:
            raise CommitError(
                f"PURGE of {root} wrote {written_rows} rows but the purged files hold {expected_rows} live rows; "
                "nothing was committed"
            )
        actions.extend(new_files)
        txn.add_actions(actions)
        metrics.update(
            numRemovedFiles=len(files),
            numAddedFiles=len(new_files),
            numRemovedBytes=sum(a.size for a in files),
            numAddedBytes=sum(a.size for a in new_files),
            numDeletionVectorsRemoved=len(files),
            numDeletionVectorRowsRemoved=sum(a.deleted_row_count for a in files),
            numCopiedRows=written_rows,
            **_size_metrics([a.size for a in new_files]),
        )
        metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
        metrics["version"] = txn.commit({k: v for k, v in metrics.items() if k != "numFilesConsidered"})
    except BaseException:
        delete_written_files(root, new_files)
        raise
    return metrics
