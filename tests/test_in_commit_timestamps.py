"""In-commit timestamps (``inCommitTimestamp``): every commit of an enabled table carries a strictly
increasing ``commitInfo.inCommitTimestamp``; the enabling commit of an existing table records its
version and timestamp; time travel and history use them.

Truth: PROTOCOL.md's rules checked on the commit files themselves, delta-rs reading the protocol,
and the rows delta-rs and DuckDB read at the end.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.commit import transaction
from dvengine.log import load_snapshot
from dvengine.maintenance.properties import set_table_properties


def _commit_infos(root: str) -> list[dict[str, object]]:
    out = []
    for path in sorted(Path(root, "_delta_log").glob("*.json")):
        first = json.loads(path.read_text().splitlines()[0])
        assert "commitInfo" in first  # PROTOCOL.md: commitInfo is the first action of an ICT commit
        out.append(first["commitInfo"])
    return out


def test_an_enabled_table_records_monotonic_timestamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), root,
                   configuration={"delta.enableInCommitTimestamps": "true"})
    assert "inCommitTimestamp" in (deltalake.DeltaTable(root).protocol().writer_features or [])
    table = DeltaTable.forPath(None, root)
    table.delete("id = 1")
    real_now = transaction._now_ms
    monkeypatch.setattr(transaction, "_now_ms", lambda: real_now() - 3_600_000)  # a clock an hour behind
    table.update("id = 2", {"id": "20"})
    monkeypatch.undo()
    dvengine.write(pa.table({"id": pa.array([4], pa.int64())}), root, mode="append")
    stamps = [int(str(i["inCommitTimestamp"])) for i in _commit_infos(root)]
    assert len(stamps) == 4 and all(b > a for a, b in itertools.pairwise(stamps))
    assert stamps[2] == stamps[1] + 1  # the late clock was overruled by the previous commit's time
    assert [h["timestamp"] for h in reversed(table.historyRecords())] == stamps
    assert load_snapshot(root, timestamp=stamps[1]).version == 1  # time travel by the commit's own time
    assert "delta.inCommitTimestampEnablementVersion" not in load_snapshot(root).configuration  # on from version 0
    assert sorted(r[0] for r in rows_delta_rs(root, ["id"])) == [3, 4, 20]
    assert sorted(r[0] for r in rows_duckdb(root, ["id"])) == [3, 4, 20]


def test_enabling_on_an_existing_table_records_where(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1], pa.int64())}), root)
    version = set_table_properties(root, {"delta.enableInCommitTimestamps": "true"})
    info = _commit_infos(root)[version]
    configuration = load_snapshot(root).configuration
    assert configuration["delta.inCommitTimestampEnablementVersion"] == str(version)
    assert configuration["delta.inCommitTimestampEnablementTimestamp"] == str(info["inCommitTimestamp"])
    assert "inCommitTimestamp" not in _commit_infos(root)[0]
    dvengine.write(pa.table({"id": pa.array([2], pa.int64())}), root, mode="append")
    after = _commit_infos(root)[version + 1]
    assert int(str(after["inCommitTimestamp"])) > int(str(info["inCommitTimestamp"]))
    assert "inCommitTimestamp" in (deltalake.DeltaTable(root).protocol().writer_features or [])
