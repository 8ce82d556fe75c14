"""Dynamic partition overwrite (``partitionOverwriteMode=dynamic``) without Spark, as Delta's ``WriteIntoDelta``.

Every scenario is checked against independent truth: an in-memory model of the rows (the table's
rows outside the written partitions, plus the written rows), the raw ``_delta_log`` JSON replayed
here without dvengine (which files were live, with which DV, and exactly which the commit removes
and adds, with Delta's ``operationParameters`` / ``operationMetrics``), and the rows delta-rs
(QueryBuilder, DV-aware) and DuckDB's ``delta_scan`` read. Refusals are Delta's error classes and
leave the table byte-for-byte as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dpo_support import assert_readers, commit, files_state, live_files, seed, table
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.commands.partition_overwrite import CONF_DYNAMIC_ENABLED, CONF_PARTITION_OVERWRITE_MODE
from dvengine.commands.source_options import parse_write_options
from dvengine.commands.write import finish_write, plan_write
from dvengine.commands.write_options import resolve_write_options
from dvengine.commit.conf import env_key
from dvengine.engine.local.write_api import align_to_table
from dvengine.engine.local.writer import write_data_files
from dvengine.errors import ConcurrentDeleteReadError, InvalidArgumentError
from dvengine.protocol.schema import from_arrow_schema


def test_replaces_only_the_written_partitions_files_dvs_and_all(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root)
    before = latest_version(root)
    live = live_files(root, before)
    assert {f["partitionValues"]["p"] for f in live.values() if f.get("deletionVector")} == {"a", "b"}
    new = [(100, "a", 1), (101, "a", 2), (102, "d", 3), (103, None, 4)]

    version = dvengine.write(table(new), str(root), mode="overwrite", partitionOverwriteMode="dynamic")

    assert version == before + 1
    written = {r[1] for r in new}
    model = [r for r in model if r[1] not in written] + new
    assert_readers(root, model)
    info, removes, adds = commit(root, version)
    replaced = {path: f for path, f in live.items() if f["partitionValues"]["p"] in written}
    assert {r["path"] for r in removes} == set(replaced)  # a (with its DV) and NULL; b (DV) and c untouched
    assert any(f.get("deletionVector") for f in replaced.values())
    for r in removes:  # whole files: the remove names the live file's DV, so the DV goes with it
        assert r["deletionVector"] == replaced[r["path"]].get("deletionVector") if "deletionVector" in r else \
            replaced[r["path"]].get("deletionVector") is None
        assert r["dataChange"] is True and r["partitionValues"] == replaced[r["path"]]["partitionValues"]
    assert {a["partitionValues"]["p"] for a in adds} == written
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == len(new)
    assert info["operation"] == "WRITE"
    assert info["operationParameters"] == {"mode": "Overwrite", "partitionBy": "[]", "isDynamicPartitionOverwrite": True}
    metrics = info["operationMetrics"]
    assert metrics["numRemovedFiles"] == str(len(removes))
    assert metrics["numRemovedBytes"] == str(sum(replaced[r["path"]]["size"] for r in removes))
    assert metrics["numFiles"] == str(len(adds)) and metrics["numOutputRows"] == str(len(new))
    assert info["isBlindAppend"] is False


def test_static_overwrite_and_a_static_option_over_a_dynamic_conf_replace_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    seed(root)
    monkeypatch.setenv(env_key(CONF_PARTITION_OVERWRITE_MODE), "dynamic")
    before = latest_version(root)
    live = live_files(root, before)
    new = [(100, "a", 1)]
    version = dvengine.write(table(new), str(root), mode="overwrite", partitionOverwriteMode="Static")
    assert_readers(root, new)
    info, removes, _ = commit(root, version)
    assert {r["path"] for r in removes} == set(live)
    assert "isDynamicPartitionOverwrite" not in info["operationParameters"]
    assert info["operationMetrics"]["numRemovedFiles"] == str(len(live))  # logged for static overwrites too


def test_the_session_conf_turns_it_on_and_appends_log_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = seed(root)
    monkeypatch.setenv(env_key(CONF_PARTITION_OVERWRITE_MODE), "DYNAMIC")
    new = [(100, "c", 1)]
    version = dvengine.write(table(new), str(root), mode="overwrite")
    model = [r for r in model if r[1] != "c"] + new
    assert_readers(root, model)
    assert commit(root, version)[0]["operationParameters"]["isDynamicPartitionOverwrite"] is True
    # Delta logs the flag whenever the mode resolves to dynamic, an append included; the append adds only.
    version = dvengine.write(table([(101, "c", 2)]), str(root), mode="append")
    info, removes, _ = commit(root, version)
    assert info["operationParameters"] == {"mode": "Append", "partitionBy": "[]", "isDynamicPartitionOverwrite": True}
    assert removes == []
    assert_readers(root, [*model, (101, "c", 2)])


def test_an_empty_input_replaces_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root)
    version = dvengine.write(table([]), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    info, removes, adds = commit(root, version)
    assert removes == [] and adds == []
    assert info["operationMetrics"]["numRemovedFiles"] == "0" and info["operationMetrics"]["numFiles"] == "0"
    assert_readers(root, model)


def test_an_unpartitioned_table_is_overwritten_whole_and_ignores_a_bad_value(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(table([(1, "a", 1), (2, "b", 2)]), str(root))
    version = dvengine.write(table([(3, "a", 3)]), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    info, removes, _ = commit(root, version)
    assert len(removes) == 1 and info["operationParameters"]["isDynamicPartitionOverwrite"] is True
    assert_readers(root, [(3, "a", 3)])
    # Delta never evaluates the mode of an unpartitioned write: a bad value is ignored, no flag logged
    version = dvengine.write(table([(4, "b", 4)]), str(root), mode="overwrite", partitionOverwriteMode="adaptive")
    assert "isDynamicPartitionOverwrite" not in commit(root, version)[0]["operationParameters"]
    assert_readers(root, [(4, "b", 4)])


def test_a_new_partitioned_table_written_in_dynamic_mode(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = [(1, "a", 1), (2, "b", 2)]
    version = dvengine.write(table(rows), str(root), mode="overwrite", partitionBy=["p"], partitionOverwriteMode="dynamic")
    info, removes, adds = commit(root, version)
    assert version == 0 and removes == [] and len(adds) == 2
    assert info["operationParameters"] == {"mode": "Overwrite", "partitionBy": '["p"]', "isDynamicPartitionOverwrite": True}
    assert_readers(root, rows)


def test_replace_where_with_a_dynamic_conf_replaces_by_the_predicate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = seed(root)
    monkeypatch.setenv(env_key(CONF_PARTITION_OVERWRITE_MODE), "dynamic")
    new = [(100, "a", 1)]
    version = dvengine.write(table(new), str(root), mode="overwrite", replaceWhere="p = 'a' OR p = 'b'")
    model = [r for r in model if r[1] not in ("a", "b")] + new  # b replaced too: the predicate wins
    assert_readers(root, model)
    params = commit(root, version)[0]["operationParameters"]
    assert params["predicate"] == "p = 'a' OR p = 'b'" and params["isDynamicPartitionOverwrite"] is True


@pytest.mark.parametrize(
    ("kwargs", "env", "error_class"),
    [
        ({"partitionOverwriteMode": "adaptive"}, {}, "DELTA_ILLEGAL_OPTION"),
        ({"partitionOverwriteMode": "dynamic "}, {}, "DELTA_ILLEGAL_OPTION"),  # no trimming, as Delta
        ({"partitionOverwriteMode": "dynamic", "replaceWhere": "p = 'a'"}, {}, "DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE"),
        ({"partitionOverwriteMode": "dynamic", "overwriteSchema": True, "partitionBy": ["p"]}, {},
         "DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE"),
        ({}, {CONF_PARTITION_OVERWRITE_MODE: "dynamic", CONF_DYNAMIC_ENABLED: "false"}, "DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED"),
        ({"partitionOverwriteMode": "DYNAMIC"}, {CONF_DYNAMIC_ENABLED: "false"}, "DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED"),
        ({}, {CONF_PARTITION_OVERWRITE_MODE: "sometimes"}, CONF_PARTITION_OVERWRITE_MODE),
        ({"partitionOverwriteMode": True}, {}, "partitionOverwriteMode"),
    ],
)
def test_refusals_are_typed_and_leave_the_table_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: dict[str, str], error_class: str
) -> None:
    root = tmp_path / "t"
    model = seed(root)
    before = files_state(root)
    for key, value in env.items():
        monkeypatch.setenv(env_key(key), value)
    with pytest.raises(InvalidArgumentError, match=error_class):
        dvengine.write(table([(100, "a", 1)]), str(root), mode="overwrite", **kwargs)
    assert files_state(root) == before
    assert_readers(root, model)


def test_an_append_to_a_partitioned_table_refuses_a_bad_value_as_delta_does(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root)
    before = files_state(root)
    with pytest.raises(InvalidArgumentError, match="DELTA_ILLEGAL_OPTION"):
        dvengine.write(table([(100, "a", 1)]), str(root), mode="append", partitionOverwriteMode="adaptive")
    assert files_state(root) == before
    with pytest.raises(InvalidArgumentError, match="DELTA_ILLEGAL_OPTION"):  # a new table too
        dvengine.write(table([(1, "a", 1)]), str(tmp_path / "new"), partitionBy=["p"], partitionOverwriteMode="x")
    assert not (tmp_path / "new").exists() or not list((tmp_path / "new").rglob("*.json"))
    assert_readers(root, model)


def test_disabled_conf_ignores_a_bad_value_and_overwrites_statically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    seed(root)
    monkeypatch.setenv(env_key(CONF_DYNAMIC_ENABLED), "false")
    version = dvengine.write(table([(100, "a", 1)]), str(root), mode="overwrite", partitionOverwriteMode="adaptive")
    assert "isDynamicPartitionOverwrite" not in commit(root, version)[0]["operationParameters"]
    assert_readers(root, [(100, "a", 1)])


def test_an_append_only_table_refuses_it_as_the_static_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(table([(1, "a", 1), (2, "b", 2)]), str(root), partitionBy=["p"], configuration={"delta.appendOnly": "true"})
    model = [(1, "a", 1), (2, "b", 2)]
    before = files_state(root)
    with pytest.raises(InvalidArgumentError, match="append-only"):
        dvengine.write(table([(3, "a", 3)]), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    assert files_state(root) == before
    assert_readers(root, model)


def test_partition_values_compare_typed_and_null_matches_null(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("d", pa.date32())])
    rows = [{"id": 1, "n": 1, "d": "2024-01-01"}, {"id": 2, "n": None, "d": None}, {"id": 3, "n": 2, "d": "2024-01-01"},
            {"id": 4, "n": 1, "d": "2024-01-02"}]

    def typed(items: list[dict[str, Any]]) -> pa.Table:
        import datetime as dt

        return pa.Table.from_pylist(
            [{**r, "d": None if r["d"] is None else dt.date.fromisoformat(r["d"])} for r in items], schema=schema
        )

    dvengine.write(typed(rows), str(root), partitionBy=["n", "d"])
    new = [{"id": 10, "n": 1, "d": "2024-01-01"}, {"id": 11, "n": None, "d": None}]
    version = dvengine.write(typed(new), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    _, removes, _ = commit(root, version)
    assert sorted(r["partitionValues"]["n"] or "" for r in removes) == ["", "1"]  # (1, 01-01) and (NULL, NULL)
    got = sorted(r["id"] for r in DeltaTable.forPath(None, str(root)).toArrow().to_pylist())
    assert got == [3, 4, 10, 11]
    assert sorted(r[0] for r in rows_delta_rs(root, ["id"])) == got
    assert sorted(r[0] for r in rows_duckdb(root, ["id"])) == got


def test_change_data_feed_reads_the_replaced_partitions_as_deletes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root, {"delta.enableChangeDataFeed": "true"})
    new = [(100, "a", 1), (101, "d", 2)]
    version = dvengine.write(table(new), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    assert not [a for a in commit_actions(root, version) if "cdc" in a]  # Delta: deduced from add/remove files
    changes = DeltaTable.forPath(None, str(root)).changes(version, version).to_pylist()
    deleted = sort_rows([(c["id"], c["p"], c["v"]) for c in changes if c["_change_type"] == "delete"])
    inserted = sort_rows([(c["id"], c["p"], c["v"]) for c in changes if c["_change_type"] == "insert"])
    assert deleted == sort_rows([r for r in model if r[1] == "a"])  # the DV'd row 1 is not deleted again
    assert inserted == sort_rows(new)
    assert_readers(root, [r for r in model if r[1] != "a"] + new)


def test_row_tracking_keeps_untouched_files_ids_and_gives_new_rows_fresh_ones(tmp_path: Path) -> None:
    root = tmp_path / "t"
    seed(root, {"delta.enableRowTracking": "true"})
    before = latest_version(root)
    live = live_files(root, before)
    top = max(f["baseRowId"] + json.loads(f["stats"])["numRecords"] - 1 for f in live.values())
    new = [(100, "a", 1), (101, "a", 2)]
    version = dvengine.write(table(new), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    after = live_files(root, version)
    for path, f in after.items():
        if f["partitionValues"]["p"] != "a":
            assert live[path]["baseRowId"] == f["baseRowId"]  # untouched
        else:
            assert f["baseRowId"] > top and f["defaultRowCommitVersion"] == version


def test_concurrent_writers_are_judged_by_the_replaced_partitions(tmp_path: Path) -> None:
    """The overwrite reads only the partitions it replaces: a concurrent DELETE elsewhere commits
    under it; one in a replaced partition removed a file it read (ConcurrentDeleteReadError). A
    concurrent blind append does not conflict under WriteSerializable, in a replaced partition
    neither (Delta's ConflictChecker skips blind appends then), so its rows stay."""
    root = tmp_path / "t"
    model = seed(root)
    data = table([(100, "a", 1)])
    options = resolve_write_options(partitionOverwriteMode="dynamic")

    def overwrite_racing(other: Any) -> None:
        plan = plan_write(str(root), "overwrite", from_arrow_schema(data.schema), None, None, options)
        aligned = align_to_table(data, plan)
        other()
        adds = write_data_files(aligned, plan.table_root, plan.schema, plan.partition_columns, plan.num_indexed_cols)
        finish_write(plan, adds)

    overwrite_racing(lambda: DeltaTable.forPath(None, str(root)).delete("id = 6", mode="dv"))  # partition c
    overwrite_racing(lambda: dvengine.write(table([(300, "a", 3)]), str(root), mode="append"))
    model = [r for r in model if r[1] != "a" and r[0] != 6] + [(300, "a", 3), (100, "a", 1)]
    assert_readers(root, model)

    parquet_before = {p for p in files_state(root) if p.endswith(".parquet")}
    with pytest.raises(ConcurrentDeleteReadError):
        overwrite_racing(lambda: DeltaTable.forPath(None, str(root)).delete("id = 300", mode="dv"))
    assert {p for p in files_state(root) if p.endswith(".parquet")} == parquet_before  # its files deleted again
    assert_readers(root, [r for r in model if r[0] != 300])


def test_format_delta_passes_the_option_through_spelled_any_way() -> None:
    request = parse_write_options({"PartitionOverwriteMode": "Dynamic", "path": "/t"}, None, "overwrite", None)
    assert request.partition_overwrite_mode == "Dynamic"  # checked by the write, where Delta checks it
    assert parse_write_options({}, "/t", "overwrite", None).partition_overwrite_mode is None


def test_sql_insert_overwrite_without_spark_reads_the_environment_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    model = seed(root)
    monkeypatch.setenv(env_key(CONF_PARTITION_OVERWRITE_MODE), "dynamic")
    dvengine.sql(None, f"INSERT OVERWRITE delta.`{root}` VALUES (100, 'b', 1), (101, 'e', 2)")
    info, removes, _ = commit(root, latest_version(root))
    assert info["operationParameters"]["isDynamicPartitionOverwrite"] is True
    assert {r["partitionValues"]["p"] for r in removes} == {"b"}
    assert_readers(root, [r for r in model if r[1] != "b"] + [(100, "b", 1), (101, "e", 2)])
    monkeypatch.setenv(env_key(CONF_PARTITION_OVERWRITE_MODE), "static")
    dvengine.sql(None, f"INSERT OVERWRITE delta.`{root}` VALUES (102, 'b', 3)")
    assert_readers(root, [(102, "b", 3)])


def test_a_column_mapped_table_matches_partitions_by_physical_name(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = seed(root, {"delta.columnMapping.mode": "name"})
    before = latest_version(root)
    live = live_files(root, before)
    key = next(iter(next(iter(live.values()))["partitionValues"]))
    assert key.startswith("col-")  # the log keys partition values by physical name
    new = [(100, "c", 1)]
    version = dvengine.write(table(new), str(root), mode="overwrite", partitionOverwriteMode="dynamic")
    _, removes, _ = commit(root, version)
    assert {r["path"] for r in removes} == {p for p, f in live.items() if f["partitionValues"][key] == "c"}
    want = [r for r in model if r[1] != "c"] + new
    assert rows_arrow(root, ["id", "p", "v"]) == sort_rows(want)
    assert rows_delta_rs(root, ["id", "p", "v"]) == sort_rows(want)
    # DuckDB 1.4 reads a mapped table's partition columns as NULL (spec_notes/writer-features.md): data columns only
    assert rows_duckdb(root, ["id", "v"]) == sort_rows([(r[0], r[2]) for r in want])
