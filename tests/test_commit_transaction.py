"""Transactions: commit format, validation, retries and races (threads and OS processes)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from test_commit_helpers import (
    METADATA,
    FakeSnapshot,
    add,
    append,
    create_table,
    dv,
    log_lines,
    log_versions,
    redv,
    remove_of,
    replay,
)

from dvengine.commit.commit_info import delta_json
from dvengine.commit.transaction import Transaction
from dvengine.errors import (
    CommitConflictError,
    CommitError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    InvalidArgumentError,
    MaxCommitAttemptsExceededError,
    MetadataChangedError,
    ProtocolError,
    TableAlreadyExistsError,
    UnsupportedFeatureError,
)
from dvengine.protocol.actions import AddFile, Metadata, Protocol
from dvengine.storage.logstore import LocalLogStore


def test_create_writes_commit_info_protocol_metadata_and_adds(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    assert create_table(root, files=2) == 0
    lines = [line for _, line in log_lines(root)]
    assert list(lines[0]) == ["commitInfo"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "CREATE TABLE" and "readVersion" not in info
    assert info["operationParameters"] == {"mode": "ErrorIfExists"}
    assert info["isBlindAppend"] is True and info["isolationLevel"] == "WriteSerializable"
    assert info["engineInfo"].startswith("dvengine/") and len(info["txnId"]) == 36
    assert [next(iter(line)) for line in lines[1:]] == ["protocol", "metaData", "add", "add"]


def test_commit_info_encodes_parameters_and_metrics_as_delta_does(tmp_path: Path) -> None:
    """Delta's JsonMapSerializer writes each parameter raw (``writeRawValue`` of ``JsonUtils.toJson``):
    a String as a JSON string, a Boolean / Long as JSON, None as null; lists arrive pre-encoded as
    compact JSON text. The commit line is compared byte for byte with that shape."""
    root = str(tmp_path / "t")
    create_table(root)
    params = {"mode": "Append", "partitionBy": delta_json(["a", "b", "é"]), "canMergeSchema": True,
              "numFiles": 3, "description": None}
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", params)
    txn.add_actions([add("new.parquet")])
    assert txn.commit({"numFiles": 1, "numOutputRows": 10}) == 1
    raw = (Path(root) / "_delta_log" / f"{1:020d}.json").read_text(encoding="utf-8").splitlines()[0]
    assert ('"operationParameters":{"mode":"Append","partitionBy":"[\\"a\\",\\"b\\",\\"\\u00e9\\"]",'
            '"canMergeSchema":true,"numFiles":3,"description":null}') in raw
    info = next(line for v, line in log_lines(root) if v == 1)["commitInfo"]
    assert info["operationParameters"]["partitionBy"] == '["a","b","é"]'  # Jackson keeps non-ASCII as is
    assert info["operationMetrics"] == {"numFiles": "1", "numOutputRows": "10"}
    assert info["readVersion"] == 0 and info["isBlindAppend"] is True


@pytest.mark.parametrize("value", [["a"], {"k": "v"}, 1.5])
def test_a_parameter_that_is_not_a_delta_scalar_is_refused_before_anything_is_written(tmp_path: Path, value: Any) -> None:
    """Lists and maps go through delta_json (Delta never logs a raw JSON array or object): a raw one
    is a TypeError when the transaction opens."""
    root = str(tmp_path / "t")
    create_table(root)
    with pytest.raises(TypeError, match="delta_json"):
        Transaction(root, FakeSnapshot(root, 0), "WRITE", {"mode": "Append", "partitionBy": value})
    assert log_versions(root) == [0]


def test_delete_is_not_blind_append_and_replays(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root, files=2)
    assert redv(root, "f1.parquet", "a") == 1
    info = next(line for v, line in log_lines(root) if v == 1)["commitInfo"]
    assert info["isBlindAppend"] is False
    live = replay(root)
    assert sorted(live) == [("f0.parquet", None), ("f1.parquet", "u" + "a" * 20 + "@1")]


# --- validation: a failure writes nothing ---------------------------------------------------------


def _assert_unchanged(root: str, versions: list[int]) -> None:
    assert log_versions(root) == versions
    assert not [n for n in os.listdir(os.path.join(root, "_delta_log")) if n.startswith(".")], "temp file left"


def test_dv_add_without_loose_bounds_is_rejected(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "DELETE", {})
    bad = AddFile("f1.parquet", {}, 100, 1, True, json.dumps({"numRecords": 10, "tightBounds": True}), deletion_vector=dv("a"))
    txn.add_actions([remove_of("f1.parquet"), bad])
    with pytest.raises(ProtocolError, match="tightBounds=false"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_dv_add_without_num_records_is_rejected(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "DELETE", {})
    txn.add_actions([AddFile("f1.parquet", {}, 100, 1, True, json.dumps({"tightBounds": False}), deletion_vector=dv("a"))])
    with pytest.raises(ProtocolError, match="numRecords"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_dv_add_needs_the_feature(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0, protocol=Protocol(1, 2)), "DELETE", {})
    txn.add_actions([remove_of("f1.parquet"), add("f1.parquet", dv("a"))])
    with pytest.raises(UnsupportedFeatureError, match="deletionVectors"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_unsupported_writer_feature_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    proto = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "icebergCompatV1"))
    txn = Transaction(root, FakeSnapshot(root, 0, protocol=proto), "WRITE", {})
    txn.add_actions([add("x.parquet")])
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV1"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_partition_values_must_match_partition_columns(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {})
    txn.add_actions([AddFile("x.parquet", {"id": "1"}, 1, 1)])
    with pytest.raises(ProtocolError, match="partitioned by"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_duplicate_logical_add_is_rejected(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {})
    txn.add_actions([add("x.parquet"), add("x.parquet")])
    with pytest.raises(ProtocolError, match="more than once"):
        txn.commit()
    _assert_unchanged(root, [0])


def test_create_needs_protocol_and_metadata(tmp_path: Path) -> None:
    txn = Transaction(str(tmp_path / "t"), None, "CREATE TABLE", {})
    txn.add_actions([add("x.parquet")])
    with pytest.raises(InvalidArgumentError, match="update_protocol"):
        txn.commit()
    assert not (tmp_path / "t").exists()


def test_commit_info_cannot_be_added_by_hand(tmp_path: Path) -> None:
    txn = Transaction(str(tmp_path), None, "X", {})
    with pytest.raises(InvalidArgumentError):
        txn.add_actions([METADATA])


def test_transaction_commits_once(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {})
    txn.add_actions([add("x.parquet")])
    txn.commit()
    with pytest.raises(CommitError, match="already committed"):
        txn.commit()


# --- races, sequential ------------------------------------------------------------------------------


def test_blind_append_retries_past_winners(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    append(root, "a.parquet")  # v1, both read v0
    assert append(root, "b.parquet") == 2
    assert {"a.parquet", "b.parquet"} <= {p for p, _ in replay(root)}


def test_delete_retries_past_disjoint_delete(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    assert redv(root, "f1.parquet", "a") == 1
    assert redv(root, "f2.parquet", "b", read_version=0) == 2


def test_delete_of_same_file_conflicts_and_writes_nothing(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    redv(root, "f1.parquet", "a")
    with pytest.raises(ConcurrentDeleteReadError, match="f1.parquet"):
        redv(root, "f1.parquet", "b", read_version=0)
    _assert_unchanged(root, [0, 1])


def test_create_race_loser_gets_table_already_exists(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    with pytest.raises(TableAlreadyExistsError):
        create_table(root)


def test_metadata_change_by_winner_conflicts(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    alter = Transaction(root, FakeSnapshot(root, 0), "SET TBLPROPERTIES", {})
    alter.update_metadata(Metadata("tbl-1", METADATA.schema_string, configuration={"a": "b"}))
    alter.commit()
    with pytest.raises(MetadataChangedError):
        append(root, "x.parquet", read_version=0)


def test_same_app_id_conflicts(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    first = Transaction(root, FakeSnapshot(root, 0), "STREAMING UPDATE", {})
    first.set_app_transaction("app", 1)
    first.add_actions([add("a.parquet")])
    first.commit()
    second = Transaction(root, FakeSnapshot(root, 0), "STREAMING UPDATE", {})
    second.set_app_transaction("app", 1)
    second.add_actions([add("b.parquet")])
    with pytest.raises(ConcurrentTransactionError):
        second.commit()


def test_max_attempts(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    append(root, "a.parquet")
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, max_attempts=1)
    txn.add_actions([add("b.parquet")])
    with pytest.raises(MaxCommitAttemptsExceededError):
        txn.commit()
    _assert_unchanged(root, [0, 1])


class _FlakyStore(LocalLogStore):
    """Makes the first put of each version look like a lost race by committing a blind append first."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.sabotaged: set[str] = set()

    def link_staged(self, staged: str, path: str) -> None:
        # Every publish goes through here: a commit staged before the commit turn and a plain
        # put_if_absent alike.
        if path not in self.sabotaged and len(self.sabotaged) < 3:
            self.sabotaged.add(path)
            line = json.dumps({"commitInfo": {"operation": "WRITE", "isBlindAppend": True}})
            add_line = json.dumps({"add": add(f"other-{len(self.sabotaged)}.parquet").to_json()})
            super().put_if_absent(path, (line + "\n" + add_line + "\n").encode())
        super().link_staged(staged, path)


def test_retries_through_several_lost_races(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, store=_FlakyStore(root))
    txn.add_actions([add("mine.parquet")])
    assert txn.commit() == 4
    assert sum(1 for p, _ in replay(root) if p == "mine.parquet") == 1


def test_checkpoint_failure_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    """The part of the checkpoint hook that runs in the committing thread (deciding it is due);
    a failure of the background write is tests/test_background_checkpoints.py's."""
    root = str(tmp_path / "t")
    create_table(root)

    def boom(table_root: str, version: int, **kwargs: Any) -> None:
        raise OSError("disk full")

    import dvengine.commit.transaction as transaction_module

    monkeypatch.setattr(transaction_module, "due_checkpoint", boom)
    with caplog.at_level(logging.WARNING):
        assert append(root, "x.parquet") == 1
    assert "checkpoint failed" in caplog.text


def test_checkpoint_called_with_committed_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    calls: list[tuple[str, int]] = []
    import dvengine.commit.transaction as transaction_module

    monkeypatch.setattr(transaction_module, "due_checkpoint", lambda r, v, **kw: calls.append((r, v)))
    append(root, "x.parquet")
    assert calls == [(os.path.realpath(root), 1)]


# --- races, threads ---------------------------------------------------------------------------------


def _run_threads(fns: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fns[i]()
        except CommitConflictError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_threads_blind_appends_all_land_once(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    n = 8
    results = _run_threads([lambda i=i: append(root, f"t{i}.parquet") for i in range(n)])
    assert sorted(results) == list(range(1, n + 1))
    adds = [line["add"]["path"] for _, line in log_lines(root) if "add" in line]
    for i in range(n):
        assert adds.count(f"t{i}.parquet") == 1


def test_threads_same_file_exactly_one_winner(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    results = _run_threads([lambda tag=tag: redv(root, "f1.parquet", tag) for tag in "abcd"])
    winners = [r for r in results if isinstance(r, int)]
    losers = [r for r in results if isinstance(r, ConcurrentDeleteReadError)]
    assert len(winners) == 1 and len(losers) == 3
    assert [k for k in replay(root) if k[0] == "f1.parquet" and k[1] is not None].__len__() == 1
    assert log_versions(root) == [0, 1]


# --- races, OS processes ----------------------------------------------------------------------------


def _worker(role: str, root: str, barrier: Any, queue: Any) -> None:
    """Runs in a spawned process: commit per role and report outcomes (no Spark needed)."""
    out: list[tuple[str, str, int | str]] = []
    barrier.wait()
    if role == "appender":
        for i in range(5):
            out.append((f"append-{i}", "ok", append(root, f"app-{i}.parquet")))
    else:
        tag = "x" if role == "deleterA" else "y"
        for label, path in ((f"{role}-same", "f1.parquet"), (f"{role}-own", "f2.parquet" if tag == "x" else "f3.parquet")):
            try:
                out.append((label, "ok", redv(root, path, tag)))
            except CommitConflictError as exc:
                out.append((label, type(exc).__name__, str(exc)))
    queue.put((role, out))


def test_three_processes_race(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(role, root, barrier, queue)) for role in ("appender", "deleterA", "deleterB")]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    flat = {label: (status, value) for outs in results.values() for label, status, value in outs}

    # every blind append and every disjoint delete committed exactly once
    for i in range(5):
        assert flat[f"append-{i}"][0] == "ok"
    assert flat["deleterA-own"][0] == "ok" and flat["deleterB-own"][0] == "ok"
    # exactly one of the two DV updates of the same file won; the other saw a delete/read conflict
    same = [flat["deleterA-same"], flat["deleterB-same"]]
    assert sorted(s for s, _ in same) == ["ConcurrentDeleteReadError", "ok"]

    committed_versions = sorted(int(v) for s, v in flat.values() if s == "ok")
    assert committed_versions == list(range(1, len(committed_versions) + 1)) == log_versions(root)[1:]

    adds = [line["add"] for _, line in log_lines(root) if "add" in line]
    for i in range(5):
        assert sum(a["path"] == f"app-{i}.parquet" for a in adds) == 1
    live = replay(root)
    winner_tag = "x" if flat["deleterA-same"][0] == "ok" else "y"
    assert ("f1.parquet", "u" + winner_tag * 20 + "@1") in live and ("f1.parquet", None) not in live
    assert ("f2.parquet", "u" + "x" * 20 + "@1") in live and ("f3.parquet", "u" + "y" * 20 + "@1") in live
    assert len(live) == 6 + 5


# --- the commit turn: staged before it, linked in it, log folder synced after it ------------------


class _RecordingStore(LocalLogStore):
    """Records the order of staging, linking and folder syncs, and whether the turn was held."""

    def __init__(self, root: str, winner_at_link: bool = False) -> None:
        self.root = root
        self.events: list[str] = []
        self.winner_at_link = winner_at_link

    def stage_commit(self, path: str, data: bytes) -> str:
        self.events.append(f"stage {os.path.basename(path)} turn={self._turn_held()}")
        return super().stage_commit(path, data)

    def link_staged(self, staged: str, path: str) -> None:
        if self.winner_at_link:  # a writer outside the turn takes the version first, once
            self.winner_at_link = False
            line = json.dumps({"commitInfo": {"operation": "WRITE", "isBlindAppend": True}})
            add_line = json.dumps({"add": add("outside.parquet").to_json()})
            LocalLogStore().put_if_absent(path, (line + "\n" + add_line + "\n").encode())
        self.events.append(f"link {os.path.basename(path)} turn={self._turn_held()}")
        super().link_staged(staged, path)

    def sync_dir(self, directory: str) -> None:
        self.events.append(f"sync {os.path.basename(directory)} turn={self._turn_held()}")
        super().sync_dir(directory)

    def _turn_held(self) -> bool:
        """A bare non-blocking probe: ``commit_turn(timeout_s=0)`` would leave a waiter thread
        blocked in ``flock`` that takes the lock for a moment after the holder releases it, so a
        later probe (the folder sync's) could see the turn "held" by that leftover waiter."""
        import fcntl

        from dvengine.commit.commit_lock import lock_path

        path = lock_path(os.path.join(self.root, "_delta_log"))
        assert path is not None
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def test_a_stale_commit_is_staged_before_the_turn_linked_in_it_and_synced_after(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    append(root, "w1.parquet")
    append(root, "w2.parquet")
    store = _RecordingStore(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, store=store)
    txn.add_actions([add("mine.parquet")])
    assert txn.commit() == 3  # caught up past versions 1 and 2 before the turn: no failed link
    assert store.events == [
        "stage 00000000000000000003.json turn=False",
        "link 00000000000000000003.json turn=True",
        "sync _delta_log turn=False",
    ]
    assert txn.attempts == 2  # the stale read snapshot counts as one lost race
    _assert_unchanged(root, [0, 1, 2, 3])


def test_a_winner_landing_during_the_wait_is_rebased_and_restaged_inside_the_turn(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    store = _RecordingStore(root, winner_at_link=True)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, store=store)
    txn.add_actions([add("mine.parquet")])
    assert txn.commit() == 2
    assert store.events == [
        "stage 00000000000000000001.json turn=False",
        "link 00000000000000000001.json turn=True",  # lost to the writer outside the turn
        "stage 00000000000000000002.json turn=True",
        "link 00000000000000000002.json turn=True",
        "sync _delta_log turn=False",
    ]
    assert sum(1 for p, _ in replay(root) if p == "mine.parquet") == 1
    _assert_unchanged(root, [0, 1, 2])  # the stale staged file is gone too


def test_max_attempts_one_refuses_a_stale_snapshot_before_staging(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    append(root, "w1.parquet")
    store = _RecordingStore(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, store=store, max_attempts=1)
    txn.add_actions([add("mine.parquet")])
    with pytest.raises(MaxCommitAttemptsExceededError, match="max_attempts=1"):
        txn.commit()
    assert store.events == []
    _assert_unchanged(root, [0, 1])


class _UnsyncableStore(LocalLogStore):
    def sync_dir(self, directory: str) -> None:
        raise OSError(5, "Input/output error", directory)


def test_a_failed_log_folder_sync_warns_but_the_linked_commit_stands(tmp_path: Path, caplog: Any) -> None:
    root = str(tmp_path / "t")
    create_table(root)
    txn = Transaction(root, FakeSnapshot(root, 0), "WRITE", {}, store=_UnsyncableStore())
    txn.add_actions([add("mine.parquet")])
    with caplog.at_level(logging.WARNING):
        assert txn.commit() == 1
    assert "is linked but fsync" in caplog.text
    assert ("mine.parquet", None) in replay(root)
