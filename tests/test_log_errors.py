"""Typed errors of log replay: each bad log maps to one precise error class and message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dvengine.errors import (
    LogCorruptedError,
    ProtocolError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from dvengine.log import clear_snapshot_cache, latest_version, load_snapshot, read_commit_actions, table_exists

TABLE = "dv-partitioned-with-checkpoint"


def _log(table: Path, version: int) -> Path:
    return table / "_delta_log" / f"{version:020d}.json"


def test_not_a_table(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="is not a Delta table"):
        load_snapshot(str(tmp_path))
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(TableNotFoundError, match="no commit or checkpoint"):
        latest_version(str(tmp_path))
    assert not table_exists(str(tmp_path))
    assert not table_exists(str(tmp_path / "missing"))


def test_version_out_of_range(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    assert table_exists(str(table))
    with pytest.raises(VersionNotFoundError, match="latest version is 15"):
        load_snapshot(str(table), version=16)
    with pytest.raises(VersionNotFoundError, match="start at 0"):
        load_snapshot(str(table), version=-1)
    with pytest.raises(VersionNotFoundError):
        read_commit_actions(str(table), 99)


def test_gap_in_versions(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    _log(table, 3).unlink()
    # the checkpoint at 10 does not need commit 3 ...
    assert load_snapshot(str(table)).version == 15
    # ... but versions before it do, and so does replay without the checkpoint.
    with pytest.raises(ProtocolError, match=r"gap.*version\(s\) 3"):
        load_snapshot(str(table), version=5)
    (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").unlink()
    clear_snapshot_cache()  # a fresh process: this one's cache still holds version 15, which was right
    with pytest.raises(ProtocolError, match="gap"):
        load_snapshot(str(table))


def test_gap_after_checkpoint(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    _log(table, 12).unlink()
    with pytest.raises(ProtocolError, match=r"version\(s\) 12"):
        load_snapshot(str(table))


def test_truncated_commit_line(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    path = _log(table, 14)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])
    last_line = data.rstrip(b"\n").count(b"\n") + 1
    with pytest.raises(LogCorruptedError, match=rf"00000000000000000014\.json line {last_line} is not valid JSON"):
        load_snapshot(str(table))
    # versions that do not need the broken file still load
    assert load_snapshot(str(table), version=13).version == 13


def test_non_object_line(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    lines = _log(table, 15).read_text().rstrip("\n").count("\n") + 1
    with open(_log(table, 15), "a") as fh:
        fh.write("[1, 2]\n")
    with pytest.raises(LogCorruptedError, match=f"line {lines + 1} is not a JSON object"):
        load_snapshot(str(table))


def test_unsupported_reader_feature(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors", "someFutureFeature"],
            "writerFeatures": ["deletionVectors", "someFutureFeature"],
        }
    }
    _log(table, 16).write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n" + json.dumps(protocol) + "\n")
    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        load_snapshot(str(table))
    assert load_snapshot(str(table), version=15).version == 15


def test_no_protocol_or_metadata(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / "00000000000000000000.json").write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n")
    with pytest.raises(ProtocolError, match="no protocol action"):
        load_snapshot(str(tmp_path))
    (log / "00000000000000000001.json").write_text(
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n"
    )
    with pytest.raises(ProtocolError, match="no metaData action"):
        load_snapshot(str(tmp_path))


def test_missing_required_field_names_file_and_line(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    _log(table, 16).write_text(json.dumps({"commitInfo": {}}) + "\n" + json.dumps({"add": {"path": "x"}}) + "\n")
    with pytest.raises(ProtocolError, match=r"00000000000000000016\.json line 2: .*'size'"):
        load_snapshot(str(table))


def test_cleaned_up_history(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    for v in range(10):
        _log(table, v).unlink()
    assert load_snapshot(str(table), version=10).version == 10
    assert load_snapshot(str(table)).num_records == 35
    with pytest.raises(VersionNotFoundError, match="earliest available version is 10"):
        load_snapshot(str(table), version=9)


def test_corrupt_checkpoint_without_fallback(golden_copy: Any) -> None:
    table = golden_copy(TABLE)
    for v in range(10):
        _log(table, v).unlink()
    (table / "_delta_log" / "00000000000000000010.checkpoint.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(LogCorruptedError, match="checkpoint"):
        load_snapshot(str(table))


def test_both_version_and_timestamp_is_an_error(golden_copy: Any) -> None:
    from dvengine.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        load_snapshot(str(golden_copy(TABLE)), version=1, timestamp=0)
