"""DELETE: prune, skip, verify, then DV / rewrite / remove per file; one commit.

A predicate on partition columns only matches whole files: they are removed from the log
without reading a row. Otherwise the executor's verification scan finds the matching rows and
retires them (a DV, or a plain remove for files left empty); files above the rewrite threshold
are rewritten with their surviving rows.
"""

from __future__ import annotations

from typing import Any

from dvengine.commands.change_data import change_file_metrics, register_change_files, writes_change_data
from dvengine.commands.context import DmlContext
from dvengine.commands.executor import Executor
from dvengine.protocol.actions import AddFile
from dvengine.read import physical_row_count


def delete_metrics(ctx: DmlContext, executor_name: str) -> dict[str, Any]:
    return {
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
        "numAddedChangeFiles": 0,
        "changeFileBytes": 0,
        **ctx.plan.metrics(),
        "numFilesVerified": 0,
        "executionEngine": executor_name,
    }


def run_delete(ctx: DmlContext, executor: Executor) -> dict[str, Any]:
    """Execute a planned DELETE; returns Delta's DELETE metrics plus ``version`` (None: nothing matched)."""
    metrics = delete_metrics(ctx, executor.name)
    with ctx.cleaning_up_on_failure():
        delete_rows(ctx, executor, metrics)
        return ctx.finish(metrics)


def delete_rows(ctx: DmlContext, executor: Executor, metrics: dict[str, Any]) -> None:
    """Add to ``ctx.transaction`` the actions deleting the rows matching ``ctx.predicate``, counting
    them into ``metrics``; shared with ``write(replaceWhere=...)``, which deletes then appends."""
    txn = ctx.transaction
    if ctx.plan.partition_only:
        for add in ctx.plan.candidates:
            txn.add_actions([add.to_remove(ctx.now_ms)])
            metrics["numDeletedRows"] += _live_rows(ctx, add)
            metrics["numRemovedFiles"] += 1
            metrics["numRemovedBytes"] += add.size
            metrics["numDeletionVectorsRemoved"] += int(add.deletion_vector is not None)
    elif ctx.plan.candidates:
        assert ctx.predicate is not None
        metrics["numFilesVerified"] = len(ctx.plan.candidates)
        retired = executor.retire_rows(ctx, ctx.plan.candidates, ctx.predicate)
        txn.add_actions(retired.actions)
        metrics.update(retired.delta_metrics(), numDeletedRows=retired.rows_retired)
        if retired.files_to_rewrite:
            survivors = executor.write_survivors(ctx, retired.files_to_rewrite, ctx.predicate)
            txn.add_actions(survivors.files)
            metrics.update(
                numAddedFiles=len(survivors.files),
                numAddedBytes=survivors.bytes,
                numCopiedRows=survivors.rows,
                rewriteTimeMs=survivors.elapsed_ms,
            )
            if writes_change_data(ctx.snapshot):
                # Copy-on-write: re-added survivors would read as inserts, so the deleted rows are
                # written out (Delta Spark does the same); DV-only deletes are derived by readers.
                changes = register_change_files(ctx, executor.write_change_data(ctx, ctx.predicate, None))
                metrics.update(change_file_metrics(changes, "DELETE"))


def _live_rows(ctx: DmlContext, add: AddFile) -> int:
    """Live rows of a file from its stats, or its Parquet footer when the writer gave no stats."""
    live = add.live_records
    if live is not None:
        return live
    return physical_row_count(ctx.snapshot, add) - add.deleted_row_count
