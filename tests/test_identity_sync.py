"""ALTER TABLE ... ALTER COLUMN c SYNC IDENTITY, against Delta's AlterTableChangeColumnDeltaCommand with
syncIdentity (IdentityColumn.syncIdentity / updateToValidHighWaterMark).

The expected mark comes from a model written here from Delta's rules, fed with the live values
delta-rs reads (deletion vectors applied), not from dvengine's reader or its rounding code; the
commit is checked in the raw log."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from math import ceil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable, IdentityGenerator
from dvengine.errors import InvalidArgumentError, SqlParseError, UnsupportedFeatureError
from dvengine.log import latest_version
from dvengine.maintenance.history import history

LOWER_CONF_ENV = "SPARK_DATABRICKS_DELTA_IDENTITYCOLUMN_ALLOWSYNCIDENTITYTOLOWERHIGHWATERMARK_ENABLED"


def _create(root: str, always: bool, start: int, step: int) -> None:
    spec = IdentityGenerator(start=start, step=step)
    builder = DeltaTable.create(None).location(root)
    if always:
        builder = builder.addColumn("id", "bigint", generatedAlwaysAs=spec)
    else:
        builder = builder.addColumn("id", "bigint", generatedByDefaultAs=spec)
    builder.addColumn("v", "string").execute()


def _commit(root: str, version: int) -> list[dict[str, Any]]:
    text = (Path(root) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def _schema_at(root: str, version: int) -> dict[str, Any]:
    """The schema in force at ``version``, from the raw commits (the last metaData at or before it)."""
    schema: dict[str, Any] | None = None
    for v in range(version + 1):
        for action in _commit(root, v):
            if "metaData" in action:
                schema = json.loads(action["metaData"]["schemaString"])
    assert schema is not None
    return schema


def _id_field(schema: dict[str, Any]) -> dict[str, Any]:
    field: dict[str, Any] = next(f for f in schema["fields"] if f["name"] == "id")
    return field


def _live_ids(root: str) -> list[int]:
    rows = rows_delta_rs(root, ["id", "v"])
    assert rows == rows_duckdb(root, ["id", "v"])
    return [r[0] for r in rows if r[0] is not None]


def _model_mark(start: int, step: int, old: int | None, live: list[int], lower: bool = False) -> int | None:
    """Delta's syncIdentity: max (min for a negative step) of the live values, onto the grid
    start + k * step (k >= 0) in the step's direction, never behind the old mark unless lowering is
    allowed; a candidate before the start, or no value, keeps the old mark."""
    if not live:
        return old
    sign = 1 if step > 0 else -1
    candidate = max(live) if step > 0 else min(live)
    # onto the grid start + k * step, k rounded up: from before the start (k < 0) that is towards
    # the start without passing it, as Java's truncating division gives
    rounded = start + step * ceil(Fraction(candidate - start, step))
    new = rounded if old is None or lower else (old if (old - rounded) * sign >= 0 else rounded)
    bad_old = old is not None and (old - start) * sign < 0  # a stored mark before the start: replaced
    if (candidate - start) * sign < 0 and not bad_old:
        return old
    return new


def _sync(root: str, column: str = "id", form: str = "ALTER COLUMN") -> int:
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` {form} {column} SYNC IDENTITY")
    return latest_version(root)


@pytest.mark.parametrize(("start", "step", "given", "deleted"), [
    (10, 5, [102, 7, 48, 500], 500),      # off-grid beyond the mark; the largest is deleted (a DV)
    (-1, -3, [-50, 4, -20, -400], -400),  # negative step: the smallest counts
    (0, 7, [70, 3], None),                # on the grid already
])
def test_sync_moves_the_mark_past_given_values(tmp_path: Path, start: int, step: int, given: list[int],
                                               deleted: int | None) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False, start=start, step=step)
    dvengine.write(pa.table({"v": ["a", "b"]}), root, mode="append")
    dvengine.write(pa.table({"id": pa.array(given, pa.int64()), "v": [f"g{i}" for i in range(len(given))]}), root,
                   mode="append")
    if deleted is not None:
        DeltaTable.forPath(None, root).delete(f"id = {deleted}")
    before = latest_version(root)
    old_field = _id_field(_schema_at(root, before))
    live = _live_ids(root)
    assert deleted not in live
    version = _sync(root)
    assert version == before + 1
    actions = _commit(root, version)
    assert [next(iter(a)) for a in actions] == ["commitInfo", "metaData"]
    info = actions[0]["commitInfo"]
    assert info["operation"] == "CHANGE COLUMN"
    assert info["operationParameters"] == {"column": json.dumps(
        {"name": "id", "type": "long", "nullable": True, "metadata": old_field["metadata"]}, separators=(",", ":"))}
    assert info["tags"] == {"delta.identity.schemaUpdate": "true"}
    assert info["isBlindAppend"] is False and info["readVersion"] == before
    mark = _id_field(json.loads(actions[1]["metaData"]["schemaString"]))["metadata"]["delta.identity.highWaterMark"]
    expected = _model_mark(start, step, old_field["metadata"].get("delta.identity.highWaterMark"), live)
    assert type(mark) is int and mark == expected
    rs_fields = json.loads(deltalake.DeltaTable(root).schema().to_json())["fields"]
    assert next(f for f in rs_fields if f["name"] == "id")["metadata"]["delta.identity.highWaterMark"] == mark
    assert (mark - start) % step == 0  # on the grid
    assert sort_rows([(i,) for i in live]) == sort_rows([(i,) for i in _live_ids(root)])  # data unchanged
    dvengine.write(pa.table({"v": ["next"]}), root, mode="append")
    rows = rows_delta_rs(root, ["id", "v"])
    assert rows == rows_duckdb(root, ["id", "v"])
    assert [r[0] for r in rows if r[1] == "next"] == [mark + step]
    assert len({r[0] for r in rows}) == len(rows)  # the next value repeats none


def test_sync_keeps_the_mark_unless_lowering_is_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False, start=1, step=2)
    dvengine.write(pa.table({"v": ["a", "b", "c", "d"]}), root, mode="append")  # 1, 3, 5, 7; mark 7
    DeltaTable.forPath(None, root).delete("id >= 5")
    version = _sync(root)
    assert _id_field(_schema_at(root, version))["metadata"]["delta.identity.highWaterMark"] == 7
    assert [next(iter(a)) for a in _commit(root, version)] == ["commitInfo", "metaData"]  # committed all the same
    monkeypatch.setenv(LOWER_CONF_ENV, "true")
    version = _sync(root, form="CHANGE")
    mark = _id_field(_schema_at(root, version))["metadata"]["delta.identity.highWaterMark"]
    assert mark == _model_mark(1, 2, 7, _live_ids(root), lower=True) == 3
    monkeypatch.setenv(LOWER_CONF_ENV, "maybe")
    with pytest.raises(InvalidArgumentError, match="allowSyncIdentityToLowerHighWaterMark"):
        _sync(root)
    assert latest_version(root) == version


def test_sync_without_values_or_before_the_start_keeps_the_field(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False, start=10, step=1)
    version = _sync(root, form="ALTER")  # empty table: no mark to set
    assert "delta.identity.highWaterMark" not in _id_field(_schema_at(root, version))["metadata"]
    dvengine.write(pa.table({"id": pa.array([3, None], pa.int64()), "v": ["x", "y"]}), root, mode="append")
    version = _sync(root)
    assert "delta.identity.highWaterMark" not in _id_field(_schema_at(root, version))["metadata"]
    dvengine.write(pa.table({"v": ["n"]}), root, mode="append")
    assert sorted(i for i in _live_ids(root)) == [3, 10]


def test_sync_on_generated_always_and_reads_every_version(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, always=True, start=100, step=10)
    dvengine.write(pa.table({"v": ["a", "b", "c"]}), root, mode="append")
    version = _sync(root)
    field = _id_field(_schema_at(root, version))
    assert field["metadata"]["delta.identity.highWaterMark"] == 120
    assert field["metadata"]["delta.identity.allowExplicitInsert"] is False
    for v in range(version + 1):
        assert deltalake.DeltaTable(root, version=v).version() == v


@pytest.mark.parametrize(("column", "error", "match"), [
    ("v", UnsupportedFeatureError, "DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN"),
    ("nope", InvalidArgumentError, "no column 'nope'"),
    ("s.x", UnsupportedFeatureError, "non IDENTITY"),
])
def test_refusals_leave_the_table_as_it_was(tmp_path: Path, column: str, error: type[Exception], match: str) -> None:
    root = str(tmp_path / "t")
    (DeltaTable.create(None).location(root)
     .addColumn("id", "bigint", generatedByDefaultAs=IdentityGenerator())
     .addColumn("v", "string").addColumn("s", "struct<x:bigint>").execute())
    dvengine.write(pa.table({"id": pa.array([50], pa.int64()), "v": ["a"], "s": [{"x": 1}]}), root, mode="append")
    log = sorted(p.name for p in (Path(root) / "_delta_log").iterdir())
    with pytest.raises(error, match=match):
        _sync(root, column)
    assert sorted(p.name for p in (Path(root) / "_delta_log").iterdir()) == log


@pytest.mark.parametrize("text", [
    "ALTER TABLE delta.`{root}` ALTER COLUMN id SYNC IDENTITY now",
    "ALTER TABLE delta.`{root}` ALTER COLUMN SYNC IDENTITY",
])
def test_malformed_statements_are_parse_errors(tmp_path: Path, text: str) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False, start=1, step=1)
    with pytest.raises(SqlParseError):
        dvengine.sql(None, text.format(root=root))
    assert latest_version(root) == 0


def test_sync_through_a_session_reads_its_conf(spark: Any, tmp_path: Path) -> None:
    """On a SparkSession the statement runs in-process too, and the lowering conf is the session's."""
    root = str(tmp_path / "t")
    _create(root, always=False, start=1, step=1)
    dvengine.write(pa.table({"v": ["a", "b", "c"]}), root, mode="append")  # 1, 2, 3; mark 3
    DeltaTable.forPath(None, root).delete("id = 3")
    spark.conf.set("spark.databricks.delta.identityColumn.allowSyncIdentityToLowerHighWaterMark.enabled", "true")
    try:
        dvengine.sql(spark, f"ALTER TABLE delta.`{root}` CHANGE COLUMN id SYNC IDENTITY")
    finally:
        spark.conf.unset("spark.databricks.delta.identityColumn.allowSyncIdentityToLowerHighWaterMark.enabled")
    version = latest_version(root)
    assert _id_field(_schema_at(root, version))["metadata"]["delta.identity.highWaterMark"] == 2
    assert [r["operation"] for r in history(root, 1)] == ["CHANGE COLUMN"]


@pytest.mark.parametrize(("start", "step", "bad", "given", "expected"), [
    (10, 1, 5, [7, 3], 7),       # 5 -> 7, still before the start but better
    (10, 5, 0, [3, -20], 5),     # 3 rounds to 5 (towards the start, not past it)
    (-10, -4, -2, [-3, 40], -6),  # negative step: -3 rounds to -6
])
def test_a_mark_before_the_start_is_replaced_by_a_better_one(tmp_path: Path, start: int, step: int, bad: int,
                                                             given: list[int], expected: int) -> None:
    """Delta's tableHasBadHighWaterMark: a stored mark before the start is updated even when the
    candidate is before the start too, never moved back."""
    root = str(tmp_path / "t")
    _create(root, always=False, start=start, step=step)
    dvengine.write(pa.table({"id": pa.array(given, pa.int64()), "v": [str(g) for g in given]}), root, mode="append")
    log = Path(root) / "_delta_log"
    version = latest_version(root)
    meta = next(a["metaData"] for v in range(version + 1) for a in _commit(root, v) if "metaData" in a)
    schema = json.loads(meta["schemaString"])
    _id_field(schema)["metadata"]["delta.identity.highWaterMark"] = bad
    info = {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES", "operationParameters": {}}
    (log / f"{version + 1:020d}.json").write_text(
        json.dumps({"commitInfo": info}) + "\n" + json.dumps({"metaData": {**meta, "schemaString": json.dumps(schema)}}) + "\n")
    synced = _sync(root)
    mark = _id_field(_schema_at(root, synced))["metadata"]["delta.identity.highWaterMark"]
    assert mark == _model_mark(start, step, bad, _live_ids(root)) == expected
