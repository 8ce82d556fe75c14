"""Turning per-file outcomes of a verification scan into commit actions and Delta's metrics.

Executors report, per touched file, what happened to it (DV, rewrite or remove, with the new DV
descriptor) and which DV files they wrote; everything after that is the same for every engine:
the ``remove`` + re-``add`` pair with the DV (PROTOCOL.md "Deletion Vectors": the re-add keeps
``numRecords`` as the physical count and gets ``tightBounds: false``), a plain remove for files
left without live rows, and the list of files the command must rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from dvengine.planning.decisions import FileAction
from dvengine.protocol.actions import Action, AddFile, DeletionVectorDescriptor
from dvengine.protocol.stats import stats_for_dv_file


@dataclass(frozen=True, slots=True)
class FileRetirement:
    """One touched file: its action, its new DV (DV action only) and how many rows it lost now."""

    add: AddFile
    action: FileAction
    deletion_vector: DeletionVectorDescriptor | None
    newly_deleted: int


@dataclass
class RowRetirement:
    """Outcome of retiring matched rows: actions to commit and the files left to rewrite."""

    actions: list[Action] = field(default_factory=list)
    files_to_rewrite: list[AddFile] = field(default_factory=list)
    rows_retired: int = 0
    rows_retired_in_rewritten_files: int = 0
    dvs_added: int = 0
    dvs_updated: int = 0
    dvs_removed: int = 0
    files_removed: int = 0
    removed_bytes: int = 0
    touched_files: int = 0
    elapsed_ms: int = 0
    dv_files: list[str] = field(default_factory=list)  # absolute paths of DV files possibly written

    def delta_metrics(self) -> dict[str, int]:
        """The file and DV counts DELETE and UPDATE report under Delta's metric names."""
        return {
            "numRemovedFiles": self.files_removed,
            "numRemovedBytes": self.removed_bytes,
            "numDeletionVectorsAdded": self.dvs_added,
            "numDeletionVectorsUpdated": self.dvs_updated,
            "numDeletionVectorsRemoved": self.dvs_removed,
            "scanTimeMs": self.elapsed_ms,
        }

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def build_retirement(outcomes: Iterable[FileRetirement], now_ms: int, dv_files: Sequence[str], elapsed_ms: int) -> RowRetirement:
    """Commit actions and counts for ``outcomes``; files with nothing newly deleted are left alone."""
    out = RowRetirement(dv_files=list(dv_files), elapsed_ms=elapsed_ms)
    for outcome in outcomes:
        if outcome.newly_deleted == 0:
            continue
        add = outcome.add
        out.touched_files += 1
        out.rows_retired += outcome.newly_deleted
        remove = add.to_remove(now_ms)
        if outcome.action is FileAction.DELETION_VECTOR:
            assert outcome.deletion_vector is not None
            out.actions += [
                remove,
                replace(add, deletion_vector=outcome.deletion_vector, stats=stats_for_dv_file(add.stats), data_change=True),
            ]
            if add.deletion_vector is None:
                out.dvs_added += 1
            else:
                out.dvs_updated += 1
            continue
        if add.deletion_vector is not None:
            out.dvs_removed += 1
        out.files_removed += 1
        out.removed_bytes += add.size
        out.actions.append(remove)
        if outcome.action is FileAction.REWRITE:
            out.files_to_rewrite.append(add)
            out.rows_retired_in_rewritten_files += outcome.newly_deleted
    return out
