"""MERGE's operation metrics under Delta's names, the same for every executor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dvengine.commands.merge_clauses import BoundClause, ClauseAction, ClauseKind
from dvengine.commands.retirement import RowRetirement
from dvengine.planning.candidates import CandidatePlan
from dvengine.protocol.actions import AddFile


def merge_metrics(
    clauses: Sequence[BoundClause],
    counts: Mapping[int, int],
    rows_may_repeat: bool,
    num_source_rows: int,
    retired: RowRetirement,
    adds: Sequence[AddFile],
    plan: CandidatePlan,
    scan_ms: int,
    rewrite_ms: int,
    engine: str,
) -> dict[str, Any]:
    """``counts`` maps clause id -> rows that took the clause. ``rows_may_repeat``: the MERGE is a
    plain matched DELETE, where several source rows may match one target row (no cardinality
    check), so deleted target rows are counted once each, from the retirement."""
    by_id = {c.clause_id: c for c in clauses}

    def count(kind: ClauseKind, action: ClauseAction) -> int:
        return sum(n for cid, n in counts.items() if by_id[cid].kind is kind and by_id[cid].action is action)

    matched_updated = count(ClauseKind.MATCHED, ClauseAction.UPDATE)
    matched_deleted = count(ClauseKind.MATCHED, ClauseAction.DELETE)
    if rows_may_repeat and matched_deleted:
        matched_deleted = retired.rows_retired
    by_source_updated = count(ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.UPDATE)
    by_source_deleted = count(ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.DELETE)
    inserted = count(ClauseKind.NOT_MATCHED, ClauseAction.INSERT)
    output_rows = sum(add.num_records or 0 for add in adds)
    return {
        "numSourceRows": num_source_rows,
        "numTargetRowsInserted": inserted,
        "numTargetRowsUpdated": matched_updated + by_source_updated,
        "numTargetRowsDeleted": matched_deleted + by_source_deleted,
        "numTargetRowsMatchedUpdated": matched_updated,
        "numTargetRowsMatchedDeleted": matched_deleted,
        "numTargetRowsNotMatchedBySourceUpdated": by_source_updated,
        "numTargetRowsNotMatchedBySourceDeleted": by_source_deleted,
        "numTargetRowsCopied": output_rows - (matched_updated + by_source_updated + inserted) if adds else 0,
        "numOutputRows": output_rows,
        "numTargetDeletionVectorsAdded": retired.dvs_added,
        "numTargetDeletionVectorsRemoved": retired.dvs_removed,
        "numTargetDeletionVectorsUpdated": retired.dvs_updated,
        "numTargetFilesAdded": len(adds),
        "numTargetFilesRemoved": retired.files_removed,
        "numTargetBytesAdded": sum(a.size for a in adds),
        "numTargetBytesRemoved": retired.removed_bytes,
        "numTargetFilesBeforeSkipping": plan.num_files_total,
        "numTargetFilesAfterSkipping": len(plan.candidates),
        **plan.metrics(),
        "scanTimeMs": scan_ms,
        "rewriteTimeMs": rewrite_ms,
        "executionEngine": engine,
    }


def delta_merge_result(metrics: Mapping[str, Any]) -> dict[str, int]:
    """delta-spark's MERGE result row from the commit metrics: affected = updated + deleted + inserted."""
    updated = int(metrics.get("numTargetRowsUpdated") or 0)
    deleted = int(metrics.get("numTargetRowsDeleted") or 0)
    inserted = int(metrics.get("numTargetRowsInserted") or 0)
    return {
        "num_affected_rows": updated + deleted + inserted,
        "num_updated_rows": updated,
        "num_deleted_rows": deleted,
        "num_inserted_rows": inserted,
    }
