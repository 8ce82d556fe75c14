"""The ``userMetadata`` and ``dataChange`` write options and the session conf
``spark.databricks.delta.commitInfo.userMetadata``, in-process (no JVM).

Truth is independent of dvengine: the raw ``_delta_log`` JSON (where ``userMetadata`` sits in
``commitInfo``, the ``dataChange`` flag of every add and remove), delta-rs (``history()``,
``load_cdf``, rows) and DuckDB's ``delta_scan`` (rows), an in-memory model of the rows, and a
streaming-style reader written here from Delta's ``DeltaSource`` rules (only ``add`` actions with
``dataChange=true`` are new data; a data-changing ``remove`` stops the stream).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as DeltaRsTable
from dml_helpers import folder_state
from interop import rows_delta_rs, rows_duckdb, sort_rows
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.commands.source_options import parse_write_options
from dvengine.commit.commit_info import CONF_USER_METADATA
from dvengine.commit.conf import env_key
from dvengine.errors import DataChangeFalseError, InvalidArgumentError, ReplaceWhereDataChangeFalseError

COLUMNS = ["id", "day", "v"]
ENV = env_key(CONF_USER_METADATA)


def _rows(ids: range, day: str) -> list[tuple[int, str, str]]:
    return [(i, day, f"v{i}") for i in ids]


def _table(rows: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table({c: [r[k] for r in rows] for k, c in enumerate(COLUMNS)})


def _commit_info(root: Path, version: int) -> dict[str, Any]:
    infos = [a["commitInfo"] for a in commit_actions(root, version) if "commitInfo" in a]
    assert len(infos) == 1
    return infos[0]  # type: ignore[no-any-return]


def _file_actions(root: Path, version: int) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, a[kind]) for a in commit_actions(root, version) for kind in ("add", "remove", "cdc") if kind in a]


def _partitioned(tmp_path: Path, model: list[tuple[int, str, str]], **kwargs: Any) -> Path:
    """A table partitioned by ``day`` with ``a`` in two files (two writes), ``b`` in one."""
    root = tmp_path / "t"
    a_rows = [r for r in model if r[1] == "a"]
    dvengine.write(_table([r for r in model if r[1] != "a"] + a_rows[:2]), str(root), partitionBy=["day"], **kwargs)
    dvengine.write(_table(a_rows[2:]), str(root), mode="append")
    return root


def stream_new_rows(root: Path, after: int) -> list[str]:
    """Delta's ``DeltaSource`` over the commits after ``after`` without ignoreChanges: the data
    files of ``add`` actions with ``dataChange=true`` are new data; a ``remove`` with
    ``dataChange=true`` fails the stream (DELTA_SOURCE_TABLE_IGNORE_CHANGES); everything with
    ``dataChange=false`` is skipped."""
    new: list[str] = []
    for version in range(after + 1, latest_version(root) + 1):
        for kind, action in _file_actions(root, version):
            if kind == "remove" and action["dataChange"]:
                raise RuntimeError(f"version {version} removes {action['path']}: a data change the stream cannot take")
            if kind == "add" and action["dataChange"]:
                new.append(action["path"])
    return new


# --- userMetadata ------------------------------------------------------------------------------


def test_user_metadata_option_is_logged_where_delta_puts_it_and_only_on_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    root = tmp_path / "t"
    dvengine.write(_table(_rows(range(3), "a")), str(root), userMetadata="ticket-42: backfill ü")
    dvengine.write(_table(_rows(range(3, 5), "a")), str(root), mode="append")
    dvengine.write(_table(_rows(range(5, 6), "a")), str(root), mode="append", userMetadata="")

    first = _commit_info(root, 0)
    assert first["userMetadata"] == "ticket-42: backfill ü"
    keys = list(first)
    # Jackson's field order of Delta's CommitInfo: ... operationMetrics, userMetadata, tags, engineInfo, txnId
    assert keys.index("operationMetrics") < keys.index("userMetadata") < keys.index("engineInfo")
    assert "userMetadata" not in _commit_info(root, 1)  # neither option nor conf: absent, not null
    assert _commit_info(root, 2)["userMetadata"] == ""  # an empty option is a value, as Delta's Some("")

    records = {r["version"]: r for r in DeltaTable.forPath(None, root).history()}
    assert records[0]["userMetadata"] == "ticket-42: backfill ü"
    assert "userMetadata" not in records[1] and records[2]["userMetadata"] == ""
    by_rs = {h["version"]: h for h in DeltaRsTable(str(root)).history()}
    assert by_rs[0]["userMetadata"] == "ticket-42: backfill ü" and "userMetadata" not in by_rs[1]


def test_the_session_conf_tags_every_commit_and_the_write_option_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta's getUserMetadata: the operation's own userMetadata, else the conf, for every commit
    (OptimisticTransaction.commit of any operation). Without a session the conf is read from
    its environment variable."""
    monkeypatch.setenv(ENV, "audit-run-7")
    root = tmp_path / "t"
    model = _rows(range(6), "a") + _rows(range(6, 9), "b")
    dvengine.write(_table(model[:3]), str(root), partitionBy=["day"])
    dvengine.write(_table(model[3:]), str(root), mode="append", userMetadata="the option")
    t = DeltaTable.forPath(None, root)
    t.delete("id = 1")
    t.update("id = 2", {"v": "'two'"})
    src = _table([(7, "b", "seven"), (20, "b", "v20")])
    t.alias("t").merge(src, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    t.optimize().executeCompaction()
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMNS (note STRING)")
    latest = latest_version(root)
    expected = {v: "audit-run-7" for v in range(latest + 1)}
    expected[1] = "the option"
    got = {v: _commit_info(root, v).get("userMetadata") for v in range(latest + 1)}
    assert got == expected
    ops = [_commit_info(root, v)["operation"] for v in range(latest + 1)]
    assert ops == ["WRITE", "WRITE", "DELETE", "UPDATE", "MERGE", "OPTIMIZE", "ADD COLUMNS"]

    monkeypatch.delenv(ENV)
    t.delete("id = 3")
    assert "userMetadata" not in _commit_info(root, latest + 1)  # unset again: nothing logged


# --- dataChange=false ------------------------------------------------------------------------


def test_a_data_change_false_partition_rewrite_changes_no_rows_and_no_feed(tmp_path: Path) -> None:
    """User-driven compaction: rewrite partition a into one file with replaceWhere. Every add and
    remove logs dataChange=false, the rows equal the model for every reader, and neither the
    change data feed (dvengine, delta-rs) nor a streaming reader sees a change."""
    model = _rows(range(5), "a") + _rows(range(5, 8), "b")
    root = _partitioned(tmp_path, model, configuration={"delta.enableChangeDataFeed": "true"})
    before = latest_version(root)
    a_rows = [r for r in model if r[1] == "a"]
    old_a = {p["path"] for k, p in _file_actions(root, 0) + _file_actions(root, 1) if k == "add" and p["path"].startswith("day=a")}
    assert len(old_a) == 2

    version = dvengine.write(_table(a_rows), str(root), mode="overwrite", replaceWhere="day = 'a'", dataChange="false",
                             userMetadata="compact day=a")

    assert version == before + 1
    actions = _file_actions(root, version)
    assert {p["path"] for k, p in actions if k == "remove"} == old_a
    adds = [p for k, p in actions if k == "add"]
    assert len(adds) == 1 and adds[0]["path"].startswith("day=a")
    assert not any(k == "cdc" for k, _ in actions) and not (root / "_change_data").exists()
    assert [p["dataChange"] for _, p in actions] == [False] * len(actions)
    info = _commit_info(root, version)
    assert info["operation"] == "WRITE" and info["operationParameters"]["predicate"] == "day = 'a'"
    assert info["userMetadata"] == "compact day=a" and info["isBlindAppend"] is False

    expected = sort_rows(model)
    assert sort_rows(rows_delta_rs(root, COLUMNS)) == expected
    assert sort_rows(rows_duckdb(root, COLUMNS)) == expected
    assert DeltaTable.forPath(None, root).changes(version, version).num_rows == 0
    assert pa.table(DeltaRsTable(str(root)).load_cdf(starting_version=version).read_all()).num_rows == 0
    assert stream_new_rows(root, before) == []

    # The same rewrite as a data change: the feed shows it and the stream refuses it (the test can fail).
    again = dvengine.write(_table(a_rows), str(root), mode="overwrite", replaceWhere="day = 'a'")
    assert DeltaTable.forPath(None, root).changes(again, again).num_rows == 2 * len(a_rows)
    with pytest.raises(RuntimeError, match="data change"):
        stream_new_rows(root, version)


def test_data_change_false_append_and_full_overwrite_flag_every_file(tmp_path: Path) -> None:
    model = _rows(range(4), "a") + _rows(range(4, 6), "b")
    root = _partitioned(tmp_path, model)
    appended = _rows(range(10, 12), "b")
    v1 = dvengine.write(_table(appended), str(root), mode="append", dataChange=False)
    assert [(k, p["dataChange"]) for k, p in _file_actions(root, v1)] == [("add", False)]
    assert _commit_info(root, v1)["isBlindAppend"] is True  # OptimisticTransaction: onlyAddFiles && !dependsOnFiles
    assert stream_new_rows(root, v1 - 1) == []
    model += appended
    assert sort_rows(rows_delta_rs(root, COLUMNS)) == sort_rows(model)

    v2 = dvengine.write(_table(model), str(root), mode="overwrite", dataChange="FALSE")
    actions = _file_actions(root, v2)
    assert {k for k, _ in actions} == {"add", "remove"} and all(p["dataChange"] is False for _, p in actions)
    assert sort_rows(rows_duckdb(root, COLUMNS)) == sort_rows(model)
    assert stream_new_rows(root, v1) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"mode": "append", "dataChange": "maybe"}, InvalidArgumentError,
         "Invalid value 'maybe' for option 'dataChange', must be 'true' or 'false'"),
        ({"mode": "append", "dataChange": 0}, InvalidArgumentError, "option 'dataChange'"),
        ({"mode": "append", "userMetadata": 5}, InvalidArgumentError, "userMetadata"),
        ({"mode": "overwrite", "replaceWhere": "day = 'a' AND id > 1", "dataChange": False},
         ReplaceWhereDataChangeFalseError, r"data filters when 'dataChange' is set to false\. Filters: `id` > 1"),
        ({"mode": "append", "mergeSchema": True, "dataChange": False, "extra": True}, DataChangeFalseError,
         "Attempted operation: 'Change the Delta table schema'"),
        ({"mode": "overwrite", "overwriteSchema": True, "dataChange": False, "extra": True}, DataChangeFalseError,
         "'Overwrite the Delta table schema or change the partition schema'"),
        ({"mode": "overwrite", "overwriteSchema": True, "partitionBy": ["v"], "dataChange": False}, DataChangeFalseError,
         "DELTA_DATA_CHANGE_FALSE"),
    ],
)
def test_refused_writes_leave_the_table_exactly_as_it_was(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    model = _rows(range(4), "a") + _rows(range(4, 6), "b")
    root = _partitioned(tmp_path, model)
    state = folder_state(root)
    data = _table(_rows(range(2), "a"))
    if kwargs.pop("extra", False):
        data = data.append_column("extra", pa.array(["x"] * data.num_rows))
    with pytest.raises(error, match=message):
        dvengine.write(data, str(root), **kwargs)
    assert folder_state(root) == state
    assert sort_rows(rows_delta_rs(root, COLUMNS)) == sort_rows(model)


# Delta reads dataChange with DeltaOptionParser.toBoolean (DeltaOptions.scala): Scala's
# String.toBoolean, i.e. Java's equalsIgnoreCase against "true" / "false": no trimming, and Java's
# per-char case mapping (U+017F, long s, upper-cases to 'S', so "falſe" equals "false" there).
UNTRIMMED = [" false", "false ", "\tfalse", "false\n", " true", "true ", "", "no", "0", "f", "falsey", "ｆａｌｓｅ"]
JAVA_CASE = [("TRUE", True), ("True", True), ("tRuE", True), ("FALSE", False), ("False", False), ("fAlSe", False),
             ("falſe", False)]


@pytest.mark.parametrize("value", UNTRIMMED)
def test_data_change_values_delta_refuses_are_refused_untrimmed(tmp_path: Path, value: str) -> None:
    """DELTA_ILLEGAL_OPTION naming the option and the value as given, and the table untouched."""
    model = _rows(range(4), "a") + _rows(range(4, 6), "b")
    root = _partitioned(tmp_path, model)
    state = folder_state(root)
    message = f"Invalid value '{value}' for option 'dataChange', must be 'true' or 'false' (DELTA_ILLEGAL_OPTION)"
    with pytest.raises(InvalidArgumentError) as caught:
        dvengine.write(_table(_rows(range(2), "a")), str(root), mode="append", dataChange=value)
    assert str(caught.value) == message
    with pytest.raises(InvalidArgumentError) as caught:
        parse_write_options({"dataChange": value}, str(root), "append", None)  # format("delta").option(...)
    assert str(caught.value) == message
    assert folder_state(root) == state


@pytest.mark.parametrize(("value", "expected"), JAVA_CASE)
def test_data_change_values_are_matched_as_java_equals_ignore_case(tmp_path: Path, value: str, expected: bool) -> None:
    """The accepted spellings log the flag they mean on every file action (raw _delta_log JSON)."""
    model = _rows(range(4), "a") + _rows(range(4, 6), "b")
    root = _partitioned(tmp_path, model)
    version = dvengine.write(_table(_rows(range(10, 12), "b")), str(root), mode="append", dataChange=value)
    assert [(k, p["dataChange"]) for k, p in _file_actions(root, version)] == [("add", expected)]
    assert parse_write_options({"DATACHANGE": value}, str(root), "append", None).data_change is expected


def test_data_change_false_cannot_create_a_table(tmp_path: Path) -> None:
    root = tmp_path / "new"
    with pytest.raises(DataChangeFalseError, match="Attempted operation: 'Create a Delta table'") as caught:
        dvengine.write(_table(_rows(range(2), "a")), str(root), dataChange="false")
    assert caught.value.delta_error_class == "DELTA_DATA_CHANGE_FALSE"
    assert not (root / "_delta_log").exists() or not any((root / "_delta_log").iterdir())
    assert not root.exists() or not [p for p in root.rglob("*.parquet")]


def test_format_delta_options_are_parsed_as_delta_names_them() -> None:
    request = parse_write_options({"USERMETADATA": "x y", "DataChange": "False", "path": "/t"}, None, "append", None)
    assert request.user_metadata == "x y" and request.data_change is False
    plain = parse_write_options({}, "/t", "append", None)
    assert plain.user_metadata is None and plain.data_change is True
    with pytest.raises(InvalidArgumentError, match="'dataChange'"):
        parse_write_options({"dataChange": "no"}, "/t", "append", None)


def test_history_json_round_trip_keeps_user_metadata_text(tmp_path: Path) -> None:
    """A userMetadata holding JSON is logged as a string, not parsed (Delta's Option[String])."""
    root = tmp_path / "t"
    payload = json.dumps({"job": "nightly", "run": 3})
    dvengine.write(_table(_rows(range(2), "a")), str(root), userMetadata=payload)
    assert _commit_info(root, 0)["userMetadata"] == payload
    assert DeltaTable.forPath(None, root).history()[0]["userMetadata"] == payload
