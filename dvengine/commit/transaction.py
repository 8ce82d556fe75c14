"""Optimistic transactions: turn a set of actions into the next commit of a Delta table.

A transaction is opened against a snapshot (the version it read), collects what it read and the
actions it wants to commit, validates them, and writes ``_delta_log/<version>.json`` with
put-if-absent. Losing the race is normal: the winners' commits are read and checked with the
pure rules of :mod:`dvengine.commit.conflicts`; if none conflicts, the same actions are retried
at the next free version. With row-level resolution on (:meth:`Transaction.enable_row_level`),
a winner's DV update of a file this transaction also DV-changes is rebased instead
(:mod:`dvengine.commit.rebase`): the retried actions carry the union of both DVs. The table is
never left half-written: either one complete commit file appears, or nothing does and a typed
error says why.

A lost race is made cheap (spec_notes/isolation-and-concurrency.md, "Cost of a lost race"):
dvengine writers on one host take turns at the commit step (:mod:`dvengine.commit.commit_lock`),
so losers stop paying an fsync for commits that cannot land. On a local table the turn covers
only "read the tail, rebase, link": the commit is caught up with the log and written and synced
under a private temp name before the turn, re-staged inside it only when a winner landed while
this writer waited (and staged only inside it when the turn was already taken on arrival: the
holder's commit would make an early stage stale), and the ``_delta_log`` folder is synced after
the turn, before the caller is told (spec_notes/crash-safety.md, "Power loss"). Writers outside a turn (object stores, a lock
that timed out) back off briefly with full jitter *before* reading the winners, never between
their rebase and their next put-if-absent.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap64

from dvengine.commit import in_commit_timestamps, row_tracking_conflicts
from dvengine.commit.commit_info import CONF_USER_METADATA, ParameterValue, build_commit_info, checked_parameters
from dvengine.commit.commit_lock import commit_turn, turn_taken
from dvengine.commit.conf import ConfLookup, conf_bool, env_key, no_conf
from dvengine.commit.conflicts import (
    FilePredicate,
    TransactionFootprint,
    WinningCommit,
    check_conflicts,
    check_isolation_level,
)
from dvengine.commit.rebase import (
    FileRows,
    RowLevelResolution,
    apply_dv_update,
    file_rows,
    rebased_metrics,
    write_rebased,
)
from dvengine.commit.snapshot_view import SnapshotView
from dvengine.commit.validation import check_change_data_columns, validate_commit
from dvengine.dv.descriptor import absolute_dv_path
from dvengine.errors import (
    CommitError,
    InvalidArgumentError,
    MaxCommitAttemptsExceededError,
    NestedNotNullConstraintError,
    ProtocolChangedError,
    StorageWriteError,
    TableAlreadyExistsError,
)
from dvengine.log.background_checkpoints import hand_over
from dvengine.log.checkpoint_writer import due_checkpoint
from dvengine.log.commit_file import parse_actions
from dvengine.log.filenames import commit_file_name
from dvengine.log.loader import advance_by_commit, read_commit_actions
from dvengine.log.snapshot_cache import forget as forget_snapshot
from dvengine.log.snapshot_cache import known_commit, note_blind_loss, note_own_commit, note_read_commit
from dvengine.protocol import row_tracking
from dvengine.protocol.actions import (
    STORAGE_UUID,
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    action_to_line,
)
from dvengine.protocol.features import check_writable, writer_features
from dvengine.protocol.nested_not_null import CONF_ALLOW_UNENFORCED_NOT_NULL, remove_unenforceable_not_nulls
from dvengine.protocol.schema import parse_schema
from dvengine.storage import pending
from dvengine.storage.base import FileInfo, StagedCommits, TaggedReads
from dvengine.storage.batch import read_many_tagged
from dvengine.storage.logstore import FileAlreadyExists, LogStore, log_dir, normalize_table_path, resolve_data_path
from dvengine.storage.registry import storage_for
from dvengine.storage.uris import is_object_uri, join

_LOG = logging.getLogger(__name__)

# Backoff after a lost race: "full jitter" (a uniform draw from [0, bound]) with a bound that
# doubles from _BACKOFF_BASE_S up to _BACKOFF_CAP_S. A winner's commit takes a few ms to land
# (one fsync), so the cap is a few commits long, not seconds: a long sleep only idles a CPU while
# fresher writers take the versions (measured: 200 ms caps made 8 writers spend most of their
# time asleep). The jitter keeps the losers of one version from racing for the next in lock
# step. The first retry does not wait: the loser has just read up to the newest version.
_BACKOFF_BASE_S = 0.001
_BACKOFF_CAP_S = 0.016
_ATTEMPTS_WITHOUT_BACKOFF = 1


class StaleSnapshotError(CommitError):
    """A blind commit (Transaction.blind) found its version taken: nothing was committed.

    Not a conflict to resolve: the winner may have committed before the command started, and a
    command must see every commit that finished before it started (a rebase would not, e.g. a
    winner's blind append of rows the command's condition matches). The command re-plans on a
    listed snapshot instead (commands.replan); callers never see this error.
    """


def backoff_seconds(lost_races: int) -> float:
    """How long to wait before the retry that follows the ``lost_races``-th lost race."""
    if lost_races <= _ATTEMPTS_WITHOUT_BACKOFF:
        return 0.0
    bound = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (lost_races - _ATTEMPTS_WITHOUT_BACKOFF - 1))
    return random.uniform(0.0, bound)


# A loser builds the name of every winner it reads (~7 per op at 8 writers); normalizing the table
# URI each time cost ~1.5 us of the ~2 us per name.
_log_dir_of = functools.lru_cache(maxsize=256)(log_dir)


def commit_file_path(table_root: str, version: int) -> str:
    return join(_log_dir_of(table_root), commit_file_name(version))


def read_commit(store: LogStore, table_root: str, version: int) -> list[Action]:
    """Actions of one commit file, read through the transaction's own store (the loser of a race
    must read the winner through the same store it commits with)."""
    return read_commit_actions(table_root, version, store)


@functools.lru_cache(maxsize=16)
def _reads_tagged(store_type: type) -> bool:
    """Does this store class return e-tags with its reads? (Once per class: a runtime protocol
    check costs microseconds, and a local loser pays it for every winner it reads.)"""
    return issubclass(store_type, TaggedReads)


def _read_commit_if_exists(store: LogStore, table_root: str, version: int) -> list[Action] | None:
    """The winner at ``version``, or None when nobody committed it: one GET on a store (a HEAD first
    would add a sequential round trip to every lost race)."""
    path = commit_file_path(table_root, version)
    try:
        if _reads_tagged(type(store)):
            assert isinstance(store, TaggedReads)
            data, e_tag = store.read_bytes_tagged(path)
            note_read_commit(table_root, version, e_tag, data)  # the next listed load need not GET it again
        else:
            data = store.read_bytes(path)
    except FileNotFoundError:
        return None
    return parse_actions(data, path)


@dataclass(frozen=True, slots=True)
class _Staged:
    """A commit written and synced under a private temp name, ready to be linked at ``version``."""

    version: int
    data: bytes
    path: str


def _now_ms() -> int:
    return int(time.time() * 1000)


class Transaction:
    """One optimistic write to a table: record reads, add actions, then :meth:`commit` once."""

    def __init__(
        self,
        table_root: str,
        read_snapshot: SnapshotView | None,
        operation: str,
        operation_parameters: Mapping[str, ParameterValue],
        store: LogStore | None = None,
        isolation_level: str = "WriteSerializable",
        max_attempts: int = 10,
        conf: ConfLookup | None = None,
    ) -> None:
        """``conf``: where the commit's own confs are read (the session's conf, when the command
        has one; None: dvengine's configuration, :func:`dvengine.commit.conf.no_conf`)."""
        if max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be >= 1, got {max_attempts}")
        self.table_root = normalize_table_path(table_root)
        self.read_snapshot = read_snapshot
        self.operation = operation
        self.operation_parameters = checked_parameters(operation_parameters)  # a list or map is refused here
        self.store: LogStore = store if store is not None else storage_for(self.table_root)
        self._is_local: bool = getattr(self.store, "is_local", True)
        self.isolation_level = check_isolation_level(isolation_level)
        self.max_attempts = max_attempts
        self.conf: ConfLookup = conf if conf is not None else no_conf
        self.txn_id = str(uuid.uuid4())
        self._actions: list[Action] = []
        self._new_metadata: Metadata | None = None
        self._new_protocol: Protocol | None = None
        self._footprint = TransactionFootprint(isolation_level=self.isolation_level)
        self._committed_version: int | None = None
        self._row_level: RowLevelResolution | None = None
        self.rebased_files = 0  # files whose DV was rebased onto a winner's (row-level resolution)
        self.attempts = 0  # put-if-absent attempts of commit(); > 1 means lost races retried inside
        self._file_rows: dict[str, FileRows] = {}  # row-level state per path, built at the first rebase
        # JSON lines of actions already serialized, by identity (the action is kept alive here, so
        # its id cannot be reused): a retry re-serializes only what changed (the rebased remove +
        # re-add, commitInfo), not the UPDATE's new file with its stats.
        self._lines: dict[int, tuple[Action, str]] = {}
        # The row id high-water mark new row ids start above: the read snapshot's, then each winner's.
        domains = {} if read_snapshot is None else read_snapshot.domain_metadata
        self._row_id_mark = row_tracking.high_water_mark(domains)
        self._table_row_id_mark = self._row_id_mark  # the mark in the log (winners included)
        self.row_id_high_water_mark: int | None = None  # the mark the committed version ended with
        self._kept_rows: dict[str, BitMap64] = {}  # rows kept but depended on (record_kept_rows)
        self.committed_metrics: dict[str, Any] | None = None  # the operationMetrics the commit carries
        self._tags: dict[str, str] = {}  # commitInfo.tags besides the row tracking ones
        # Row tracking enablement (row_tracking_conflicts.py): the backfill this transaction
        # commits (path -> re-add), a winner's enablement taken over, the ids its backfill gave.
        self._backfill: dict[str, AddFile] | None = None
        self._adopted: tuple[Protocol, Metadata] | None = None
        self._backfilled_ids: dict[str, AddFile] = {}
        # The read snapshot is this process's cached one, not listed now (log.blind_snapshot):
        # if its next version is taken, raise StaleSnapshotError instead of rebasing (see there).
        self.blind = False
        # Every winner's commit the catch-up read, in order: they move this process's cached
        # snapshot forward after the commit (loader.advance_by_commit), so no load parses them again.
        self._winners_read: list[tuple[int, list[Action]]] = []
        # commitInfo.userMetadata: the operation's own (the userMetadata write option), else the
        # session conf read once by commit() (Delta's getUserMetadata); see set_user_metadata.
        self._user_metadata: str | None = None
        self._commit_user_metadata: str | None = None
        # Delta's rearrangeOnly (the dataChange=false write option): see rearrange_only().
        self._rearrange_only = False

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
        for f in files:
            self._footprint.read_paths.add(f.path)
            self._footprint.read_files.setdefault(f.path, f)
        self._footprint.read_predicates.append(might_match)

    def enable_row_level(self, resolution: RowLevelResolution) -> None:
        """Judge a winner's DV update of a file this transaction read or DV-changed by rows.

        Only for commands whose outcome depends on no row of a touched file except the rows they
        retire and the rows they report through :meth:`record_kept_rows` (DELETE, UPDATE, a MERGE
        whose runner reports its kept rows, or one whose every matched row is retired); the caller
        vouches for that. Not with :meth:`rearrange_only`: a rebase re-adds files as data changes.
        """
        self._check_open()
        if self._rearrange_only:
            raise InvalidArgumentError("row-level conflict resolution cannot be enabled on a rearrange-only (dataChange=false) transaction")
        self._row_level = resolution
        self._footprint.row_level = True

    def record_kept_rows(self, path: str, rows: Iterable[int]) -> None:
        """Rows of ``path`` (physical indexes) this command leaves unchanged but whose presence its
        outcome depends on: a MERGE's target rows that matched a source row without taking a
        retiring clause (they keep that source row from being inserted). A winner that deletes
        or updates one of them conflicts (rebase.py); only meaningful with row-level resolution."""
        self._check_open()
        self._kept_rows.setdefault(path, BitMap64()).update(rows)

    def update_metadata(self, metadata: Metadata) -> None:
        """Commit ``metadata`` with this transaction. A schema that differs from the read one is
        checked first for NOT NULL flags no writer can enforce (see :meth:`_enforceable`), and
        metadata with the change data feed on for columns the feed reserves
        (``check_change_data_columns``): raised here, before the caller writes any file, as
        Delta's ``updateMetadata`` does."""
        self._check_open()
        check_change_data_columns(metadata, None if self.read_snapshot is None else self.read_snapshot.metadata)
        self._new_metadata = self._enforceable(metadata)
        self._footprint.changes_metadata = True

    def _enforceable(self, metadata: Metadata) -> Metadata:
        """``metadata`` without NOT NULL nested inside arrays or maps, as every metadata change of
        Delta's ``OptimisticTransaction.updateMetadataInternal`` is: when the schema string differs
        from the read snapshot's (always, for a new table), ``SchemaUtils.
        removeUnenforceableNotNullConstraints`` raises DELTA_NESTED_NOT_NULL_CONSTRAINT, or, with
        ``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled``, drops those flags.
        An unchanged schema is not checked, so tables other engines wrote with such flags stay
        writable by commands that keep the schema (DML, appends, properties)."""
        read = None if self.read_snapshot is None else self.read_snapshot.metadata.schema_string
        if metadata.schema_string == read:
            return metadata
        relaxed, found = remove_unenforceable_not_nulls(parse_schema(metadata.schema_string))
        if not found:
            return metadata
        if conf_bool(self.conf, CONF_ALLOW_UNENFORCED_NOT_NULL, False):
            return dataclasses.replace(metadata, schema_string=relaxed.to_json_string())
        first = found[0]
        raise NestedNotNullConstraintError(
            f"The {first.nest} type of the field {first.parent_name} contains a NOT NULL constraint. Delta does not "
            "support NOT NULL constraints nested within arrays or maps. To suppress this error and silently ignore "
            f"the specified constraints, set {CONF_ALLOW_UNENFORCED_NOT_NULL} = true (without a SparkSession: the "
            f"environment variable {env_key(CONF_ALLOW_UNENFORCED_NOT_NULL)}). Parsed {first.nest} type: "
            f"{json.dumps(first.nested.to_json(), separators=(',', ':'))} (Delta's DELTA_NESTED_NOT_NULL_CONSTRAINT); "
            f"nothing was committed to {self.table_root}"
        )

    def update_protocol(self, protocol: Protocol) -> None:
        self._check_open()
        self._new_protocol = protocol

    def add_actions(self, actions: Iterable[Action]) -> None:
        self._check_open()
        for action in actions:
            if self._rearrange_only:
                action = self._rearranged(action)
            if isinstance(action, (CommitInfo, Protocol, Metadata)):
                raise InvalidArgumentError(
                    f"{type(action).__name__} cannot be added as a plain action: commitInfo is written by commit(); "
                    "use update_protocol()/update_metadata() for protocol and metadata"
                )
            if isinstance(action, RemoveFile):
                self._footprint.removed_paths.add(action.path)
            elif isinstance(action, AddFile) and action.deletion_vector is not None and action.path in self._footprint.removed_paths:
                self._footprint.dv_changes[action.path] = action
            elif isinstance(action, Txn):
                self._footprint.app_ids.add(action.app_id)
            elif isinstance(action, DomainMetadata):
                self._footprint.domains.add(action.domain)
            self._actions.append(action)

    def set_user_metadata(self, text: str | None) -> None:
        """The operation's own ``commitInfo.userMetadata`` (Delta's ``userMetadata`` write option);
        None leaves it to the session conf :data:`CONF_USER_METADATA`, read at :meth:`commit`."""
        self._check_open()
        if text is not None and not isinstance(text, str):
            raise InvalidArgumentError(f"option userMetadata must be a string, got {type(text).__name__}: {text!r}")
        self._user_metadata = text

    def rearrange_only(self) -> None:
        """Commit every add and remove with ``dataChange=false``: Delta's ``rearrangeOnly`` write
        (``WriteIntoDelta``: the data only rearranges rows already in the table, so streaming and
        change data feed readers skip the commit). Call before adding actions; a change data file
        is refused (Delta's DELTA_UNEXPECTED_CHANGE_FILES_FOUND), as is row-level resolution."""
        self._check_open()
        if self._row_level is not None:
            raise InvalidArgumentError("a transaction with row-level conflict resolution cannot be made rearrange-only")
        self._rearrange_only = True
        self._actions = [self._rearranged(a) for a in self._actions]

    def _rearranged(self, action: Action) -> Action:
        if isinstance(action, AddCDCFile):
            raise CommitError(
                f"Change files found in a dataChange = false transaction. Files: {action.path} "
                f"(Delta's DELTA_UNEXPECTED_CHANGE_FILES_FOUND); nothing was committed to {self.table_root}"
            )
        if isinstance(action, (AddFile, RemoveFile)) and action.data_change:
            return dataclasses.replace(action, data_change=False)
        return action

    def set_tag(self, key: str, value: str) -> None:
        """A ``commitInfo.tags`` entry (Delta's commit tags, e.g. ``rowTrackingEnablementOnly``)."""
        self._check_open()
        self._tags[key] = value

    def backfill_row_ids(self, files: Iterable[AddFile]) -> None:
        """Re-add ``files`` (``dataChange=false``) so the commit gives them row ids: the backfill of
        a row tracking enablement. Not a read: a concurrent writer's changes are folded into the
        backfill instead of conflicting with it (row_tracking_conflicts.resolve_backfill)."""
        self._check_open()
        if self._backfill is not None:
            raise InvalidArgumentError("backfill_row_ids() may be called once per transaction")
        self._backfill = {f.path: dataclasses.replace(f, data_change=False) for f in files}
        self._actions.extend(self._backfill.values())

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
        # Read once per commit, as Delta builds commitInfo once per commit (retries reuse it): one
        # conf lookup, a py4j / Connect round trip when the command has a session (none is batched).
        self._commit_user_metadata = self._user_metadata if self._user_metadata is not None else self.conf(CONF_USER_METADATA)

        version = 0 if self.read_version is None else self.read_version + 1
        store = self.store
        if self.read_version is not None and getattr(store, "is_local", False) and isinstance(store, StagedCommits):
            version = self._commit_in_turn(store, version, operation_metrics)
        elif self.read_version is not None and is_object_uri(self.table_root):
            version = self._commit_to_store_in_turn(version, operation_metrics)
        else:
            version = self._put_with_retries(version, operation_metrics, exclusive=False)
        self._committed_version = version
        self._advance_cached_snapshot()
        self._run_post_commit_hooks(version)
        return version

    def _advance_cached_snapshot(self) -> None:
        """Move the process's cached snapshot to the committed version by what this transaction
        has read and written (loader.advance_by_commit). The commit stands whatever happens here,
        so a failure drops the cache entry (the next load lists) and warns instead of raising."""
        if self.read_version is None:
            return
        try:
            advance_by_commit(self.table_root, self.read_version, self._winners_read, self.store)
        except Exception:
            forget_snapshot(self.table_root)
            _LOG.warning("commit of %s succeeded but moving the cached snapshot failed", self.table_root, exc_info=True)

    def _commit_in_turn(self, store: StagedCommits, version: int, operation_metrics: Mapping[str, Any] | None) -> int:
        """Commit to a local table, holding the host-local commit turn only to list the tail,
        rebase and link (spec_notes/isolation-and-concurrency.md, "The commit turn").

        Before the turn: catch up with the winners already in the log (conflict checks and the
        rebase, in memory), serialize, write and fsync the commit under a private temp name. In
        the turn: link it; only if a winner landed meanwhile, read it, rebase, re-stage (one more
        fsync) and link, as before. After the turn: fsync ``_delta_log`` so the caller is told of
        a commit whose name is durable (spec_notes/crash-safety.md, "Power loss").
        """
        log = log_dir(self.table_root)
        if self.blind and self.store.exists(commit_file_path(self.table_root, version)):
            self._stale(version)
        caught_up = self._catch_up(version)
        # A stale read snapshot counts as one lost race, as if the commit had been tried at the
        # read version + 1 first (max_attempts and numCommitAttempts keep their meaning).
        lost = 1 if caught_up != version else 0
        self._give_up_after(lost, version)
        version = caught_up
        if not self.blind and turn_taken(log):
            # Another writer is linking the next version: a commit staged now would be stale.
            version = self._commit_staged_in_turn(log, version, operation_metrics, lost)
        else:
            data = self._serialize(self._is_blind_append(), operation_metrics, version)
            staged = _Staged(version, data, store.stage_commit(commit_file_path(self.table_root, version), data))
            try:
                with commit_turn(log) as exclusive:
                    version = self._put_with_retries(version, operation_metrics, exclusive, staged, lost)
            finally:
                store.discard_staged(staged.path)
        try:
            store.sync_dir(log)
        except (StorageWriteError, OSError):  # LocalStorage's typed error, or a store's own OSError
            # The commit is linked and visible: failing the command now would have its caller
            # delete files the table references. Only its survival of a power loss is in doubt.
            _LOG.warning("commit %d of %s is linked but fsync of %s failed", version, self.table_root, log, exc_info=True)
        return version

    def _commit_to_store_in_turn(self, version: int, operation_metrics: Mapping[str, Any] | None) -> int:
        """Commit to a table on an object store, taking turns with this host's other dvengine
        writers of the table (spec_notes/isolation-and-concurrency.md, "The turn on an object
        store"). The conditional PUT still decides every race; the turn only stops writers on one
        host from racing each other for one version, where all but one PUT would be refused and
        each loser would then read the winner and back off. A writer that had to wait for the
        turn knows a commit landed meanwhile, so it reads the winners first and PUTs once (a
        stale PUT would cost a refused round trip); one that found the turn free PUTs at once.
        Blind commits never rebase, so they always PUT first (and re-plan if refused)."""
        log = log_dir(self.table_root)
        waited = turn_taken(log)
        with commit_turn(log) as exclusive:
            lost = 0
            if waited and exclusive and not self.blind:
                caught_up = self._catch_up(version)
                if caught_up != version:
                    lost = 1  # a stale read snapshot counts as one lost race, as on a local table
                    self._give_up_after(lost, version)
                version = caught_up
            return self._put_with_retries(version, operation_metrics, exclusive, None, lost)

    def _give_up_after(self, lost: int, version: int) -> None:
        """Raise MaxCommitAttemptsExceededError once ``lost`` races reach ``max_attempts``."""
        if lost >= self.max_attempts:
            self.attempts = lost
            raise MaxCommitAttemptsExceededError(
                f"gave up committing {self.operation} to {self.table_root} after {lost} attempt(s): "
                f"concurrent writers took version {version} (max_attempts={self.max_attempts})"
            )

    def _commit_staged_in_turn(self, log: str, version: int, operation_metrics: Mapping[str, Any] | None, lost: int) -> int:
        """Wait for the turn, then catch up, stage and link in it (the turn was taken when we came:
        its holder's commit makes anything staged before the turn stale). Winners that landed
        while we waited count as one more lost race, as a stale staged commit would. The lines of
        actions no winner can change are serialized before the wait, so the turn only serializes
        what the catch-up rebased (and commitInfo)."""
        if not self._tracks_rows():  # with row ids, every attempt's new files are new objects
            self._action_lines(self._actions)
        with commit_turn(log) as exclusive:
            caught_up = self._catch_up(version)
            if caught_up != version:
                lost += 1
                self._give_up_after(lost, version)
            return self._put_with_retries(caught_up, operation_metrics, exclusive, None, lost)

    def _stale(self, version: int) -> None:
        """A blind commit (see ``blind``) found ``version`` taken: never rebase, re-plan."""
        note_blind_loss(self.table_root, time.monotonic())
        raise StaleSnapshotError(
            f"{self.operation} planned on a cached snapshot of {self.table_root} (version "
            f"{self.read_version}), and version {version} was committed by another writer since; "
            "nothing was committed: re-plan on a listed snapshot"
        ) from None

    def _catch_up(self, version: int) -> int:
        """Check (and rebase onto) every commit from ``version`` on; return the next free version."""
        version = self._check_winners_from(version)
        if self._file_rows:
            self._write_rebased()
        return version

    def _put_with_retries(
        self,
        version: int,
        operation_metrics: Mapping[str, Any] | None,
        exclusive: bool,
        staged: _Staged | None = None,
        lost_before: int = 0,
    ) -> int:
        """Put the commit at ``version`` or, past non-conflicting winners, at the next free one.

        ``exclusive``: this process holds the table's host-local commit turn (commit_lock.py), so
        only writers outside it (other hosts, other engines) can take a version meanwhile; no
        backoff then, as sleeping would only keep the other local writers waiting. ``staged``:
        the first attempt's commit, already written and synced (:meth:`_commit_in_turn`), after
        ``lost_before`` races it lost by catching up before the turn.
        """
        is_blind_append = self._is_blind_append()
        attempt = lost_before
        while True:
            attempt += 1
            self.attempts = attempt
            target = commit_file_path(self.table_root, version)
            try:
                sent_at = time.monotonic()
                if staged is not None and attempt == lost_before + 1:
                    data = staged.data
                    assert isinstance(self.store, StagedCommits) and staged.version == version
                    self._wait_for_named_files()
                    self.store.link_staged(staged.path, target)
                    e_tag = None
                else:
                    data = self._serialize(is_blind_append, operation_metrics, version)
                    if self._row_level is not None and self._is_local and self.store.exists(target):
                        # Lost already: skip writing and syncing a commit file that cannot land
                        # (row-level writers race on one hot file, where this is the common case).
                        # On a store the conditional PUT answers the same question in one round trip.
                        raise FileAlreadyExists(target)
                    self._wait_for_named_files()
                    sent_at = time.monotonic()
                    e_tag = self.store.put_if_absent(target, data)
                note_own_commit(self.table_root, version, e_tag, data, sent_at)
                break
            except FileAlreadyExists:
                if self.blind and attempt == 1:
                    self._stale(version)
                if attempt >= self.max_attempts:
                    raise MaxCommitAttemptsExceededError(
                        f"gave up committing {self.operation} to {self.table_root} after {attempt} attempts: "
                        f"concurrent writers kept taking the next version (last tried {version})"
                    ) from None
                # Wait first, then read the winners: whatever landed while we slept is read too, and
                # nothing separates the rebase (and its DV) from the next put-if-absent.
                pause = 0.0 if exclusive else backoff_seconds(attempt)
                if pause:
                    time.sleep(pause)
                version = self._catch_up(version)
        return version

    def _wait_for_named_files(self) -> None:
        """Block until every file this commit names has landed: a data file's PUT may still be
        under way (storage/pending.py: it was started as soon as its bytes existed, so that this
        commit could be built meanwhile). A failed PUT raises here, typed, before the commit is
        sent: nothing is committed and the caller's clean-up removes the command's files."""
        if not pending.busy():
            return
        paths = []
        for action in self._actions:
            if isinstance(action, (AddFile, AddCDCFile)):
                paths.append(resolve_data_path(self.table_root, action.path))
            dv = action.deletion_vector if isinstance(action, AddFile) else None
            if dv is not None and dv.storage_type == STORAGE_UUID:
                paths.append(absolute_dv_path(self.table_root, dv))
        pending.wait_for(paths)

    def _effective_protocol_and_metadata(self) -> tuple[Protocol, Metadata]:
        snapshot = self.read_snapshot
        base: tuple[Protocol | None, Metadata | None] = (
            self._adopted if self._adopted is not None else (None, None) if snapshot is None else (snapshot.protocol, snapshot.metadata)
        )
        protocol = self._new_protocol if self._new_protocol is not None else base[0]
        metadata = self._new_metadata if self._new_metadata is not None else base[1]
        if protocol is None or metadata is None:
            raise InvalidArgumentError(
                "a transaction that creates a table (no read snapshot) must set both protocol and metadata "
                "with update_protocol() and update_metadata()"
            )
        return protocol, metadata

    def _is_blind_append(self) -> bool:
        """Delta's definition: nothing read, nothing removed, only adds. dvengine's own commits
        that re-add files unread (a row id backfill, with ``dataChange=false``) are not blind
        appends (Delta's backfill records the files it reads); a rearrange-only append is one, as
        in Delta (``OptimisticTransaction``: ``onlyAddFiles && !dependsOnFiles``)."""
        if self._footprint.read_predicates or self._footprint.read_paths:
            return False
        adds = [a for a in self._actions if isinstance(a, AddFile)]
        if any(isinstance(a, (RemoveFile, AddCDCFile)) for a in self._actions):
            return False
        return self._rearrange_only or all(a.data_change for a in adds)

    def _serialize(self, is_blind_append: bool, operation_metrics: Mapping[str, Any] | None, version: int) -> bytes:
        timestamp, new_metadata = self._in_commit_timestamp(version)
        if operation_metrics is not None and self.rebased_files:
            operation_metrics = rebased_metrics(operation_metrics, self._file_rows.values())
        self.committed_metrics = None if operation_metrics is None else dict(operation_metrics)
        info = build_commit_info(
            timestamp_ms=timestamp if timestamp is not None else _now_ms(),
            operation=self.operation,
            operation_parameters=self.operation_parameters,
            read_version=self.read_version,
            isolation_level=self.isolation_level,
            is_blind_append=is_blind_append,
            operation_metrics=operation_metrics,
            txn_id=self.txn_id,
            tags=self._commit_tags(),
            user_metadata=self._commit_user_metadata,
        )
        if timestamp is not None:
            info = CommitInfo({"inCommitTimestamp": timestamp, **info.values})
        ordered: list[Action] = [info]
        if self._new_protocol is not None:
            ordered.append(self._new_protocol)
        if new_metadata is not None:
            ordered.append(new_metadata)
        lines = [action_to_line(a) for a in ordered]
        lines.extend(self._action_lines(self._with_row_ids(version)))
        return ("\n".join(lines) + "\n").encode("utf-8")

    def _action_lines(self, actions: Iterable[Action]) -> list[str]:
        """The JSON line of each action, from :attr:`_lines` when this very object was serialized
        by an earlier attempt (actions are frozen); only lines still in use are kept."""
        kept: dict[int, tuple[Action, str]] = {}
        out = []
        for action in actions:
            found = self._lines.get(id(action))
            line = found[1] if found is not None and found[0] is action else action_to_line(action)
            kept[id(action)] = (action, line)
            out.append(line)
        self._lines = kept
        return out

    def _commit_tags(self) -> dict[str, str]:
        """Our tags plus Delta's ``delta.rowTracking.preserved``: "false" when we took over a
        concurrent enablement (we carried no stable ids), else what the command on the read
        snapshot earns (row_tracking.preserved_tags)."""
        tags = dict(self._tags)
        if self._adopted is not None and row_tracking.enabled(self._adopted[1].configuration):
            tags[row_tracking.PRESERVED_TAG] = "false"
        elif row_tracking.PRESERVED_TAG not in tags:
            read = None if self.read_snapshot is None else self.read_snapshot.metadata.configuration
            tags.update(row_tracking.preserved_tags(self.operation, read))
        return tags

    def _with_row_ids(self, version: int) -> list[Action]:
        """Our actions with fresh row ids above the newest mark, when the table tracks rows.

        Recomputed for every attempt from the actions as the command built them (new files
        without ``baseRowId``), so a lost race re-assigns against the winner's mark, as Delta's
        conflict checker does; re-added files keep what their last ``add`` had.
        """
        if not self._tracks_rows():
            self.row_id_high_water_mark = None
            return list(self._actions)
        actions, self.row_id_high_water_mark = row_tracking.assign_fresh(
            row_tracking_conflicts.with_backfilled_ids(self._actions, self._backfilled_ids),
            self._row_id_mark, version, self._table_row_id_mark,
        )
        return actions

    def _tracks_rows(self) -> bool:
        protocol, metadata = self._effective_protocol_and_metadata()
        return row_tracking.supported(writer_features(protocol), metadata.configuration)

    def reserve_row_ids(self, mark: int) -> None:
        """Start fresh row ids above ``mark`` and record it (a CLONE carries its source's files
        with their ``baseRowId``: the clone's own new ids must not repeat them)."""
        self._check_open()
        self._row_id_mark = max(self._row_id_mark, mark)

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

    def _winners_from(self, version: int) -> Iterator[tuple[int, list[Action]]]:
        """The commits from ``version`` on, in order, as (version, actions).

        On an object store one LIST of the log from ``version`` finds them all and they are read
        in parallel (with their e-tags, so the next listed load reads none of them again): the
        catch-up costs two round trips in sequence however many winners landed, where reading
        ``<v>.json``, ``<v+1>.json``, ... until one is missing cost one per winner plus the
        missing one, all inside the commit turn. A commit that lands after the LIST makes the
        next PUT fail, and the catch-up runs again from there. Elsewhere the files are read one
        by one until one does not exist (a local read costs microseconds), and so they are on a
        store whose listing does not show ``version`` (none landed; or a listing that lags the
        PUT that refused ours, where trusting it would retry the same version in a tight loop)."""
        if _reads_tagged(type(self.store)):
            listed = self._listed_winners_from(version)
            yield from listed
            version += len(listed)
            if listed:
                return
        while (actions := _read_commit_if_exists(self.store, self.table_root, version)) is not None:
            yield version, actions
            version += 1

    def _listed_winners_from(self, version: int) -> list[tuple[int, list[Action]]]:
        """The commits from ``version`` on that one LIST of the log shows, read in parallel."""
        assert isinstance(self.store, TaggedReads)
        listed = {
            name: info
            for info in self.store.list_dir_after(log_dir(self.table_root), f"{version:020d}")
            if (name := info.path.rsplit("/", 1)[-1]).endswith(".json")
        }
        run: list[tuple[int, FileInfo]] = []
        while (info := listed.get(commit_file_name(version + len(run)))) is not None:
            run.append((version + len(run), info))  # put-if-absent commits are contiguous: a gap ends them
        known = [known_commit(self.table_root, v, info.e_tag) for v, info in run]
        missing = [info.path for (_, info), data in zip(run, known, strict=True) if data is None]
        fetched = dict(zip(missing, read_many_tagged(self.store, missing), strict=True))
        out = []
        for (v, info), data in zip(run, known, strict=True):
            if data is None:
                data, e_tag = fetched[info.path]
                note_read_commit(self.table_root, v, e_tag, data)
            out.append((v, parse_actions(data, info.path)))
        return out

    def _check_winners_from(self, version: int) -> int:
        """Check every commit from ``version`` on against this transaction; return the next free version."""
        next_free = version
        for winner_version, actions in self._winners_from(version):
            winner = WinningCommit.from_actions(winner_version, actions)
            self._winners_read.append((winner_version, actions))
            self._advance_row_id_mark(actions)
            if self.read_version is None:
                if winner.metadata is not None and winner_version == 0:
                    raise TableAlreadyExistsError(
                        f"a concurrent writer created the table at {self.table_root} first (its version 0 is "
                        f"{winner.describe()}); nothing was written by this transaction"
                    )
                raise ProtocolChangedError(
                    f"this transaction creates the table at {self.table_root} but version {winner_version} already exists"
                )
            protocol, metadata = self._effective_protocol_and_metadata()
            adopts = row_tracking_conflicts.takes_over(
                winner, protocol, metadata, self._new_protocol is not None, self._new_metadata is not None
            )
            for path in check_conflicts(winner, self._footprint, adopts):
                self._resolve_row_level(winner, path)
            if adopts:
                self._adopt_row_tracking(winner, protocol, metadata)
            elif winner.operation == row_tracking.BACKFILL_OPERATION:  # Delta's own backfill commit
                self._backfilled_ids.update(row_tracking_conflicts.backfilled_ids(winner))
            if self._backfill is not None:
                self._resolve_backfill(winner)
            next_free = winner_version + 1
        return next_free

    def _adopt_row_tracking(self, winner: WinningCommit, protocol: Protocol, metadata: Metadata) -> None:
        """Take over a winner's row tracking support / enablement (row_tracking_conflicts.py)."""
        self._adopted = (
            protocol if winner.protocol is None else winner.protocol,
            metadata if winner.metadata is None else winner.metadata,
        )
        self._backfilled_ids.update(row_tracking_conflicts.backfilled_ids(winner))

    def _resolve_backfill(self, winner: WinningCommit) -> None:
        """Re-judge our backfill after ``winner`` (row_tracking_conflicts.resolve_backfill)."""
        assert self._backfill is not None
        old = self._backfill
        self._backfill = row_tracking_conflicts.resolve_backfill(old, winner)
        kept = [a for a in self._actions if not (isinstance(a, AddFile) and old.get(a.path) is a)]
        self._actions = kept + list(self._backfill.values())

    def _advance_row_id_mark(self, winner_actions: Iterable[Action]) -> None:
        """Start our fresh row ids above the mark a winner committed (its ids are taken)."""
        for action in winner_actions:
            if isinstance(action, DomainMetadata) and action.domain == row_tracking.DOMAIN and not action.removed:
                self._table_row_id_mark = max(self._table_row_id_mark, row_tracking.mark_of(action))
                self._row_id_mark = max(self._row_id_mark, self._table_row_id_mark)

    def _resolve_row_level(self, winner: WinningCommit, path: str) -> None:
        """Move our view of ``path`` onto the winner's DV update, or raise the row conflict; the
        rebased actions are written by :meth:`_write_rebased` once every winner was checked."""
        state = self._file_rows.get(path)
        if state is None:
            state = file_rows(
                self.table_root,
                self._footprint.read_files.get(path),
                self._footprint.dv_changes.get(path),
                self._kept_rows.get(path),
            )
            self._file_rows[path] = state
        apply_dv_update(self.table_root, path, state, winner.dv_updates[path], winner.describe())
        self._footprint.read_files[path] = winner.dv_updates[path]

    def _write_rebased(self) -> None:
        """Replace our remove + re-add of every path a winner DV-updated since the last attempt."""
        assert self._row_level is not None
        for path, state in self._file_rows.items():
            if not state.dirty:
                continue
            rebased = write_rebased(self.table_root, state, self._row_level, _now_ms())
            kept = [a for a in self._actions if not (isinstance(a, (RemoveFile, AddFile)) and a.path == path)]
            self._actions = kept + list(rebased.actions)
            if rebased.new_add is None:
                self._footprint.dv_changes.pop(path, None)
                state.ours = None  # removed whole: a later DV update of it is a file-level conflict
            else:
                self._footprint.dv_changes[path] = rebased.new_add
            self.rebased_files += 1

    def _run_post_commit_hooks(self, version: int) -> None:
        """Checkpoint if the policy says so, off this thread. The commit is durable already, so a failure only warns."""
        try:
            _, metadata = self._effective_protocol_and_metadata()
            due = due_checkpoint(self.table_root, version, configuration=metadata.configuration)
            if due is not None:
                hand_over(due)  # written on a background thread (dvengine.log.background_checkpoints)
        except Exception:
            _LOG.warning("commit %d of %s succeeded but writing its checkpoint failed", version, self.table_root, exc_info=True)

    def _check_open(self) -> None:
        if self._committed_version is not None:
            raise CommitError(f"this transaction already committed version {self._committed_version}; open a new one")
