"""Time travel by timestamp, commit history, and single-commit reads.

Truth: the ``commitInfo.timestamp`` values Delta Spark wrote into the golden commit files
(read here with plain ``json``), and delta-rs ``history()``.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from deltalake import DeltaTable

from dvengine.errors import VersionNotFoundError
from dvengine.log import commit_infos, commit_timestamp, latest_version, load_snapshot, read_commit_actions
from dvengine.protocol.actions import AddFile, CommitInfo, RemoveFile
from tests.conftest import GOLDEN_TABLES

TABLE = GOLDEN_TABLES / "dv-partitioned-with-checkpoint"


def _raw_timestamps() -> dict[int, int]:
    out = {}
    for path in sorted((TABLE / "_delta_log").glob("*.json")):
        first = json.loads(path.read_text().splitlines()[0])
        out[int(path.name.split(".")[0])] = first["commitInfo"]["timestamp"]
    return out


TS = _raw_timestamps()


def test_commit_timestamps_match_commit_info() -> None:
    for version, ts in TS.items():
        assert commit_timestamp(str(TABLE), version) == ts
        assert load_snapshot(str(TABLE), version=version).timestamp_ms == ts
    with pytest.raises(VersionNotFoundError):
        commit_timestamp(str(TABLE), 16)


@pytest.mark.parametrize("version", range(16))
def test_timestamp_travel_exact_and_just_before(version: int) -> None:
    assert load_snapshot(str(TABLE), timestamp=TS[version]).version == version
    if version > 0:
        assert load_snapshot(str(TABLE), timestamp=TS[version] - 1).version == version - 1


def test_timestamp_forms() -> None:
    ts = TS[7]
    aware = dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC)
    naive = aware.replace(tzinfo=None)
    assert load_snapshot(str(TABLE), timestamp=aware).version == 7
    assert load_snapshot(str(TABLE), timestamp=naive).version == 7
    assert load_snapshot(str(TABLE), timestamp=aware.isoformat()).version == 7
    assert load_snapshot(str(TABLE), timestamp=naive.isoformat(sep=" ")).version == 7
    assert load_snapshot(str(TABLE), timestamp=aware.astimezone(dt.timezone(dt.timedelta(hours=5)))).version == 7


def test_timestamp_outside_history() -> None:
    with pytest.raises(VersionNotFoundError, match="before the earliest available commit"):
        load_snapshot(str(TABLE), timestamp=TS[0] - 1)
    assert load_snapshot(str(TABLE), timestamp="2999-01-01").version == 15


def test_timestamp_travel_after_log_cleanup(golden_copy: Any) -> None:
    table = golden_copy("dv-partitioned-with-checkpoint")
    for v in range(10):
        (table / "_delta_log" / f"{v:020d}.json").unlink()
    assert load_snapshot(str(table), timestamp=TS[12]).version == 12
    with pytest.raises(VersionNotFoundError):
        load_snapshot(str(table), timestamp=TS[9])


def test_commit_infos_match_delta_rs_history() -> None:
    ours = commit_infos(str(TABLE))
    theirs = DeltaTable(str(TABLE)).history()
    assert [v for v, _ in ours] == list(range(15, -1, -1))
    assert [info.timestamp for _, info in ours] == [h["timestamp"] for h in theirs]
    assert [info.operation for _, info in ours] == [h["operation"] for h in theirs]
    assert [v for v, _ in commit_infos(str(TABLE), limit=3)] == [15, 14, 13]


def test_commit_without_commit_info_gets_file_time(golden_copy: Any) -> None:
    table = golden_copy("kernel-table-without-dv-small")
    path = table / "_delta_log" / "00000000000000000001.json"
    path.write_text(json.dumps({"txn": {"appId": "a", "version": 3}}) + "\n")
    (version, info), *_ = commit_infos(str(table))
    assert version == 1 and info == CommitInfo({"timestamp": int(path.stat().st_mtime * 1000)})
    snap = load_snapshot(str(table))
    assert snap.app_transactions["a"].version == 3
    assert snap.timestamp_ms == int(path.stat().st_mtime * 1000)


def test_read_commit_actions_and_latest_version() -> None:
    actions = read_commit_actions(str(TABLE), 2)
    assert isinstance(actions[0], CommitInfo)
    kinds = sorted(type(a).__name__ for a in actions[1:])
    assert kinds == sorted(["RemoveFile", "AddFile"])
    add = next(a for a in actions if isinstance(a, AddFile))
    rm = next(a for a in actions if isinstance(a, RemoveFile))
    assert add.path == rm.path and add.key != rm.key
    assert latest_version(str(TABLE)) == 15
    assert latest_version("file://" + str(TABLE)) == 15
