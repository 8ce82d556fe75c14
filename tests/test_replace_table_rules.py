"""REPLACE TABLE on append-only tables, and the operation CREATE OR REPLACE records when it creates.

What Delta does (delta-io/delta master, read in its source; spec_notes/sql-and-delta-format.md):

- REPLACE / CREATE OR REPLACE without AS (``CreateDeltaTableCommand.handleCreateTable``) commits a
  ``remove`` (``dataChange = true``) per live file; ``OptimisticTransaction.prepareCommit`` then
  calls ``DeltaLog.assertRemovable`` on the read snapshot, which throws
  DELTA_CANNOT_MODIFY_APPEND_ONLY when it has ``delta.appendOnly = true``. With no file there is
  no remove, and the replace commits. REPLACE ... AS writes through ``WriteIntoDelta`` in
  Overwrite mode, which calls ``assertRemovable`` on any existing table, files or not.
- ``CreateDeltaTableCommand.getOperation`` maps ``TableCreationModes.CreateOrReplace`` to
  ``DeltaOperations.ReplaceTable(orCreate = true)`` whether or not the table existed: operation
  ``CREATE OR REPLACE TABLE``, parameters ``isManaged``, ``description``, ``partitionBy``,
  ``clusterBy``, ``properties`` (the same names as ``CreateTable``'s). A real log confirms it:
  delta-io/delta's ``spark/src/test/resources/delta/variant-stats-no-checkpoint/_delta_log/
  00000000000000000000.json`` (written by Databricks Runtime) opens with ``"operation":"CREATE OR
  REPLACE TABLE"`` and no ``readVersion``.
- ``DeltaOperations.ReplaceTable.operationMetrics`` is ``Set()`` unless ``asSelect`` (then WRITE
  plus ``numRemovedFiles`` / ``numRemovedBytes``), and ``CreateTable``'s likewise, while
  ``OptimisticTransaction`` always logs ``getOperationMetrics`` (``history.metricsEnabled``
  defaults to true): REPLACE / CREATE OR REPLACE / CREATE TABLE without AS log
  ``"operationMetrics":{}``, the removes still in the commit. Delta's logs show it: every
  ``"operation":"CREATE TABLE"`` golden commit (``connectors/golden-tables/.../collations-table/
  _delta_log/00000000000000000000.json``) and the CREATE OR REPLACE TABLE one above carry ``{}``.

Checked in the raw log, with delta-rs reads; refusals leave the folder byte-identical.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from dml_helpers import folder_state
from interop import rows_delta_rs
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError

CREATE_PARAMETERS = ["clusterBy", "description", "isManaged", "partitionBy", "properties"]


def _info(root: Path, version: int) -> dict[str, Any]:
    return next(a["commitInfo"] for a in commit_actions(root, version) if "commitInfo" in a)  # type: ignore[no-any-return]


def _append_only(root: Path, rows: int) -> None:
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id INT, v STRING) USING delta "
                       "TBLPROPERTIES ('delta.appendOnly' = 'true')")
    if rows:
        dvengine.write(pa.table({"id": pa.array(range(rows), pa.int32()), "v": ["x"] * rows}), str(root), mode="append")


def test_replacing_an_append_only_table_with_files_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _append_only(root, 3)
    before = folder_state(root)
    replacements = [
        lambda: dvengine.sql(None, f"REPLACE TABLE delta.`{root}` (w BIGINT) USING delta"),
        lambda: dvengine.sql(None, f"CREATE OR REPLACE TABLE delta.`{root}` (id INT, v STRING) USING delta"),
        # the rule reads the table as it is: the replacement's own property does not lift it
        lambda: dvengine.sql(None, f"REPLACE TABLE delta.`{root}` (id INT) USING delta "
                                   "TBLPROPERTIES ('delta.appendOnly' = 'false')"),
        lambda: DeltaTable.replace().location(str(root)).addColumn("w", "bigint").execute(),
        lambda: DeltaTable.createOrReplace().location(str(root)).addColumn("w", "bigint").execute(),
    ]
    for replace in replacements:
        with pytest.raises(InvalidArgumentError) as caught:
            replace()
        message = str(caught.value)
        assert "append-only" in message and "DELTA_CANNOT_MODIFY_APPEND_ONLY" in message and str(root) in message
        assert folder_state(root) == before
    assert rows_delta_rs(root, ["id"]) == [(0,), (1,), (2,)]


@pytest.mark.parametrize("statement", ["REPLACE TABLE", "CREATE OR REPLACE TABLE"])
def test_replacing_an_empty_append_only_table_commits(tmp_path: Path, statement: str) -> None:
    """No live file, no remove: Delta's commit has nothing to refuse. (For CREATE OR REPLACE on a
    path this also pins dvengine's known difference: it replaces, where Delta would only check the
    definition matches; spec_notes/deltatable-api.md, delta-io/delta#827.)"""
    root = tmp_path / "t"
    _append_only(root, 0)
    table_id = next(a["metaData"]["id"] for a in commit_actions(root, 0) if "metaData" in a)
    dvengine.sql(None, f"{statement} delta.`{root}` (w BIGINT) USING delta")
    actions = commit_actions(root, 1)
    assert sorted({k for a in actions for k in a}) == ["commitInfo", "metaData"]  # no remove, no add
    metadata = next(a["metaData"] for a in actions if "metaData" in a)
    assert metadata["id"] == table_id and "delta.appendOnly" not in metadata["configuration"]
    assert _info(root, 1)["operation"] == statement
    assert [(f.name, f.type.type) for f in RsTable(str(root)).schema().fields] == [("w", "long")]


def test_create_or_replace_records_create_or_replace_when_it_creates(tmp_path: Path) -> None:
    sql_root, builder_root, plain_root = tmp_path / "sql", tmp_path / "builder", tmp_path / "plain"
    dvengine.sql(None, f"CREATE OR REPLACE TABLE delta.`{sql_root}` (id INT, p INT) USING delta PARTITIONED BY (p)")
    DeltaTable.createOrReplace().location(str(builder_root)).addColumn("id", "int").comment("c").execute()
    for root in (sql_root, builder_root):
        info = _info(root, 0)
        assert info["operation"] == "CREATE OR REPLACE TABLE"
        assert sorted(info["operationParameters"]) == CREATE_PARAMETERS and "readVersion" not in info
    assert _info(sql_root, 0)["operationParameters"]["partitionBy"] == '["p"]'
    assert _info(builder_root, 0)["operationParameters"]["description"] == "c"
    # the other statements keep theirs: CREATE [IF NOT EXISTS] creates, REPLACE / CREATE OR REPLACE replace
    dvengine.sql(None, f"CREATE TABLE IF NOT EXISTS delta.`{plain_root}` (id INT) USING delta")
    dvengine.sql(None, f"REPLACE TABLE delta.`{plain_root}` (id INT) USING delta")
    dvengine.sql(None, f"CREATE OR REPLACE TABLE delta.`{plain_root}` (id INT) USING delta")
    assert [_info(plain_root, v)["operation"] for v in range(latest_version(plain_root) + 1)] == [
        "CREATE TABLE", "REPLACE TABLE", "CREATE OR REPLACE TABLE"]
    assert all(sorted(_info(plain_root, v)["operationParameters"]) == CREATE_PARAMETERS for v in range(3))


def test_replace_as_select_on_an_empty_append_only_table_is_refused(spark: Any, tmp_path: Path) -> None:
    """REPLACE ... AS goes through WriteIntoDelta's Overwrite, which asserts removability on any
    existing table: unlike the non-AS form, an append-only table with no file is refused too."""
    root = tmp_path / "t"
    _append_only(root, 0)
    before = folder_state(root)
    for statement in ("REPLACE TABLE", "CREATE OR REPLACE TABLE"):
        with pytest.raises(InvalidArgumentError, match="DELTA_CANNOT_MODIFY_APPEND_ONLY"):
            dvengine.sql(spark, f"{statement} delta.`{root}` USING delta AS SELECT 1 AS w")
        assert folder_state(root) == before


def test_replace_without_as_logs_empty_metrics_and_keeps_its_removes(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id INT, v STRING) USING delta")
    assert _info(root, 0)["operationMetrics"] == {}  # CreateTable: no metrics either
    replacements = [
        lambda: dvengine.sql(None, f"REPLACE TABLE delta.`{root}` (id INT, v STRING) USING delta"),
        lambda: dvengine.sql(None, f"CREATE OR REPLACE TABLE delta.`{root}` (id INT, v STRING) USING delta"),
        lambda: DeltaTable.replace().location(str(root)).addColumn("id", "int").addColumn("v", "string").execute(),
        lambda: DeltaTable.createOrReplace().location(str(root)).addColumn("id", "int").addColumn("v", "string").execute(),
    ]
    operations = ["REPLACE TABLE", "CREATE OR REPLACE TABLE"] * 2
    for n, (replace, operation) in enumerate(zip(replacements, operations, strict=True)):
        for batch in range(2):  # two live files for the replace to remove
            dvengine.write(pa.table({"id": pa.array([n, batch], pa.int32()), "v": ["x", "y"]}), str(root), mode="append")
        live = {f for f in RsTable(str(root)).file_uris()}
        replace()
        version = latest_version(root)
        info = _info(root, version)
        assert info["operation"] == operation
        assert info["operationMetrics"] == {}, info
        removed = {str(root / a["remove"]["path"]) for a in commit_actions(root, version) if "remove" in a}
        assert {os.path.normpath(p) for p in live} == removed and len(removed) == 2
        assert rows_delta_rs(root, ["id"]) == []
