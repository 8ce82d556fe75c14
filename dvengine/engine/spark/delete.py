"""DELETE with deletion vectors: prune, skip, verify, then DV / rewrite / remove per file.

Commit shape (PROTOCOL.md "Deletion Vectors"): a file that keeps live rows is re-committed as
``remove(path, old DV)`` + ``add(path, new DV)`` with ``numRecords`` still the physical row count
and ``tightBounds: false``; a file left without live rows gets a plain ``remove``; a file above
the rewrite threshold is replaced by a new file holding only its surviving rows.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from dvengine.engine.spark.dml_common import prepare_dml, retire_rows, write_rows
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, scan_logical
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.stats import FileStats
from dvengine.storage import resolve_data_path


def live_rows(snapshot: Snapshot, add: AddFile) -> int:
    """Live rows of a file from its stats, or its Parquet footer when stats are missing."""
    stats = FileStats.parse(add.stats)
    physical = stats.num_records if stats is not None and stats.num_records is not None else None
    if physical is None:
        physical = pq.read_metadata(resolve_data_path(snapshot.table_root, add.path)).num_rows
    return physical - add.deleted_row_count


def execute_delete(
    spark: SparkSession, table_root: str, condition: str | Column | None = None, mode: str | None = None
) -> dict[str, Any]:
    started = time.monotonic()
    setup = prepare_dml(spark, table_root, "DELETE", condition, mode)
    snapshot, plan, predicate, txn, now_ms = setup.snapshot, setup.plan, setup.predicate, setup.transaction, setup.now_ms
    metrics: dict[str, Any] = {
        "numDeletedRows": 0,
        "numRemovedFiles": 0,
        "numAddedFiles": 0,
        "numCopiedRows": 0,
        "numDeletionVectorsAdded": 0,
        "numDeletionVectorsRemoved": 0,
        "numDeletionVectorsUpdated": 0,
        "numAddedBytes": 0,
        "numRemovedBytes": 0,
        "scanTimeMs": 0,
        "rewriteTimeMs": 0,
        **plan.metrics(),
        "numFilesVerified": 0,
    }

    if plan.partition_only:
        # Whole files match: drop them from the log without reading a single row.
        for add in plan.candidates:
            txn.add_actions([add.to_remove(now_ms)])
            metrics["numDeletedRows"] += live_rows(snapshot, add)
            metrics["numRemovedFiles"] += 1
            metrics["numRemovedBytes"] += add.size
            metrics["numDeletionVectorsRemoved"] += int(add.deletion_vector is not None)
    elif plan.candidates:
        assert predicate is not None
        metrics["numFilesVerified"] = len(plan.candidates)
        matched = (
            scan_logical(spark, snapshot, plan.candidates, columns=predicate.columns, keep_row_ids=True)
            .where(F.expr(predicate.sql))
            .select(FILE_PATH_COL, ROW_INDEX_COL)
        )
        retired = retire_rows(spark, snapshot, plan.candidates, matched, setup.options, setup.dv_supported, now_ms)
        txn.add_actions(retired.actions)
        metrics.update(retired.delta_metrics(), numDeletedRows=retired.rows_retired)
        if retired.files_to_rewrite:
            survivors = scan_logical(spark, snapshot, retired.files_to_rewrite).where(
                ~F.coalesce(F.expr(predicate.sql), F.lit(False))
            )
            written = write_rows(survivors, snapshot)
            txn.add_actions(written.files)
            metrics.update(
                numAddedFiles=len(written.files),
                numAddedBytes=written.bytes,
                numCopiedRows=written.rows,
                rewriteTimeMs=written.elapsed_ms,
            )

    metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
    if metrics["numRemovedFiles"] == 0 and metrics["numDeletionVectorsAdded"] == 0 and metrics["numDeletionVectorsUpdated"] == 0:
        metrics["version"] = None  # nothing matched: no commit
        return metrics
    metrics["version"] = txn.commit({k: v for k, v in metrics.items() if k != "version"})
    return metrics

