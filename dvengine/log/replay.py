"""Reconciling actions into table state, keyed by logical file (path, DV unique id).

Rules (PROTOCOL.md "Action Reconciliation"):
- the newest protocol and metaData win; txn is per appId; domainMetadata is per domain and a
  ``removed`` one deletes its domain;
- an ``add`` of (path, dvId) makes that logical file live and clears a tombstone of the same key;
- a ``remove`` of (path, dvId) retires exactly that logical file and becomes a tombstone, kept
  as atomic values (:mod:`dvengine.log.tombstones`: the garbage collector never sees them) in a
  map whose copy costs the changes since its base (:mod:`dvengine.log.tombstone_map`).

Within one commit Delta Spark writes ``remove(path, oldDv)`` and ``add(path, newDv)`` in any
order. Because keys include the DV id those two never collide, so applying a commit's removes
before its adds makes the result independent of line order. A commit that both adds and removes
the *same* key is invalid by the protocol; applying removes first keeps the add (no data loss).
"""

from __future__ import annotations

from collections.abc import Iterable

from dvengine.log.tombstone_map import TombstoneMap
from dvengine.log.tombstones import tombstone_bytes, tombstone_key
from dvengine.protocol.actions import (
    Action,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)

FileKey = tuple[str, str | None]


class ReplayState:
    """Mutable accumulator used only while building a Snapshot (which is immutable)."""

    def __init__(self) -> None:
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.files: dict[FileKey, AddFile] = {}
        # tombstone_key(key) -> tombstone_bytes(remove); copied per cache advance, hence the map
        self.tombstones = TombstoneMap()
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}
        self.last_commit_info: CommitInfo | None = None

    def apply_commit(self, actions: Iterable[Action]) -> None:
        """Apply all actions of one commit (or one checkpoint) as a unit."""
        removes: list[RemoveFile] = []
        adds: list[AddFile] = []
        self.last_commit_info = None
        for action in actions:
            if isinstance(action, AddFile):
                adds.append(action)
            elif isinstance(action, RemoveFile):
                removes.append(action)
            elif isinstance(action, Protocol):
                self.protocol = action
            elif isinstance(action, Metadata):
                self.metadata = action
            elif isinstance(action, Txn):
                self.txns[action.app_id] = action
            elif isinstance(action, DomainMetadata):
                if action.removed:
                    self.domains.pop(action.domain, None)
                else:
                    self.domains[action.domain] = action
            elif isinstance(action, CommitInfo):
                self.last_commit_info = action
            # cdc, checkpointMetadata and sidecar actions carry no table state.
        for remove in removes:
            self.files.pop(remove.key, None)
        if removes:
            self.tombstones.put_all({tombstone_key(r.key): tombstone_bytes(r) for r in removes})
        for add in adds:
            self.files[add.key] = add
        if adds and self.tombstones:
            self.tombstones.discard_all([tombstone_key(a.key) for a in adds])
