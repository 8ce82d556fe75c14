"""Pure conflict rules: can a transaction still commit after another one won the race?

Optimistic concurrency in Delta means a loser of the put-if-absent race does not simply fail:
it reads each commit that won in between, and if none of them invalidates what the loser read
or wrote, it retries at the next version. The rules follow Delta Spark's ``ConflictChecker``
under ``WriteSerializable`` (its default) and ``Serializable``:

1. the winner changed the protocol -> :class:`ProtocolChangedError` (stricter than Delta, which
   only fails if both changed it: our validation of DV writes was done against the old protocol);
2. the winner changed the metadata -> :class:`MetadataChangedError`;
3. the winner added data files our read predicate might match (or any file, if we read the whole
   table) -> :class:`ConcurrentAppendError`. Under WriteSerializable, files added by a *blind
   append* are exempt unless we change metadata: the appended rows are simply ordered after us.
   Under SnapshotIsolation (a commit that changes no data, e.g. VACUUM START) no add counts;
   Adds with ``dataChange=false`` (compaction) never count as new data, nor does the re-add of a
   path the same commit removes (a DV update can only hide rows; rule 4 judges it);
4. the winner removed (or re-DV'd, which is a remove of the old (path, DV)) a file we read ->
   :class:`ConcurrentDeleteReadError`;
5. the winner removed a file we also remove -> :class:`ConcurrentDeleteDeleteError`;
6. the winner wrote a ``txn`` for an application id we depend on -> :class:`ConcurrentTransactionError`;
7. the winner wrote a ``domainMetadata`` action for a domain we also write (other than row
   tracking's, which the commit recomputes) -> :class:`ConcurrentTransactionError`, as Delta's
   ``checkIfDomainMetadataConflict`` (e.g. two ALTER TABLE ... CLUSTER BY).

Files are compared by path, not by (path, DV): any change to a physical file we touched is a
conflict, which is conservative and exactly what keeps DVs from being lost (a DV written by the
winner would be silently replaced by ours otherwise).

Row-level concurrency (``TransactionFootprint.row_level``) refines rules 4 and 5 for one kind of
winner change only: a *DV update*, the winner's remove of a path plus its re-add of the same path
with a deletion vector. Such a change can only hide rows of that file, so whether it conflicts is
a question about rows, not files: :func:`check_conflicts` does not raise for it but returns the
path, and :mod:`dvengine.commit.rebase` compares the bitmaps (I/O, so not here). Everything else
a winner does to a file we touched (rewrite, plain remove, a re-add without DV) stays a conflict.

Everything here is a function of action lists, so it is unit-tested without any I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dvengine.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    InvalidArgumentError,
    MetadataChangedError,
    ProtocolChangedError,
)
from dvengine.protocol.actions import Action, AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, Txn

WRITE_SERIALIZABLE = "WriteSerializable"
SERIALIZABLE = "Serializable"
# Delta downgrades a commit that changes no data to SnapshotIsolation (canDowngradeToSnapshotIsolation):
# no winner's add counts as data it should have read. dvengine uses it only for commits without
# reads, where it changes nothing but the logged isolationLevel (VACUUM START / END).
SNAPSHOT_ISOLATION = "SnapshotIsolation"
ISOLATION_LEVELS = (WRITE_SERIALIZABLE, SERIALIZABLE, SNAPSHOT_ISOLATION)

FilePredicate = Callable[[AddFile], bool]


@dataclass(frozen=True, slots=True)
class WinningCommit:
    """The parts of one winning commit that conflict rules look at."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    added: tuple[AddFile, ...]
    removed: tuple[RemoveFile, ...]
    app_ids: frozenset[str]
    is_blind_append: bool
    operation: str | None
    dv_updates: Mapping[str, AddFile] = field(default_factory=dict)  # path -> its re-add with a DV
    tags: Mapping[str, str] = field(default_factory=dict)  # commitInfo.tags
    domains: frozenset[str] = frozenset()  # domains of its domainMetadata actions

    @classmethod
    def from_actions(cls, version: int, actions: Iterable[Action]) -> WinningCommit:
        protocol: Protocol | None = None
        metadata: Metadata | None = None
        added: list[AddFile] = []
        removed: list[RemoveFile] = []
        app_ids: set[str] = set()
        domains: set[str] = set()
        info: CommitInfo | None = None
        for action in actions:
            if isinstance(action, AddFile):
                added.append(action)
            elif isinstance(action, RemoveFile):
                removed.append(action)
            elif isinstance(action, Protocol):
                protocol = action
            elif isinstance(action, Metadata):
                metadata = action
            elif isinstance(action, Txn):
                app_ids.add(action.app_id)
            elif isinstance(action, DomainMetadata):
                domains.add(action.domain)
            elif isinstance(action, CommitInfo):
                info = action
        removed_paths = {r.path for r in removed}
        tags = None if info is None else info.values.get("tags")
        return cls(
            version=version,
            protocol=protocol,
            metadata=metadata,
            added=tuple(added),
            removed=tuple(removed),
            app_ids=frozenset(app_ids),
            is_blind_append=info is not None and info.is_blind_append,
            operation=None if info is None else info.operation,
            dv_updates={a.path: a for a in added if a.deletion_vector is not None and a.path in removed_paths},
            tags={str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {},
            domains=frozenset(domains),
        )

    def describe(self) -> str:
        return f"version {self.version}" + ("" if self.operation is None else f" ({self.operation})")


@dataclass(slots=True)
class TransactionFootprint:
    """What the losing transaction read and wrote: the input of the conflict rules.

    ``read_predicates`` holds one entry per recorded read; ``None`` in it means the whole table
    was read. An empty list means nothing was read (a blind append).

    ``row_level`` says the command's outcome depends only on the rows it retires and the kept rows
    it reported (DELETE, UPDATE, a MERGE that reports its kept rows or retires every matched row),
    so a winner's DV update of a file it touched is judged row by row. ``read_files`` and
    ``dv_changes`` (path -> our re-add with the new DV) are what that judgement needs.
    """

    read_paths: set[str] = field(default_factory=set)
    read_files: dict[str, AddFile] = field(default_factory=dict)
    dv_changes: dict[str, AddFile] = field(default_factory=dict)
    row_level: bool = False
    read_predicates: list[FilePredicate | None] = field(default_factory=list)
    removed_paths: set[str] = field(default_factory=set)
    app_ids: set[str] = field(default_factory=set)
    domains: set[str] = field(default_factory=set)  # domains this transaction writes (rule 7)
    changes_metadata: bool = False
    isolation_level: str = WRITE_SERIALIZABLE

    @property
    def read_whole_table(self) -> bool:
        return any(p is None for p in self.read_predicates)


def check_isolation_level(level: str) -> str:
    if level not in ISOLATION_LEVELS:
        raise InvalidArgumentError(f"isolation level must be one of {ISOLATION_LEVELS}, got {level!r}")
    return level


def _files_that_count_as_new_data(winner: WinningCommit, mine: TransactionFootprint) -> Sequence[AddFile]:
    # An add whose path the same commit also removes is a DV update of an existing file: it can
    # only hide rows, never bring new ones, so it is judged by the delete rules, not as an append.
    rewritten = {r.path for r in winner.removed}
    data_adds = [a for a in winner.added if a.data_change and a.path not in rewritten]
    if mine.isolation_level == SNAPSHOT_ISOLATION:  # Delta's ConflictChecker: Seq.empty
        return ()
    if winner.is_blind_append and mine.isolation_level == WRITE_SERIALIZABLE and not mine.changes_metadata:
        return ()
    return data_adds


def check_protocol(winner: WinningCommit) -> None:
    if winner.protocol is not None:
        raise ProtocolChangedError(
            f"a concurrent commit at {winner.describe()} changed the table protocol to {winner.protocol.to_json()}; "
            "re-read the table and retry the operation"
        )


def check_metadata(winner: WinningCommit) -> None:
    if winner.metadata is not None:
        raise MetadataChangedError(
            f"a concurrent commit at {winner.describe()} changed the table metadata (schema, partitioning or "
            "properties); re-read the table and retry the operation"
        )


def check_appends(winner: WinningCommit, mine: TransactionFootprint) -> None:
    if not mine.read_predicates:
        return
    candidates = _files_that_count_as_new_data(winner, mine)
    if not candidates:
        return
    if mine.read_whole_table:
        raise ConcurrentAppendError(
            f"a concurrent commit at {winner.describe()} added {len(candidates)} file(s) (first: {candidates[0].path}) "
            "to a table this transaction read in full; retry the operation"
        )
    for add in candidates:
        for predicate in mine.read_predicates:
            if predicate is not None and predicate(add):
                raise ConcurrentAppendError(
                    f"a concurrent commit at {winner.describe()} added file {add.path} whose rows may match "
                    "the predicate this transaction read with; retry the operation"
                )


def row_level_paths(winner: WinningCommit, mine: TransactionFootprint) -> list[str]:
    """Paths the winner DV-updated that we read or DV-changed and whose conflict is decided per
    row (by :mod:`dvengine.commit.rebase`). A path we rewrite or remove whole is not among them:
    our copy of its rows would resurrect what the winner deleted, a file-level conflict."""
    if not mine.row_level:
        return []
    out = []
    for path in winner.dv_updates:
        if path in mine.removed_paths and path not in mine.dv_changes:
            continue
        if path in mine.read_paths or path in mine.dv_changes:
            out.append(path)
    return sorted(out)


def check_deleted_read_files(winner: WinningCommit, mine: TransactionFootprint, row_level: Iterable[str] = ()) -> None:
    exempt = set(row_level)
    for remove in winner.removed:
        if remove.path in mine.read_paths and remove.path not in exempt:
            raise ConcurrentDeleteReadError(
                f"a concurrent commit at {winner.describe()} removed or changed the deletion vector of file "
                f"{remove.path}, which this transaction read; retry the operation"
            )


def check_deleted_deleted_files(winner: WinningCommit, mine: TransactionFootprint, row_level: Iterable[str] = ()) -> None:
    exempt = set(row_level)
    for remove in winner.removed:
        if remove.path in mine.removed_paths and remove.path not in exempt:
            raise ConcurrentDeleteDeleteError(
                f"a concurrent commit at {winner.describe()} removed or changed the deletion vector of file "
                f"{remove.path}, which this transaction also removes; retry the operation"
            )


def check_app_transactions(winner: WinningCommit, mine: TransactionFootprint) -> None:
    clash = sorted(winner.app_ids & mine.app_ids)
    if clash:
        raise ConcurrentTransactionError(
            f"a concurrent commit at {winner.describe()} recorded application transaction(s) {clash} that this "
            "transaction also depends on; re-read the application's watermark before retrying"
        )


# Row tracking's high-water mark is recomputed over the winners at commit (Delta merges it too).
_MERGED_DOMAINS = frozenset({"delta.rowTracking"})


def check_domains(winner: WinningCommit, mine: TransactionFootprint) -> None:
    clash = sorted((winner.domains & mine.domains) - _MERGED_DOMAINS)
    if clash:
        raise ConcurrentTransactionError(
            f"a concurrent commit at {winner.describe()} wrote metadata domain(s) {clash} that this transaction "
            "also writes (Delta: 'A conflicting metadata domain ... is added'); retry on the new version"
        )


def check_conflicts(winner: WinningCommit, mine: TransactionFootprint, adopts_row_tracking: bool = False) -> list[str]:
    """Raise the first conflict between ``winner`` and ``mine``, in Delta's order.

    ``adopts_row_tracking``: the winner's protocol / metadata change only turned row tracking on
    and the caller takes it over (:mod:`dvengine.commit.row_tracking_conflicts`), so rules 1-2 do
    not apply to it. Returns the paths whose conflict must still be decided row by row (empty
    unless ``mine.row_level``): the caller loads their DVs and rebases or raises.
    """
    if not adopts_row_tracking:
        check_protocol(winner)
        check_metadata(winner)
    check_appends(winner, mine)
    row_level = row_level_paths(winner, mine)
    check_deleted_read_files(winner, mine, row_level)
    check_deleted_deleted_files(winner, mine, row_level)
    check_app_transactions(winner, mine)
    check_domains(winner, mine)
    return row_level
