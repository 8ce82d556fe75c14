"""Row-level conflict resolution: rebase a DV change onto a winner's DV update of the same file.

:func:`dvengine.commit.conflicts.check_conflicts` hands back the paths a winning commit
DV-updated (removed and re-added with a deletion vector) that this transaction read or
DV-changed. Whether that is a conflict depends on rows, so it is decided here, with the DVs
loaded:

- ``base`` is the file as this transaction read it (DV ``D0``), ``winner`` the winner's re-add
  (DV ``Dw``), ``ours`` our re-add (DV ``D1 = D0 | R``, ``R`` the rows this command retires).
- ``Dw`` must contain ``D0``: a winner that *un-deletes* rows (RESTORE re-adding an older DV) can
  bring back rows our condition matches -> :class:`ConcurrentDeleteReadError`.
- A file we only read: our outcome does not depend on rows we did not retire (the footprint's
  ``row_level`` promise), so the winner's hidden rows change nothing; no conflict.
- A file we DV-changed: ``R & Dw`` non-empty means both retired the same row (for UPDATE: both
  changed it) -> :class:`ConcurrentDeleteDeleteError`. Otherwise our actions are rebased: remove
  the winner's (path, ``Dw``) and add (path, ``Dw | R``), a new DV encoded with the command's
  inline/file choice, stats from the winner's add (``tightBounds: false``). If ``Dw | R`` covers
  every physical row the file is removed instead, as DELETE does for a file left empty.

The result is exactly the commit this command would have made had it run after the winner (see
spec_notes/isolation-and-concurrency.md for the proof sketch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pyroaring import BitMap64

from dvengine.dv import absolute_dv_path, encode_deletion_vectors, load_deletion_vector
from dvengine.errors import ConcurrentDeleteDeleteError, ConcurrentDeleteReadError
from dvengine.protocol.actions import Action, AddFile, DeletionVectorDescriptor
from dvengine.protocol.stats import stats_for_dv_file


@dataclass(frozen=True, slots=True)
class RowLevelResolution:
    """How a transaction writes the DVs of a rebase, and where it reports the files it wrote
    (so a command that fails later removes them with the rest of its output)."""

    inline_max_bytes: int
    random_prefix_len: int = 0
    on_dv_file: Callable[[str], None] | None = None


@dataclass(frozen=True, slots=True)
class Rebased:
    """Our actions for one path after the rebase: they replace the old remove + re-add."""

    actions: tuple[Action, ...]
    new_add: AddFile | None  # None: the file is removed whole


def _bitmap(table_root: str, dv: DeletionVectorDescriptor | None, num_records: int | None) -> BitMap64:
    return BitMap64() if dv is None else load_deletion_vector(table_root, dv, num_records)


def resolve_dv_update(
    table_root: str,
    path: str,
    base: AddFile | None,
    winner: AddFile,
    ours: AddFile | None,
    winner_description: str,
    resolution: RowLevelResolution,
    now_ms: int,
) -> Rebased | None:
    """Decide one row-level conflict; None when nothing of ours changes (a file we only read)."""
    num_records = winner.num_records
    winner_rows = _bitmap(table_root, winner.deletion_vector, num_records)
    base_rows = _bitmap(table_root, None if base is None else base.deletion_vector, num_records)
    if not base_rows.issubset(winner_rows):
        raise ConcurrentDeleteReadError(
            f"a concurrent commit at {winner_description} re-added file {path} with a deletion vector that "
            f"no longer hides {len(base_rows - winner_rows)} row(s) this transaction saw as deleted; "
            "retry the operation"
        )
    if ours is None:
        return None
    our_rows = _bitmap(table_root, ours.deletion_vector, num_records) - base_rows
    same = our_rows & winner_rows
    if same:
        raise ConcurrentDeleteDeleteError(
            f"a concurrent commit at {winner_description} deleted or updated {len(same)} row(s) of file {path} "
            f"that this transaction also changes (first row index {same.min()}); retry the operation"
        )
    union = winner_rows | our_rows
    remove = winner.to_remove(now_ms)
    if num_records is not None and len(union) >= num_records:
        return Rebased((remove,), None)
    descriptor = encode_deletion_vectors(
        table_root, [union], resolution.inline_max_bytes, resolution.random_prefix_len
    )[0]
    if not descriptor.is_inline and resolution.on_dv_file is not None:
        resolution.on_dv_file(absolute_dv_path(table_root, descriptor))
    add = replace(winner, deletion_vector=descriptor, stats=stats_for_dv_file(winner.stats), data_change=True)
    return Rebased((remove, add), add)
