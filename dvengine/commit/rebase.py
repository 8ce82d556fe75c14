"""Row-level conflict resolution: rebase a DV change onto a winner's DV update of the same file.

:func:`dvengine.commit.conflicts.check_conflicts` hands back the paths a winning commit
DV-updated (removed and re-added with a deletion vector) that this transaction read or
DV-changed. Whether that is a conflict depends on rows, so it is decided here, with the DVs
loaded:

- ``base`` is the file as this transaction read it (DV ``D0``), ``winner`` the winner's re-add
  (DV ``Dw``), ``ours`` our re-add (DV ``D1 = D0 | R``, ``R`` the rows this command retires).
- ``Dw`` must contain ``D0``: a winner that *un-deletes* rows (RESTORE re-adding an older DV) can
  bring back rows our condition matches -> :class:`ConcurrentDeleteReadError`.
- ``K``, the rows this command *kept but depends on* (a MERGE's target rows that joined a source
  row and took no retiring clause: they still keep that source row from being inserted), must
  not meet ``Dw``: had the winner run first, such a source row would have been inserted ->
  :class:`ConcurrentDeleteReadError`. Commands that depend on no row beyond the ones they retire
  (DELETE, UPDATE, a MERGE whose every matched row is retired) have an empty ``K``.
- A file we only read: beyond ``K``, our outcome does not depend on rows we did not retire (the
  footprint's ``row_level`` promise), so the winner's hidden rows change nothing; no conflict.
- A file we DV-changed: ``R & Dw`` non-empty means both retired the same row (for UPDATE: both
  changed it) -> :class:`ConcurrentDeleteDeleteError`. Otherwise our actions are rebased: remove
  the winner's (path, ``Dw``) and add (path, ``Dw | R``), a new DV encoded with the command's
  inline/file choice, stats from the winner's add (``tightBounds: false``). If ``Dw | R`` covers
  every physical row the file is removed instead, as DELETE does for a file left empty.

The result is exactly the commit this command would have made had it run after the winner (see
spec_notes/isolation-and-concurrency.md for the proof sketch). Bitmaps stay in memory across
winners (:class:`FileRows`) and the new DV is encoded once per commit attempt, after every winner
was checked, not once per winner: under contention a loser may see several winners per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

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


@dataclass(slots=True)
class FileRows:
    """What the row-level rules know about one path, kept in memory across winners and retries.

    ``base``/``base_rows``: the file as the newest winner left it (first: as we read it);
    ``ours``: the rows this command retires there (None: a file we only read); ``kept``: rows it
    left alone but whose presence its outcome depends on (``K`` above); ``dirty``: a winner
    changed the base since our actions were last written out. ``read_had_dv`` and
    ``removed_whole`` let the commit's metrics describe the rebased actions, not the plan.
    """

    base: AddFile | None
    base_rows: BitMap64
    ours: BitMap64 | None
    kept: BitMap64 = field(default_factory=BitMap64)
    dirty: bool = False
    read_had_dv: bool = False
    rebased: bool = False
    removed_whole: bool = False


def _bitmap(table_root: str, dv: DeletionVectorDescriptor | None, num_records: int | None) -> BitMap64:
    return BitMap64() if dv is None else load_deletion_vector(table_root, dv, num_records)


def file_rows(table_root: str, base: AddFile | None, our_add: AddFile | None, kept: BitMap64 | None = None) -> FileRows:
    """The starting state of a path: its DV as read, our retired rows (our DV minus it), and the
    rows we kept but depend on."""
    num_records = None if base is None else base.num_records
    base_rows = _bitmap(table_root, None if base is None else base.deletion_vector, num_records)
    ours = None if our_add is None else _bitmap(table_root, our_add.deletion_vector, num_records) - base_rows
    read_had_dv = base is not None and base.deletion_vector is not None
    return FileRows(base, base_rows, ours, BitMap64() if kept is None else kept, read_had_dv=read_had_dv)


def apply_dv_update(table_root: str, path: str, state: FileRows, winner: AddFile, winner_description: str) -> None:
    """Move ``state`` onto the winner's version of the file, or raise the row-level conflict."""
    winner_rows = _bitmap(table_root, winner.deletion_vector, winner.num_records)
    if not state.base_rows.issubset(winner_rows):
        raise ConcurrentDeleteReadError(
            f"a concurrent commit at {winner_description} re-added file {path} with a deletion vector that "
            f"no longer hides {len(state.base_rows - winner_rows)} row(s) this transaction saw as deleted; "
            "retry the operation"
        )
    gone = state.kept & winner_rows
    if gone:
        raise ConcurrentDeleteReadError(
            f"a concurrent commit at {winner_description} deleted or updated {len(gone)} row(s) of file {path} "
            f"that matched this MERGE's source without being changed by it (first row index {gone.min()}); "
            "without them its source rows may match nothing and be inserted; retry the operation"
        )
    if state.ours is not None:
        same = state.ours & winner_rows
        if same:
            raise ConcurrentDeleteDeleteError(
                f"a concurrent commit at {winner_description} deleted or updated {len(same)} row(s) of file {path} "
                f"that this transaction also changes (first row index {same.min()}); retry the operation"
            )
        state.dirty = True
    state.base = winner
    state.base_rows = winner_rows


def write_rebased(table_root: str, state: FileRows, resolution: RowLevelResolution, now_ms: int) -> Rebased:
    """Our remove + re-add against ``state.base``: the DV is the union, encoded once per attempt."""
    assert state.base is not None and state.ours is not None
    base = state.base
    union = state.base_rows | state.ours
    remove = base.to_remove(now_ms)
    state.dirty = False
    state.rebased = True
    if base.num_records is not None and len(union) >= base.num_records:
        state.removed_whole = True
        return Rebased((remove,), None)
    descriptor = encode_deletion_vectors(table_root, [union], resolution.inline_max_bytes, resolution.random_prefix_len)[0]
    if not descriptor.is_inline and resolution.on_dv_file is not None:
        resolution.on_dv_file(absolute_dv_path(table_root, descriptor))
    add = replace(base, deletion_vector=descriptor, stats=stats_for_dv_file(base.stats), data_change=True)
    return Rebased((remove, add), add)


# Delta's names for the counts a rebase changes: DELETE / UPDATE, then MERGE's target side.
_METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "dv_added": ("numDeletionVectorsAdded", "numTargetDeletionVectorsAdded"),
    "dv_updated": ("numDeletionVectorsUpdated", "numTargetDeletionVectorsUpdated"),
    "dv_removed": ("numDeletionVectorsRemoved", "numTargetDeletionVectorsRemoved"),
    "files_removed": ("numRemovedFiles", "numTargetFilesRemoved"),
    "bytes_removed": ("numRemovedBytes", "numTargetBytesRemoved"),
}


def rebased_metrics(metrics: Mapping[str, Any], states: Iterable[FileRows]) -> dict[str, Any]:
    """``metrics`` with the file and DV counts of every rebased path describing the actions
    committed, not the plan: the plan added a DV to a file read without one (or updated the DV it
    had); the rebase always updates the winner's DV, or removes the file when the union covers
    every physical row (then the winner's DV is removed with it)."""
    change: dict[str, int] = dict.fromkeys(_METRIC_NAMES, 0)
    for state in states:
        if not state.rebased:
            continue
        change["dv_updated" if state.read_had_dv else "dv_added"] -= 1
        if state.removed_whole:
            assert state.base is not None
            change["dv_removed"] += 1
            change["files_removed"] += 1
            change["bytes_removed"] += state.base.size
        else:
            change["dv_updated"] += 1
    out = dict(metrics)
    for kind, amount in change.items():
        for name in _METRIC_NAMES[kind]:
            value = out.get(name)
            if amount and isinstance(value, int) and not isinstance(value, bool):
                out[name] = value + amount
    return out
