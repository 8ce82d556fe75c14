"""Conflict rules on hand-built action lists: each rule fires exactly where Delta's would."""

from __future__ import annotations

import pytest

from dvengine.commit.conflicts import (
    SERIALIZABLE,
    TransactionFootprint,
    WinningCommit,
    check_conflicts,
    check_isolation_level,
)
from dvengine.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    InvalidArgumentError,
    MetadataChangedError,
    ProtocolChangedError,
)
from dvengine.protocol.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)


def add(path: str, part: str | None = None, data_change: bool = True, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path, {} if part is None else {"p": part}, 10, 0, data_change, deletion_vector=dv)


def info(blind: bool, op: str = "WRITE") -> CommitInfo:
    return CommitInfo({"operation": op, "isBlindAppend": blind})


def winner(*actions: Action, version: int = 5) -> WinningCommit:
    return WinningCommit.from_actions(version, actions)


DV = DeletionVectorDescriptor("u", "ab" * 10, 30, 2, offset=1)


def test_no_conflict_for_disjoint_changes() -> None:
    mine = TransactionFootprint(read_paths={"a"}, read_predicates=[lambda f: f.partition_values.get("p") == "1"],
                                removed_paths={"a"})
    w = winner(info(False, "DELETE"), add("b", "2", dv=DV), RemoveFile("b"), add("c", "2"))
    check_conflicts(w, mine)  # nothing raised


def test_protocol_change_conflicts_even_for_blind_append() -> None:
    w = winner(info(False), Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)))
    with pytest.raises(ProtocolChangedError, match="version 5"):
        check_conflicts(w, TransactionFootprint())


def test_metadata_change_conflicts() -> None:
    w = winner(info(False), Metadata("id", "{}"))
    with pytest.raises(MetadataChangedError):
        check_conflicts(w, TransactionFootprint())


def test_blind_append_never_conflicts_with_blind_append() -> None:
    check_conflicts(winner(info(True), add("x")), TransactionFootprint())


def test_append_matching_predicate_conflicts_only_when_not_blind_under_write_serializable() -> None:
    mine = TransactionFootprint(read_predicates=[lambda f: f.partition_values.get("p") == "1"])
    # a blind append is ordered after us under WriteSerializable
    check_conflicts(winner(info(True), add("x", "1")), mine)
    # a non-blind write (e.g. an UPDATE rewriting rows) that adds matching data conflicts
    with pytest.raises(ConcurrentAppendError, match="x"):
        check_conflicts(winner(info(False, "UPDATE"), add("x", "1")), mine)
    # non-matching adds do not
    check_conflicts(winner(info(False, "UPDATE"), add("y", "2")), mine)
    # adds without data change (compaction) do not
    check_conflicts(winner(info(False, "OPTIMIZE"), add("z", "1", data_change=False)), mine)


def test_serializable_counts_blind_appends() -> None:
    mine = TransactionFootprint(read_predicates=[lambda f: True], isolation_level=SERIALIZABLE)
    with pytest.raises(ConcurrentAppendError):
        check_conflicts(winner(info(True), add("x", "1")), mine)


def test_metadata_change_of_ours_counts_blind_appends() -> None:
    mine = TransactionFootprint(read_predicates=[None], changes_metadata=True)
    with pytest.raises(ConcurrentAppendError, match="in full"):
        check_conflicts(winner(info(True), add("x")), mine)


def test_whole_table_read_conflicts_with_any_data_add() -> None:
    mine = TransactionFootprint(read_predicates=[None])
    with pytest.raises(ConcurrentAppendError):
        check_conflicts(winner(info(False), add("x", "9")), mine)


def test_no_reads_means_no_append_conflict() -> None:
    check_conflicts(winner(info(False), add("x", "1")), TransactionFootprint())


def test_concurrent_redv_of_read_file_is_delete_read() -> None:
    mine = TransactionFootprint(read_paths={"f1"}, read_predicates=[lambda f: False])
    w = winner(info(False, "DELETE"), RemoveFile("f1"), add("f1", dv=DV))
    with pytest.raises(ConcurrentDeleteReadError, match="f1"):
        check_conflicts(w, mine)


def test_concurrent_remove_of_removed_file_is_delete_delete() -> None:
    mine = TransactionFootprint(removed_paths={"f1"})
    with pytest.raises(ConcurrentDeleteDeleteError, match="f1"):
        check_conflicts(winner(info(False, "DELETE"), RemoveFile("f1", deletion_vector=DV)), mine)


def test_delete_read_is_checked_before_delete_delete() -> None:
    mine = TransactionFootprint(read_paths={"f1"}, removed_paths={"f1"}, read_predicates=[lambda f: False])
    with pytest.raises(ConcurrentDeleteReadError):
        check_conflicts(winner(info(False), RemoveFile("f1")), mine)


def test_same_app_id_conflicts() -> None:
    mine = TransactionFootprint(app_ids={"stream-1"})
    check_conflicts(winner(info(True), Txn("stream-2", 3)), mine)
    with pytest.raises(ConcurrentTransactionError, match="stream-1"):
        check_conflicts(winner(info(True), Txn("stream-1", 3)), mine)


def test_winning_commit_summary() -> None:
    w = winner(info(True, "WRITE"), add("a"), RemoveFile("b"), Txn("app", 1), version=7)
    assert w.is_blind_append and w.operation == "WRITE" and w.version == 7
    assert [a.path for a in w.added] == ["a"] and [r.path for r in w.removed] == ["b"]
    assert w.app_ids == frozenset({"app"}) and w.protocol is None and w.metadata is None


def test_isolation_level_checked() -> None:
    assert check_isolation_level("Serializable") == "Serializable"
    assert check_isolation_level("SnapshotIsolation") == "SnapshotIsolation"
    with pytest.raises(InvalidArgumentError, match="SnapshotIsolation"):
        check_isolation_level("Snapshot")


def test_snapshot_isolation_counts_no_add_as_new_data() -> None:
    """Delta's ConflictChecker: ``case SnapshotIsolation => Seq.empty`` (the isolation level of a commit
    that changes no data, e.g. VACUUM START / END); Serializable counts even a blind append."""
    for w in (winner(info(True), add("f9")), winner(info(False, "MERGE"), add("f9"))):
        check_conflicts(w, TransactionFootprint(read_predicates=[None], isolation_level="SnapshotIsolation"))
        with pytest.raises(ConcurrentAppendError):
            check_conflicts(w, TransactionFootprint(read_predicates=[None], isolation_level=SERIALIZABLE))


def test_dv_update_is_not_an_append() -> None:
    """A re-add of a path the winner also removes only hides rows: judged by the delete rules."""
    mine = TransactionFootprint(read_paths={"f2"}, read_predicates=[lambda f: True])
    check_conflicts(winner(info(False, "DELETE"), RemoveFile("f1"), add("f1", dv=DV)), mine)
    mine.read_paths.add("f1")
    with pytest.raises(ConcurrentDeleteReadError):
        check_conflicts(winner(info(False, "DELETE"), RemoveFile("f1"), add("f1", dv=DV)), mine)
