"""Candidate files for a DML predicate: partition pruning, then min/max stats skipping.

Only files that survive both steps are scanned. Both steps are conservative (a file is dropped
only when it provably holds no matching row), so the later verification scan is exact. When the
predicate references partition columns only, surviving files match *entirely* and the command
can drop them without reading any data. A condition on the source of a generated date partition
column (``day = CAST(ts AS DATE)``) also prunes by ``day`` (``generated_partitions``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dvengine.expressions import BoundPredicate, is_partition_only, partition_might_match, stats_might_match
from dvengine.log import Snapshot
from dvengine.planning.generated_partitions import generated_partition_filter
from dvengine.protocol.actions import AddFile
from dvengine.protocol.stats import FileStats


@dataclass(frozen=True, slots=True)
class CandidatePlan:
    candidates: tuple[AddFile, ...]
    num_files_total: int
    num_pruned_by_partition: int
    num_skipped_by_stats: int
    partition_only: bool

    def metrics(self) -> dict[str, int]:
        return {
            "numFilesTotal": self.num_files_total,
            "numFilesPrunedByPartition": self.num_pruned_by_partition,
            "numFilesSkippedByStats": self.num_skipped_by_stats,
            "numCandidateFiles": len(self.candidates),
        }


def might_match_function(snapshot: Snapshot, predicate: BoundPredicate | None) -> Callable[[AddFile], bool]:
    """The file filter a transaction records as its read predicate (for concurrent-append checks)."""
    if predicate is None:
        return lambda add: True
    schema = snapshot.schema

    def might_match(add: AddFile) -> bool:
        values = snapshot.partition_values_logical(add)
        if not partition_might_match(predicate, values):
            return False
        return stats_might_match(predicate, FileStats.parse(add.stats), schema, values)

    return might_match


def plan_candidates(snapshot: Snapshot, predicate: BoundPredicate | None) -> CandidatePlan:
    files = snapshot.files
    if predicate is None:
        return CandidatePlan(files, len(files), 0, 0, partition_only=True)
    schema = snapshot.schema
    derived = generated_partition_filter(schema, snapshot.partition_columns, predicate)  # pruning only
    after_partitions: list[tuple[AddFile, dict[str, object]]] = []
    # The partition verdict depends on the partition values only: judge each distinct tuple once
    # (an unpartitioned table has one, the empty tuple), not once per file.
    verdicts: dict[tuple[tuple[str, object], ...], bool] = {}
    for add in files:
        values = snapshot.partition_values_logical(add)
        key = tuple(sorted(values.items(), key=lambda kv: kv[0]))
        verdict = verdicts.get(key)
        if verdict is None:
            verdict = partition_might_match(predicate, values) and (
                derived is None or partition_might_match(derived, values)
            )
            verdicts[key] = verdict
        if verdict:
            after_partitions.append((add, values))
    partition_only = is_partition_only(predicate, snapshot.partition_columns)
    if partition_only:
        kept = [add for add, _ in after_partitions]
    else:
        kept = [
            add for add, values in after_partitions
            if stats_might_match(predicate, FileStats.parse(add.stats), schema, values)
        ]
    return CandidatePlan(
        candidates=tuple(kept),
        num_files_total=len(files),
        num_pruned_by_partition=len(files) - len(after_partitions),
        num_skipped_by_stats=len(after_partitions) - len(kept),
        partition_only=partition_only,
    )
