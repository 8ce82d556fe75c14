"""Optimistic transactions: turn a set of actions into the next commit of a Delta table.

A transaction is opened against a snapshot (the version it read), collects what it read and the
actions it wants to commit, validates them, and writes ``_delta_log/<version>.json`` with
put-if-absent. Losing the race is normal: the winners' commits are read and checked with the
pure rules of :mod:`dvengine.commit.conflicts`; if none conflicts, the same actions are retried
at the next free version. The table is never left half-written: either one complete commit file
appears, or nothing does and a typed error says why.
"""

from __future__ import annotations

import logging
import os
import random
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from dvengine.commit import in_commit_timestamps
from dvengine.commit.commit_info import build_commit_info
from dvengine.commit.conflicts import (
    FilePredicate,
    TransactionFootprint,
    WinningCommit,
    check_conflicts,
    check_isolation_level,
)
from dvengine.commit.snapshot_view import SnapshotView
from dvengine.commit.validation import validate_commit
from dvengine.errors import (
    CommitError,
    InvalidArgumentError,
    MaxCommitAttemptsExceededError,
    ProtocolChangedError,
    TableAlreadyExistsError,
)
from dvengine.log.checkpoint_writer import maybe_checkpoint
from dvengine.log.filenames import commit_file_name
from dvengine.log.loader import read_commit_actions
from dvengine.protocol.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    action_to_line,
)
from dvengine.protocol.features import check_writable
from dvengine.storage.logstore import FileAlreadyExists, LocalLogStore, LogStore, log_dir, normalize_table_path

_LOG = logging.getLogger(__name__)

_BACKOFF_BASE_S = 0.002
_BACKOFF_CAP_S = 0.2


def commit_file_path(table_root: str, version: int) -> str:
    return os.path.join(log_dir(table_root), commit_file_name(version))


def read_commit(store: LogStore, table_root: str, version: int) -> list[Action]:
    """Actions of one commit file, read through the transaction's own store (the loser of a race
    must read the winner through the same store it commits with)."""
    return read_commit_actions(table_root, version, store)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Transaction:
    """One optimistic write to a table: record reads, add actions, then :meth:`commit` once."""

    def __init__(
        self,
        table_root: str,
        read_snapshot: SnapshotView | None,
        operation: str,
        operation_parameters: Mapping[str, Any],
        store: LogStore | None = None,
        isolation_level: str = "WriteSerializable",
        max_attempts: int = 10,
    ) -> None:
        if max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be >= 1, got {max_attempts}")
        self.table_root = normalize_table_path(table_root)
        self.read_snapshot = read_snapshot
        self.operation = operation
        self.operation_parameters = dict(operation_parameters)
        self.store: LogStore = store if store is not None else LocalLogStore()
        self.isolation_level = check_isolation_level(isolation_level)
        self.max_attempts = max_attempts
        self.txn_id = str(uuid.uuid4())
        self._actions: list[Action] = []
        self._new_metadata: Metadata | None = None
        self._new_protocol: Protocol | None = None
        self._footprint = TransactionFootprint(isolation_level=self.isolation_level)
        self._committed_version: int | None = None

    # --- building ---------------------------------------------------------------------------

    @property
    def read_version(self) -> int | None:
        return None if self.read_snapshot is None else self.read_snapshot.version

    @property
    def committed_version(self) -> int | None:
        return self._committed_version

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(self._actions)

    @property
    def new_metadata(self) -> Metadata | None:
        """The metadata this transaction will commit (None: the table's stays)."""
        return self._new_metadata

    def record_read(self, files: Iterable[AddFile], might_match: FilePredicate | None) -> None:
        """Record the files read and the predicate they were selected with (None = whole table).

        A concurrent remove/re-DV of a recorded file, or a concurrent append of a file the
        predicate might match, then makes :meth:`commit` fail instead of silently diverging.
        """
        self._check_open()
        self._footprint.read_paths.update(f.path for f in files)
        self._footprint.read_predicates.append(might_match)

    def update_metadata(self, metadata: Metadata) -> None:
        self._check_open()
        self._new_metadata = metadata
        self._footprint.changes_metadata = True

    def update_protocol(self, protocol: Protocol) -> None:
        self._check_open()
        self._new_protocol = protocol

    def add_actions(self, actions: Iterable[Action]) -> None:
        self._check_open()
        for action in actions:
            if isinstance(action, (CommitInfo, Protocol, Metadata)):
                raise InvalidArgumentError(
                    f"{type(action).__name__} cannot be added as a plain action: commitInfo is written by commit(); "
                    "use update_protocol()/update_metadata() for protocol and metadata"
                )
            if isinstance(action, RemoveFile):
                self._footprint.removed_paths.add(action.path)
            elif isinstance(action, Txn):
                self._footprint.app_ids.add(action.app_id)
            self._actions.append(action)

    def set_app_transaction(self, app_id: str, version: int) -> None:
        """Record an application watermark (idempotent writes); a concurrent one for the same id conflicts."""
        self.add_actions([Txn(app_id=app_id, version=version, last_updated=_now_ms())])

    # --- committing -------------------------------------------------------------------------

    def commit(self, operation_metrics: Mapping[str, Any] | None = None) -> int:
        """Write the commit and return its version, retrying past non-conflicting winners."""
        self._check_open()
        protocol, metadata = self._effective_protocol_and_metadata()
        if self.read_snapshot is not None and self._new_protocol is not None:
            check_writable(self.read_snapshot.protocol, self.read_snapshot.metadata)
        validate_commit(self._actions, protocol, metadata)

        version = 0 if self.read_version is None else self.read_version + 1
        is_blind_append = self._is_blind_append()
        attempt = 0
        while True:
            attempt += 1
            data = self._serialize(is_blind_append, operation_metrics, version)
            try:
                self.store.put_if_absent(commit_file_path(self.table_root, version), data)
                break
            except FileAlreadyExists:
                if attempt >= self.max_attempts:
                    raise MaxCommitAttemptsExceededError(
                        f"gave up committing {self.operation} to {self.table_root} after {attempt} attempts: "
                        f"concurrent writers kept taking the next version (last tried {version})"
                    ) from None
                version = self._check_winners_from(version)
                time.sleep(min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5))
        self._committed_version = version
        self._run_post_commit_hooks(version)
        return version

    def _effective_protocol_and_metadata(self) -> tuple[Protocol, Metadata]:
        snapshot = self.read_snapshot
        protocol = self._new_protocol if self._new_protocol is not None else (None if snapshot is None else snapshot.protocol)
        metadata = self._new_metadata if self._new_metadata is not None else (None if snapshot is None else snapshot.metadata)
        if protocol is None or metadata is None:
            raise InvalidArgumentError(
                "a transaction that creates a table (no read snapshot) must set both protocol and metadata "
                "with update_protocol() and update_metadata()"
            )
        return protocol, metadata

    def _is_blind_append(self) -> bool:
        """Delta's definition: nothing read, nothing removed, only data-changing adds."""
        if self._footprint.read_predicates or self._footprint.read_paths:
            return False
        adds = [a for a in self._actions if isinstance(a, AddFile)]
        if any(isinstance(a, (RemoveFile, AddCDCFile)) for a in self._actions):
            return False
        return all(a.data_change for a in adds)

    def _serialize(self, is_blind_append: bool, operation_metrics: Mapping[str, Any] | None, version: int) -> bytes:
        timestamp, new_metadata = self._in_commit_timestamp(version)
        info = build_commit_info(
            timestamp_ms=timestamp if timestamp is not None else _now_ms(),
            operation=self.operation,
            operation_parameters=self.operation_parameters,
            read_version=self.read_version,
            isolation_level=self.isolation_level,
            is_blind_append=is_blind_append,
            operation_metrics=operation_metrics,
            txn_id=self.txn_id,
        )
        if timestamp is not None:
            info = CommitInfo({"inCommitTimestamp": timestamp, **info.values})
        ordered: list[Action] = [info]
        if self._new_protocol is not None:
            ordered.append(self._new_protocol)
        if new_metadata is not None:
            ordered.append(new_metadata)
        ordered.extend(self._actions)
        return ("\n".join(action_to_line(a) for a in ordered) + "\n").encode("utf-8")

    def _in_commit_timestamp(self, version: int) -> tuple[int | None, Metadata | None]:
        """(inCommitTimestamp or None, the metadata action to write) for a commit landing at ``version``."""
        _, metadata = self._effective_protocol_and_metadata()
        if not in_commit_timestamps.enabled(metadata.configuration):
            return None, self._new_metadata
        timestamp = in_commit_timestamps.next_timestamp(self.store, self.table_root, version, _now_ms())
        if self._new_metadata is None:
            return timestamp, None
        was = self.read_snapshot is not None and in_commit_timestamps.enabled(self.read_snapshot.metadata.configuration)
        return timestamp, in_commit_timestamps.with_enablement(self._new_metadata, was, version, timestamp)

    def _check_winners_from(self, version: int) -> int:
        """Check every commit from ``version`` on against this transaction; return the next free version."""
        while self.store.exists(commit_file_path(self.table_root, version)):
            winner = WinningCommit.from_actions(version, read_commit(self.store, self.table_root, version))
            if self.read_version is None:
                if winner.metadata is not None and version == 0:
                    raise TableAlreadyExistsError(
                        f"a concurrent writer created the table at {self.table_root} first (its version 0 is "
                        f"{winner.describe()}); nothing was written by this transaction"
                    )
                raise ProtocolChangedError(
                    f"this transaction creates the table at {self.table_root} but version {version} already exists"
                )
            check_conflicts(winner, self._footprint)
            version += 1
        return version

    def _run_post_commit_hooks(self, version: int) -> None:
        """Checkpoint if the policy says so. The commit is durable already, so a failure only warns."""
        try:
            _, metadata = self._effective_protocol_and_metadata()
            maybe_checkpoint(self.table_root, version, configuration=metadata.configuration)
        except Exception:
            _LOG.warning("commit %d of %s succeeded but writing its checkpoint failed", version, self.table_root, exc_info=True)

    def _check_open(self) -> None:
        if self._committed_version is not None:
            raise CommitError(f"this transaction already committed version {self._committed_version}; open a new one")
