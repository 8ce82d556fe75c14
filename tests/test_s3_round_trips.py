"""Requests per command on an object store (moto on 127.0.0.1), and what makes fewer of them safe.

A point DELETE on a store is dominated by sequential round trips, so the snapshot cache serves
stores too: a reopened table costs one LIST of the log from the cached version (its e-tag proves
the cached commit is still that table's), the commit this process just wrote is not read back,
a lost race reads the winner with one GET. These tests count the requests dvengine's own client
sends, and check that every shortcut still gives the rows an independent reader (delta-rs)
sees: with another writer's commits in between, with the table deleted and recreated under the
same path, after a lost race. Also: VACUUM reclaims the hidden object a killed conditional-put
probe leaves behind.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from interop import sort_rows
from s3_support import S3Server, no_ambient_credentials, rows_delta_rs_s3, s3_server  # noqa: F401

import dvengine
from dvengine import DeltaTable
from dvengine.faults import COMMIT_BEFORE_LINK
from dvengine.log import load_snapshot
from dvengine.maintenance.vacuum import vacuum
from dvengine.storage import objects
from dvengine.storage.base import BACKGROUND_PUT, CONDITIONAL_PUT_PROBE_PREFIX
from dvengine.storage.registry import request_counts, request_seconds

COLUMNS = ["id", "part", "val"]
Row = tuple[Any, ...]


def _rows(ids: range, val: int = 0) -> list[Row]:
    return [(i, f"p{i % 3}", i * 10 + val) for i in ids]


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "part": pa.array([r[1] for r in rows], pa.string()),
            "val": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def _dvengine_rows(uri: str, options: dict[str, str]) -> list[Row]:
    table = DeltaTable.forPath(None, uri, storage_options=options).toArrow()
    return sort_rows([tuple(d[c] for c in COLUMNS) for d in table.to_pylist()])


class Requests:
    """Requests dvengine's clients sent since the last ``take()``, by kind (zero kinds left out)."""

    def __init__(self) -> None:
        self.before = Counter(request_counts())

    def take(self) -> dict[str, int]:
        now = Counter(request_counts())
        diff = {k: now[k] - self.before[k] for k in now if now[k] != self.before[k]}
        self.before = now
        return diff


@pytest.fixture
def bucket(s3_server: S3Server) -> str:  # noqa: F811
    return s3_server.new_bucket()


@pytest.fixture
def read_paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every object path dvengine GETs whole, in order (log commits through ``read_bytes``, Parquet
    files through ``parquet_source``: both send their GET through ``_get``)."""
    seen: list[str] = []
    real = objects.ObjectStorage._get

    def recording(self: objects.ObjectStorage, path: str) -> Any:
        seen.append(path)
        return real(self, path)

    monkeypatch.setattr(objects.ObjectStorage, "_get", recording)
    yield seen


def _delta_rs_appends_before_our_commit_put(
    monkeypatch: pytest.MonkeyPatch, uri: str, opts: dict[str, str]
) -> list[str]:
    """Make delta-rs append ids 50-52 just before dvengine's next commit PUT (once); the returned
    list is non-empty once that happened."""
    real = objects.fault_point
    raced: list[str] = []

    def winner_first(stage: str) -> None:
        if stage == COMMIT_BEFORE_LINK and not raced:
            raced.append(stage)
            write_deltalake(uri, _arrow(_rows(range(50, 53))), mode="append", storage_options=opts)
        real(stage)

    monkeypatch.setattr(objects, "fault_point", winner_first)
    return raced


@pytest.mark.parametrize("blind", [True, False], ids=["blind", "listing"])
def test_point_dml_round_trips(
    s3_server: S3Server, bucket: str, blind: bool, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """Reopened by path, as a user's job does: DELETE = commit PUT (blind: the cached snapshot was
    shown latest by the previous command's own commit) or LIST + commit PUT (blind commits off);
    UPDATE also PUTs the new file (and GETs the old one once, before the column cache holds it);
    no HEAD anywhere."""
    if not blind:
        monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")
    listing = {} if blind else {"LIST": 1}
    uri, opts = f"s3://{bucket}/points", s3_server.options
    model = {r[0]: r for r in _rows(range(400))}  # two files of 200 rows: a few deletes stay DVs
    dvengine.write(_arrow(_rows(range(200))), uri, storage_options=opts)
    write_deltalake(uri, _arrow(_rows(range(200, 400))), mode="append", storage_options=opts)  # not our bytes
    assert _dvengine_rows(uri, opts) == sort_rows(list(model.values()))  # a read lists: sees delta-rs's commit
    DeltaTable.forPath(None, uri, storage_options=opts).delete("id = 0", engine="local")  # warm-up
    del model[0]
    requests = Requests()
    for key in (5, 110, 170):
        seconds = request_seconds()
        DeltaTable.forPath(None, uri, storage_options=opts).delete(f"id = {key}", engine="local")
        del model[key]
        assert requests.take() == {**listing, "PUT": 1}, f"DELETE id = {key}"
        timed = request_seconds()  # the bench's "in requests": the commit PUT was timed, in the caller
        assert timed["PUT"] > seconds.get("PUT", 0.0) and timed.get(BACKGROUND_PUT) == seconds.get(BACKGROUND_PUT)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    assert requests.take() == {}  # the cached snapshot answers the existence check
    # the first reads delta-rs's file (one GET); the second finds it in the column cache; the third
    # updates the row the first moved into a file this process wrote and still holds: no GET either
    for i, key in enumerate((250, 330, 250)):
        seconds = request_seconds()
        table.update(f"id = {key}", {"val": str(-1 - i)}, engine="local")
        assert request_seconds()[BACKGROUND_PUT] > seconds.get(BACKGROUND_PUT, 0.0)  # the new file's PUT, timed apart
        model[key] = (key, f"p{key % 3}", -1 - i)
        expected = {**listing, "PUT": 2, **({"GET": 1} if i == 0 else {})}
        assert requests.take() == expected, f"UPDATE id = {key}"
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == sort_rows(list(model.values()))
    assert _dvengine_rows(uri, opts) == sort_rows(list(model.values()))


def test_reopen_follows_other_writers_and_a_recreated_table(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    read_paths: list[str],
) -> None:
    uri, opts = f"s3://{bucket}/shared", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    assert _dvengine_rows(uri, opts) == sort_rows(_rows(range(10)))  # cached at version 0
    # another writer (delta-rs) commits twice: the one LIST shows both, both are read (in parallel)
    write_deltalake(uri, _arrow(_rows(range(10, 15))), mode="append", storage_options=opts)
    write_deltalake(uri, _arrow(_rows(range(15, 20))), mode="append", storage_options=opts)
    requests, read_paths[:] = Requests(), []
    assert load_snapshot(uri).version == 2
    assert requests.take() == {"LIST": 1, "GET": 2}
    assert sorted(p.rsplit("/", 1)[-1] for p in read_paths) == [f"{v:020d}.json" for v in (1, 2)]
    assert _dvengine_rows(uri, opts) == sort_rows(_rows(range(20)))
    # the table is deleted and another one created under the same path, up to the same version 2:
    # its 2.json has another e-tag, so the cached state is dropped, not extended
    client = s3_server.client()
    for key in s3_server.keys(bucket, "shared/"):
        client.delete_object(Bucket=bucket, Key=key)
    write_deltalake(uri, _arrow(_rows(range(100, 103))), mode="error", storage_options=opts)
    write_deltalake(uri, _arrow(_rows(range(103, 105))), mode="append", storage_options=opts)
    write_deltalake(uri, _arrow(_rows(range(105, 106))), mode="append", storage_options=opts)
    assert load_snapshot(uri).version == 2
    assert _dvengine_rows(uri, opts) == sort_rows(_rows(range(100, 106))) == rows_delta_rs_s3(s3_server, uri, COLUMNS)
    # and dvengine's own commit on top of it is not read back by the next open
    DeltaTable.forPath(None, uri, storage_options=opts).delete("id = 101", engine="local")
    read_paths[:] = []
    assert load_snapshot(uri).version == 3
    assert not [p for p in read_paths if "/_delta_log/" in p]
    want = sort_rows([r for r in _rows(range(100, 106)) if r[0] != 101])
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)


def test_lost_race_reads_the_winner_with_one_get(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    read_paths: list[str],
) -> None:
    """delta-rs takes version 1 just before dvengine's commit PUT: the 412 is followed by one LIST of
    the log from version 1 and one GET of the winner it shows (no probe of a missing version 2, no
    HEADs); the DELETE lands at version 2. (Blind commits off: this is the race of a command that
    listed; test_blind_loss_replans is the other.)"""
    monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")
    uri, opts = f"s3://{bucket}/race", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    raced = _delta_rs_appends_before_our_commit_put(monkeypatch, uri, opts)
    requests, read_paths[:] = Requests(), []
    metrics = table.delete("id = 3", engine="local")
    assert raced and metrics["version"] == 2
    counts = requests.take()
    assert "HEAD" not in counts and counts["PUT"] == 2
    assert counts["LIST"] == 2  # the command's own listed load, then the catch-up's
    log_reads = [p.rsplit("/", 1)[-1] for p in read_paths if "/_delta_log/" in p]
    assert log_reads == [f"{1:020d}.json"]  # the winner the LIST showed
    # The next command lists versions 1 and 2 with the e-tags of the winner it read and of its own
    # commit: it reads neither again.
    read_paths[:] = []
    assert table.delete("id = 4", engine="local")["version"] == 3
    assert requests.take()["LIST"] == 1
    assert [p for p in read_paths if "/_delta_log/" in p] == []
    want = sort_rows([r for r in _rows(range(10)) if r[0] not in (3, 4)] + _rows(range(50, 53)))
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)


def test_lost_race_with_a_listing_that_lags_reads_the_winners_one_by_one(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    read_paths: list[str],
) -> None:
    """A store whose listing does not yet show the commit that refused ours (S3 lists what it
    stored, some S3-compatible stores lag): the catch-up does not trust the empty listing (it
    would PUT at the same version again and again) but reads version 1, 2, ... until one is
    missing, as on a local folder; the DELETE lands at version 2."""
    monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")
    uri, opts = f"s3://{bucket}/lagging", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    raced = _delta_rs_appends_before_our_commit_put(monkeypatch, uri, opts)
    real_list_after = objects.ObjectStorage.list_dir_after
    catch_up_listings: list[str] = []

    def lagging(self: objects.ObjectStorage, directory: str, after_name: str) -> Any:
        if raced:  # after the winner landed: the catch-up's listing
            catch_up_listings.append(after_name)
            return []
        return real_list_after(self, directory, after_name)

    monkeypatch.setattr(objects.ObjectStorage, "list_dir_after", lagging)
    read_paths[:] = []
    metrics = table.delete("id = 3", engine="local")
    assert raced and metrics["version"] == 2 and metrics["numCommitAttempts"] == 2
    assert catch_up_listings == [f"{1:020d}"]
    log_reads = [p.rsplit("/", 1)[-1] for p in read_paths if "/_delta_log/" in p]
    assert log_reads == [f"{1:020d}.json", f"{2:020d}.json"]  # the winner, then "no version 2 yet"
    monkeypatch.setattr(objects.ObjectStorage, "list_dir_after", real_list_after)
    want = sort_rows([r for r in _rows(range(10)) if r[0] != 3] + _rows(range(50, 53)))
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)


def test_blind_loss_replans(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    read_paths: list[str],
) -> None:
    """A blind DELETE (planned on the snapshot cached by the write just before) finds version 1
    taken by delta-rs's append of rows it matches: the 412 is not rebased onto (the append is a
    blind append, which a rebase would let through with id 51 still there) but re-planned on one
    LIST, which reads the winner; the DELETE lands at version 2 and removes id 51 too, as a
    command that listed first does. Nothing but the two commits is left; the next command lists
    (another writer is active) and commits."""
    uri, opts = f"s3://{bucket}/blind-race", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    raced = _delta_rs_appends_before_our_commit_put(monkeypatch, uri, opts)
    requests, read_paths[:] = Requests(), []
    metrics = table.delete("id = 3 OR id = 51", engine="local")
    assert raced and metrics["version"] == 2 and metrics["numDeletedRows"] == 2
    assert metrics["numCommitAttempts"] == 1  # the re-planned command's own attempts
    counts = requests.take()
    assert counts["LIST"] == 1 and "HEAD" not in counts  # one listing: the re-plan's
    log_reads = [p.rsplit("/", 1)[-1] for p in read_paths if "/_delta_log/" in p]
    assert log_reads == [f"{1:020d}.json"]
    want = sort_rows([r for r in _rows(range(10)) + _rows(range(50, 53)) if r[0] not in (3, 51)])
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)
    assert [k.rsplit("/", 1)[-1] for k in s3_server.keys(bucket, "blind-race/_delta_log/")] == [
        f"{v:020d}.json" for v in range(3)
    ]
    requests.take()
    table.delete("id = 4", engine="local")
    assert requests.take()["LIST"] == 1  # a blind loss within the window: list first


def test_vacuum_reclaims_a_killed_probe(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    """A process killed between the two creates of its conditional-put probe leaves a hidden object
    (beside a data file or in ``_delta_log``); VACUUM deletes it once it is an hour old, never a
    younger one (a running probe), and nothing else."""
    uri, opts = f"s3://{bucket}/vac", s3_server.options
    dvengine.write(_arrow(_rows(range(6))), uri, storage_options=opts)
    client = s3_server.client()
    probes = [f"vac/{CONDITIONAL_PUT_PROBE_PREFIX}{uuid.uuid4().hex}", f"vac/_delta_log/{CONDITIONAL_PUT_PROBE_PREFIX}{uuid.uuid4().hex}"]
    for key in probes:
        client.put_object(Bucket=bucket, Key=key, Body=b"probe")
    table_keys = [k for k in s3_server.keys(bucket) if k not in probes]
    young = vacuum(uri, retention_hours=0, enforce_retention=False)
    assert young["numAbandonedTempFiles"] == 0 and young["numFilesDeleted"] == 0
    assert set(probes) <= set(s3_server.keys(bucket))
    later = int(time.time() * 1000) + 2 * 3_600_000  # as if VACUUM ran two hours later
    planned = vacuum(uri, retention_hours=0, enforce_retention=False, dry_run=True, now_ms=later)
    assert planned["numAbandonedTempFiles"] == 2 and set(probes) <= set(s3_server.keys(bucket))
    done = vacuum(uri, retention_hours=0, enforce_retention=False, now_ms=later)
    assert done["numAbandonedTempFiles"] == 2 and done["numFilesDeleted"] == 0
    # plus the record of where VACUUM stopped, which Delta's VACUUM also writes (_last_vacuum_info)
    assert s3_server.keys(bucket) == sorted([*table_keys, "vac/_delta_log/_last_vacuum_info"])
    assert rows_delta_rs_s3(s3_server, uri, COLUMNS) == sort_rows(_rows(range(6)))


def test_writer_that_waited_for_the_host_turn_reads_the_winner_before_its_put(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    read_paths: list[str],
) -> None:
    """Another writer on this host holds the table's commit turn and, once this DELETE has planned
    on version 0 and found the turn taken, commits version 1 (here delta-rs, inside the held turn):
    once in its turn the DELETE lists the log, reads the winner it shows, then PUTs once at version
    2; no PUT of it is refused."""
    from dvengine.commit import transaction
    from dvengine.commit.commit_lock import commit_turn
    from dvengine.storage.logstore import log_dir

    monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")
    uri, opts = f"s3://{bucket}/turn", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    log = log_dir(uri)
    holding, asked = threading.Event(), threading.Event()
    real_turn_taken = transaction.turn_taken
    answers: list[bool] = []

    def turn_taken_noted(folder: str) -> bool:
        answers.append(real_turn_taken(folder))
        asked.set()
        return answers[-1]

    monkeypatch.setattr(transaction, "turn_taken", turn_taken_noted)

    def other_writer() -> None:
        with commit_turn(log) as held:
            assert held
            holding.set()
            assert asked.wait(60)  # the DELETE planned on version 0 and found the turn taken
            write_deltalake(uri, _arrow(_rows(range(50, 53))), mode="append", storage_options=opts)
            time.sleep(0.1)

    thread = threading.Thread(target=other_writer)
    thread.start()
    assert holding.wait(60)
    requests, read_paths[:] = Requests(), []
    metrics = table.delete("id = 3", engine="local")
    thread.join()
    assert answers == [True]
    assert metrics["version"] == 2 and metrics["numCommitAttempts"] == 2  # the stale snapshot counts as one
    counts = requests.take()
    assert counts["PUT"] == 1  # the commit, once: nothing refused
    assert counts["LIST"] == 2  # the command's listed load, then the catch-up in the turn
    log_reads = [p.rsplit("/", 1)[-1] for p in read_paths if "/_delta_log/" in p]
    assert log_reads == [f"{1:020d}.json"]  # the winner
    want = sort_rows([r for r in _rows(range(10)) if r[0] != 3] + _rows(range(50, 53)))
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)


def test_object_store_turn_is_shared_by_uri_spellings_and_kept_apart_by_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dvengine.commit.commit_lock import lock_path

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    one = lock_path("s3://b/t/_delta_log")
    assert one is not None and one == lock_path("s3://b/t/_delta_log/")
    assert one != lock_path("s3://b/other/_delta_log")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    assert one != lock_path("s3://b/t/_delta_log")  # another server's bucket of the same name


def test_a_commit_another_process_on_this_host_made_is_taken_from_the_relay(
    s3_server: S3Server,  # noqa: F811
    bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    read_paths: list[str],
) -> None:
    """Another writer process on this host commits version 2; this process's next listed load sees
    version 2 in the LIST with the e-tag that writer's PUT returned and takes its bytes from the
    host's commit relay: no GET of it. The rows are the store's, checked by delta-rs."""
    import json
    import subprocess
    import sys

    monkeypatch.setenv("DVENGINE_SNAPSHOT_MAXSTALENESSSECONDS", "0")
    uri, opts = f"s3://{bucket}/relayed", s3_server.options
    dvengine.write(_arrow(_rows(range(10))), uri, storage_options=opts)
    table = DeltaTable.forPath(None, uri, storage_options=opts)
    assert table.delete("id = 1", engine="local")["version"] == 1
    child = (
        "import json, sys\nfrom dvengine import DeltaTable\n"
        "t = DeltaTable.forPath(None, sys.argv[1], storage_options=json.loads(sys.argv[2]))\n"
        "print(t.delete('id = 2', engine='local')['version'])\n"
    )
    done = subprocess.run([sys.executable, "-c", child, uri, json.dumps(opts)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "2"
    read_paths[:] = []
    assert load_snapshot(uri).version == 2
    assert [p for p in read_paths if "/_delta_log/" in p] == []
    want = sort_rows([r for r in _rows(range(10)) if r[0] not in (1, 2)])
    assert _dvengine_rows(uri, opts) == want == rows_delta_rs_s3(s3_server, uri, COLUMNS)
