"""Parsed commits are memoized by their bytes (log/commit_file.py): a hit must equal a fresh
parse, must not be changed by a caller, and corrupt input must still fail every time."""

from __future__ import annotations

import json

import pytest

from dvengine.errors import LogCorruptedError
from dvengine.log import commit_file
from dvengine.log.commit_file import parse_actions
from dvengine.protocol.actions import AddFile, CommitInfo


def _commit(path: str, rows: int) -> bytes:
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "WRITE"}},
        {"add": {"path": path, "partitionValues": {}, "size": 10, "modificationTime": 1, "dataChange": True,
                 "stats": json.dumps({"numRecords": rows})}},
    ]
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def test_a_repeated_commit_parses_to_the_same_actions_and_callers_cannot_change_the_memo() -> None:
    data = _commit("a.parquet", 3)
    first = parse_actions(data, "00.json")
    assert [type(a) for a in first] == [CommitInfo, AddFile]
    assert commit_file._MEMO.get(data) is not None
    first.append(first[0])  # a caller's list is its own
    again = parse_actions(data, "other/name/00.json")
    assert again == commit_file._parse(data, "00.json") and len(again) == 2
    other = parse_actions(_commit("b.parquet", 4), "01.json")
    assert isinstance(other[1], AddFile) and other[1].path == "b.parquet" and other[1].num_records == 4


def test_the_memo_is_bounded_and_skips_large_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_file, "_MEMO_ENTRIES", 4)
    for i in range(10):
        parse_actions(_commit(f"f{i}.parquet", i), f"{i}.json")
    assert len(commit_file._MEMO) <= 4
    monkeypatch.setattr(commit_file, "_MEMO_MAX_BYTES", 10)
    big = _commit("big.parquet", 1)
    assert parse_actions(big, "big.json")[1].path == "big.parquet"  # type: ignore[union-attr]
    assert big not in commit_file._MEMO


def test_corrupt_bytes_fail_every_time_naming_the_file() -> None:
    bad = _commit("a.parquet", 1)[:-20] + b"\n"
    for name in ("x/00.json", "y/00.json"):
        with pytest.raises(LogCorruptedError, match=name):
            parse_actions(bad, name)
