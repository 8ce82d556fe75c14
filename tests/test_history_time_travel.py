"""History and time travel after a sequence of writes, Spark deletes and updates.

Truth: an in-memory model of the rows recorded after each commit. Every version is read back by
number and by its history timestamp through dvengine's Arrow and Spark readers and delta-rs;
history itself is checked against what was done and against delta-rs's history().
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_concurrency_support import append, core_update, create_table, rows_of

from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.errors import InvalidArgumentError, TableNotFoundError, VersionNotFoundError
from dvengine.maintenance import history

Row = tuple[Any, ...]


def _spark_rows(spark: Any, root: Path, **at: Any) -> list[Row]:
    return sorted(tuple(r) for r in DeltaTable.forPath(spark, root).toDF(**at).select("id", "v").collect())


def _delta_rs_rows(root: Path, version: int) -> list[Row]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    reader = QueryBuilder().register("t", RsTable(str(root), version=version)).execute("select id, v from t")
    table = reader.read_all()
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


def _build(spark: Any, root: Path) -> dict[int, list[Row]]:
    """Versions 0..5 with a model of the rows after each."""
    model = {i: i * 10 for i in range(30)}
    states: dict[int, list[Row]] = {}
    v = create_table(root, [pa.table({"id": list(range(15)), "v": [i * 10 for i in range(15)]}),
                            pa.table({"id": list(range(15, 30)), "v": [i * 10 for i in range(15, 30)]})])
    states[v] = sorted(model.items())
    table = DeltaTable.forPath(spark, root)
    steps: list[tuple[str, Any]] = [
        ("delete", ("id < 5", "dv")),
        ("append", pa.table({"id": [100, 101, 102], "v": [1, 2, 3]})),
        ("delete", ("id % 2 = 0", "rewrite")),
        ("update", ("id = 7", pa.table({"id": [7], "v": [-7]}))),
        ("delete", ("v < 5", "dv")),
    ]
    for kind, arg in steps:
        time.sleep(0.01)  # distinct commit timestamps, so every version is reachable by timestamp
        if kind == "delete":
            cond, mode = arg
            metrics = table.deleteMetrics(cond, mode=mode)
            v = metrics["version"]
            predicate = {"id < 5": lambda i, x: i < 5, "id % 2 = 0": lambda i, x: i % 2 == 0, "v < 5": lambda i, x: x < 5}[cond]
            doomed = [i for i, x in model.items() if predicate(i, x)]
            assert metrics["numDeletedRows"] == len(doomed)
            for i in doomed:
                del model[i]
        elif kind == "append":
            v = append(root, arg)
            model.update(zip(arg.column("id").to_pylist(), arg.column("v").to_pylist()))
        else:
            cond, new = arg
            updated = core_update(root, cond, new)
            assert updated is not None
            v = updated
            model[7] = -7
        states[v] = sorted(model.items())
    assert sorted(states) == list(range(6))
    return states


def test_time_travel_by_version_and_timestamp_matches_model(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    states = _build(spark, root)
    records = history(str(root))
    timestamps = {r["version"]: r["timestamp"] for r in records}
    assert sorted(timestamps) == list(range(6))
    for version, expected in states.items():
        assert rows_of(root, version=version) == expected, f"arrow at version {version}"
        assert _spark_rows(spark, root, version=version) == expected, f"spark at version {version}"
        assert _delta_rs_rows(root, version) == expected, f"delta-rs at version {version}"
        ts = timestamps[version]
        assert rows_of(root, timestamp=ts) == expected, f"arrow as of the commit time of {version}"
        assert _spark_rows(spark, root, timestamp=ts) == expected
        if version + 1 in timestamps:  # just before the next commit: still this version
            assert rows_of(root, timestamp=timestamps[version + 1] - 1) == expected
    assert rows_of(root, timestamp=timestamps[5] + 3_600_000) == states[5]
    with pytest.raises(VersionNotFoundError):
        rows_of(root, timestamp=timestamps[0] - 1)
    with pytest.raises(VersionNotFoundError):
        rows_of(root, version=6)

    # History: newest first, what was done, Delta's field names; agrees with delta-rs.
    assert [r["version"] for r in records] == [5, 4, 3, 2, 1, 0]
    assert [r["operation"] for r in records] == ["DELETE", "UPDATE", "DELETE", "WRITE", "DELETE", "CREATE TABLE"]
    for r in records:
        assert list(r)[:2] == ["version", "timestamp"]
        assert r["engineInfo"].startswith("dvengine/")
        if r["version"] > 0:
            assert r["readVersion"] == r["version"] - 1
        assert r["isolationLevel"] == "WriteSerializable"
    assert records[3]["isBlindAppend"] is True and records[5 - 1]["isBlindAppend"] is False
    assert records[-2]["operationMetrics"]["numDeletedRows"] == "5"
    assert json.loads(records[-2]["operationParameters"]["predicate"]) == ["`id` < 5"] or "id" in records[-2]["operationParameters"]["predicate"]
    assert [r["version"] for r in history(str(root), limit=2)] == [5, 4]
    assert history(str(root), limit=0) == []

    from deltalake import DeltaTable as RsTable

    theirs = RsTable(str(root)).history()
    assert [(h["version"], h["timestamp"], h["operation"]) for h in theirs] == [
        (r["version"], r["timestamp"], r["operation"]) for r in records
    ]


def test_history_errors_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "t"
    create_table(root, [pa.table({"id": [1, 2], "v": [1, 2]})])
    append(root, pa.table({"id": [3], "v": [3]}))
    with pytest.raises(InvalidArgumentError):
        history(str(root), limit=-1)
    with pytest.raises(TableNotFoundError):
        history(str(tmp_path / "nothing"))

    parser = argparse.ArgumentParser(prog="dvengine")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["history", str(root), "--json", "--limit", "1"])
    assert args.handler(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["version"] for r in out] == [1] and out[0]["operation"] == "WRITE"
    args = parser.parse_args(["history", str(root)])
    assert args.handler(args) == 0
    text = capsys.readouterr().out
    assert "CREATE TABLE" in text and "WRITE" in text
