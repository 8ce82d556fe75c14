"""Conflict rules between a row tracking enablement (with its backfill) and concurrent writers.

Delta enables row tracking on an existing table in three commits (protocol upgrade, ``ROW
TRACKING BACKFILL``, the property); its ``ConflictChecker`` lets concurrent writers through all
three (``checkProtocolCompatibility``: ``rowTracking`` does not fail concurrent transactions at
upgrade, then ``reassignOverlappingRowIds``; ``resolveRowTrackingBackfillConflicts``;
``attemptToResolveMetadataConflicts`` with the row tracking allow-list and the
``delta.rowTracking.preserved=false`` tag). dvengine enables in one commit (protocol, property and
backfill together, which PROTOCOL.md allows), so the same rules are applied to that one commit:

* **The enablement loses** to a writer W: the backfill is no data change, so nothing W did to the
  data conflicts with it (no append or delete checks; a protocol or metadata change by W still
  does). Its re-adds are re-judged: a path W removed or re-added is dropped from the backfill
  (re-adding our stale copy would resurrect W's deletes, Delta's rule 1), and every file W added
  without ``baseRowId`` / ``defaultRowCommitVersion`` (W read the table before it tracked rows)
  is backfilled instead, as W left it, DV included. Proof sketch: after W the live files are
  (live before W) - (W's removes) + (W's adds); the backfill re-adds exactly the id-less ones of
  those, so when the enablement lands every live file has ids.
* **The enablement wins** against W: W adopts the protocol and the property when the winner
  changed nothing else and W changes neither (:func:`adoptable`); W's new files then get fresh
  ids at serialization (above the winner's mark), W's remove / re-add of a file the winner
  backfilled get the winner's ``baseRowId`` / ``defaultRowCommitVersion`` (a file's ids must not
  change under a DV update; Delta's rule 2), and W is tagged as not preserving row ids (it
  read no stable ids to carry). Anything else the winner changed is the usual typed conflict.
  Delta's own three commits are met the same way: its protocol upgrade and its property commit
  are taken over, and its ``ROW TRACKING BACKFILL`` commit (``dataChange=false`` re-adds, not a
  conflict for anyone) lends its ids to our remove / re-add of the same paths.

Everything here is a function of actions (no I/O), like :mod:`dvengine.commit.conflicts`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dvengine.commit.conflicts import WinningCommit, check_metadata
from dvengine.protocol import row_tracking
from dvengine.protocol.actions import Action, AddFile, Metadata, Protocol, RemoveFile
from dvengine.protocol.features import reader_features, writer_features

_ENABLEMENT_FEATURES = frozenset({row_tracking.FEATURE, row_tracking.DOMAIN_METADATA_FEATURE})


def lacks_ids(add: AddFile) -> bool:
    return add.base_row_id is None or add.default_row_commit_version is None


def _protocol_adds_only_row_tracking(winner: Protocol, ours: Protocol) -> bool:
    """Whether ``winner`` is ``ours`` plus (some of) ``rowTracking`` / ``domainMetadata``."""
    if winner.min_reader_version != ours.min_reader_version or reader_features(winner) != reader_features(ours):
        return False
    theirs, mine = writer_features(winner), writer_features(ours)
    return mine <= theirs and theirs - mine <= _ENABLEMENT_FEATURES


def _metadata_only_enables(winner: Metadata, ours: Metadata) -> bool:
    """Whether ``winner`` is ``ours`` with row tracking turned on and nothing else changed
    (Delta's checkConfigurationChangesForConflicts: no key removed, every added or changed key
    in the row tracking allow-list, the enable set to true)."""
    mine, theirs = dict(ours.configuration), dict(winner.configuration)
    if set(mine) - set(theirs):
        return False
    changed = {k for k in theirs if mine.get(k) != theirs[k]}
    if not changed <= row_tracking.ENABLEMENT_KEYS or not row_tracking.enabled(theirs):
        return False
    return dataclasses.replace(winner, configuration=mine) == ours


def adoptable(winner: WinningCommit, protocol: Protocol, metadata: Metadata, changes_protocol: bool, changes_metadata: bool) -> bool:
    """Whether a transaction on (``protocol``, ``metadata``) may take over the winner's protocol
    and metadata instead of failing: the winner only made the table support and/or enable row
    tracking, and this transaction changes neither itself (Delta raises then, and so do we)."""
    if winner.protocol is None and winner.metadata is None:
        return False
    if winner.protocol is not None and (changes_protocol or not _protocol_adds_only_row_tracking(winner.protocol, protocol)):
        return False
    return winner.metadata is None or (not changes_metadata and _metadata_only_enables(winner.metadata, metadata))


def takes_over(winner: WinningCommit, protocol: Protocol, metadata: Metadata, changes_protocol: bool, changes_metadata: bool) -> bool:
    """:func:`adoptable`, raising Delta's conflict when it is not for the metadata alone: a winner
    whose protocol change we could take but whose metadata we cannot is the
    :class:`MetadataChangedError` Delta raises (its protocol upgrade is a separate commit that
    concurrent writers pass; the property commit is where they fail)."""
    if adoptable(winner, protocol, metadata, changes_protocol, changes_metadata):
        return True
    if (winner.protocol is not None and winner.metadata is not None and not changes_protocol
            and _protocol_adds_only_row_tracking(winner.protocol, protocol)):
        check_metadata(winner)
    return False


def backfilled_ids(winner: WinningCommit) -> dict[str, AddFile]:
    """The winner's adds that carry ids, by path: a loser's remove / re-add of such a path takes them."""
    return {a.path: a for a in winner.added if not lacks_ids(a)}


def with_backfilled_ids(actions: Sequence[Action], ids: Mapping[str, AddFile]) -> list[Action]:
    """``actions`` with the ids of ``ids`` copied onto every remove / add of the same path lacking them."""
    if not ids:
        return list(actions)
    out: list[Action] = []
    for action in actions:
        if isinstance(action, (AddFile, RemoveFile)) and action.base_row_id is None and action.path in ids:
            source = ids[action.path]
            action = dataclasses.replace(
                action, base_row_id=source.base_row_id, default_row_commit_version=source.default_row_commit_version
            )
        out.append(action)
    return out


def resolve_backfill(backfill: Mapping[str, AddFile], winner: WinningCommit) -> dict[str, AddFile]:
    """The backfill after ``winner``: its removed or re-added paths dropped, its id-less adds added
    (``dataChange=false``, as the backfill commits every re-add)."""
    touched = {a.path for a in winner.added} | {r.path for r in winner.removed}
    out = {path: add for path, add in backfill.items() if path not in touched}
    for add in winner.added:
        if lacks_ids(add):
            out[add.path] = dataclasses.replace(add, data_change=False)
    return out
