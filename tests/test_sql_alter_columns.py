"""ALTER TABLE column statements through ``dvengine.sql`` (issue 26): ADD COLUMNS, RENAME COLUMN,
DROP COLUMN(S) on column-mapped tables, ALTER COLUMN SET / DROP DEFAULT.

Truth that does not come from dvengine's reader: an in-memory model of the rows, read back by
delta-rs (QueryBuilder) and DuckDB (delta-kernel-rs), which resolve physical names themselves; the
raw log walked for what Delta's AlterTable*DeltaCommand write (field ids and physical names kept,
``maxColumnId``, ``partitionColumns``, operation names and parameters, no file actions); refusals
leave the table folder byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    OperationNotAllowedError,
    UnsupportedFeatureError,
)

ST = pa.struct([("x", pa.int32()), ("y", pa.string())])


def _log(root: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((root / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            yield json.loads(line)


def _last(root: Path, kind: str) -> dict[str, Any]:
    return [a[kind] for a in _log(root) if kind in a][-1]


def _schema(root: Path) -> dict[str, Any]:
    return json.loads(_last(root, "metaData")["schemaString"])  # type: ignore[no-any-return]


def _field(root: Path, *path: str) -> dict[str, Any]:
    fields = _schema(root)["fields"]
    found: dict[str, Any] = {}
    for name in path:
        found = next(f for f in fields if f["name"] == name)
        fields = found["type"]["fields"] if isinstance(found["type"], dict) else []
    return found


def _snapshot_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _mapped_table(root: Path, mode: str = "name", extra: str = "") -> str:
    dvengine.sql(None, f"""CREATE TABLE delta.`{root}` (id BIGINT, v STRING, w INT, p STRING, s STRUCT<x: INT, y: STRING>)
        USING delta PARTITIONED BY (p)
        TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}', 'delta.feature.allowColumnDefaults' = 'supported'{extra})""")
    ids = [1, 2, 3, 4]
    dvengine.write(pa.table({
        "id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids], "w": pa.array([i * 10 for i in ids], pa.int32()),
        "p": [f"p{i % 2}" for i in ids], "s": pa.array([{"x": i, "y": f"y{i}"} for i in ids], ST),
    }), str(root), mode="append")
    return str(root)


def _check(root: str, columns: list[str], model: list[tuple[Any, ...]], spark: Any = None) -> None:
    """dvengine (Arrow and, given a session, Spark), delta-rs and DuckDB all return the model.
    DuckDB 1.4.4 reads partition columns of mapped tables as NULL, so it is given the data columns."""
    want = sort_rows(model)
    assert rows_arrow(root, columns) == want
    assert rows_delta_rs(root, columns) == want
    data = [i for i, c in enumerate(columns) if c not in ("p", "part")]
    assert rows_duckdb(root, [columns[i] for i in data]) == sort_rows([tuple(r[i] for i in data) for r in model])
    if spark is not None:
        rows = DeltaTable.forPath(spark, root).toDF().collect()
        assert sort_rows([tuple(r.asDict(recursive=True)[c] for c in columns) for r in rows]) == want


def _file_actions(root: Path, version: int) -> list[str]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [k for line in text for k in json.loads(line) if k in ("add", "remove", "cdc")]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_rename_drop_add_are_metadata_only_and_every_reader_agrees(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "t"
    path = _mapped_table(root, mode)
    before_v = _field(root, "v")["metadata"]
    before_x = _field(root, "s", "x")["metadata"]
    files_before = sorted(p.name for p in root.rglob("*.parquet"))
    max_id = int(_last(root, "metaData")["configuration"]["delta.columnMapping.maxColumnId"])

    dvengine.sql(None, f"ALTER TABLE delta.`{path}` RENAME COLUMN v TO name")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` RENAME COLUMN p TO part")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` RENAME COLUMN s.x TO xx")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` DROP COLUMN w")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` ADD COLUMNS (w STRING COMMENT 'new w', s.z DOUBLE AFTER xx)")

    # The renamed fields keep their ids and physical names; the partition list follows the rename.
    assert _field(root, "name")["metadata"] == before_v
    assert _field(root, "s", "xx")["metadata"] == before_x
    meta = _last(root, "metaData")
    assert meta["partitionColumns"] == ["part"]
    new_w, new_z = _field(root, "w")["metadata"], _field(root, "s", "z")["metadata"]
    assert new_w["comment"] == "new w"
    assert {new_w["delta.columnMapping.id"], new_z["delta.columnMapping.id"]} == {max_id + 1, max_id + 2}
    assert meta["configuration"]["delta.columnMapping.maxColumnId"] == str(max_id + 2)
    assert new_w["delta.columnMapping.physicalName"].startswith("col-")  # not the dropped w's data
    assert [f["name"] for f in _schema(root)["fields"]] == ["id", "name", "part", "s", "w"]
    assert [f["name"] for f in _field(root, "s")["type"]["fields"]] == ["xx", "z", "y"]
    # No data file was touched, and the commits are Delta's.
    assert sorted(p.name for p in root.rglob("*.parquet")) == files_before
    ops = [(a["commitInfo"]["operation"], a["commitInfo"]["operationParameters"]) for a in _log(root) if "commitInfo" in a]
    assert ops[2:] == [
        ("RENAME COLUMN", {"oldColumnPath": "v", "newColumnPath": "name"}),
        ("RENAME COLUMN", {"oldColumnPath": "p", "newColumnPath": "part"}),
        ("RENAME COLUMN", {"oldColumnPath": "s.x", "newColumnPath": "s.xx"}),
        ("DROP COLUMNS", {"columns": '["w"]'}),
        # DeltaOperations.AddColumns, compact as Delta's DescribeDeltaHistorySuite "operations - add columns"
        # expects: [{"column":{"name":"v3","type":"long","nullable":true,"metadata":{}}},{..."position":"AFTER v1"}]
        ("ADD COLUMNS", {"columns":
            '[{"column":{"name":"w","type":"string","nullable":true,"metadata":{"comment":"new w"}}},'
            '{"column":{"name":"s.z","type":"double","nullable":true,"metadata":{}},"position":"AFTER xx"}]'}),
    ]
    assert all(_file_actions(root, v) == [] for v in range(2, 7))

    cols = ["id", "name", "part", "s", "w"]
    model = {i: (i, f"v{i}", f"p{i % 2}", {"xx": i, "z": None, "y": f"y{i}"}, None) for i in range(1, 5)}
    _check(path, cols, list(model.values()))

    # DML and appends after the changes, under the new names.
    table = DeltaTable.forPath(None, path)
    table.delete("name = 'v1'")
    del model[1]
    table.update("s.xx = 2", {"w": "'two'", "name": "upper(name)"})
    model[2] = (2, "V2", "p0", model[2][3], "two")
    dvengine.write(pa.table({"id": pa.array([5], pa.int64()), "name": ["v5"], "part": ["p1"],
                             "s": pa.array([{"xx": 5, "z": 0.5, "y": "y5"}], pa.struct([("xx", pa.int32()), ("z", pa.float64()),
                                                                                        ("y", pa.string())])),
                             "w": ["five"]}), path, mode="append")
    model[5] = (5, "v5", "p1", {"xx": 5, "z": 0.5, "y": "y5"}, "five")
    source = pa.table({"id": pa.array([3, 6], pa.int64()), "w": ["three", "six"]})
    (table.alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"w": "s.w"}).whenNotMatchedInsert(values={"id": "s.id", "w": "s.w", "part": "'p0'"})
     .withEngine("local").execute())
    model[3] = (*model[3][:4], "three")
    model[6] = (6, None, "p0", None, "six")
    _check(path, cols, list(model.values()))


def test_dropped_then_re_added_column_does_not_bring_old_values_back(tmp_path: Path) -> None:
    """Delta's point of physical names: a new column of a dropped one's name reads NULL for old rows,
    also on a table upgraded from no mapping (where the old physical name is the logical one)."""
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}), str(root))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` DROP COLUMNS (v)")
    _check(str(root), ["id"], [(1,), (2,)])
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMN v STRING")
    assert _field(root, "v")["metadata"]["delta.columnMapping.physicalName"] != "v"
    _check(str(root), ["id", "v"], [(1, None), (2, None)])


def test_refusals_name_the_column_and_leave_the_table_unchanged(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    dvengine.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}), str(plain))
    mapped = tmp_path / "mapped"
    _mapped_table(mapped, extra=", 'delta.constraints.w_pos' = 'w > 0'")
    dvengine.sql(None, f"ALTER TABLE delta.`{mapped}` ADD CONSTRAINT v_set CHECK (v IS NOT NULL)")
    gen = tmp_path / "gen"
    dvengine.sql(None, f"""CREATE TABLE delta.`{gen}` (a INT, b INT GENERATED ALWAYS AS (a * 2), c INT) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.feature.allowColumnDefaults' = 'supported')""")
    cases: list[tuple[Path, str, type[Exception], str]] = [
        (plain, "RENAME COLUMN v TO w", UnsupportedFeatureError, "DELTA_UNSUPPORTED_RENAME_COLUMN"),
        (plain, "DROP COLUMN v", UnsupportedFeatureError, "DELTA_UNSUPPORTED_DROP_COLUMN"),
        (mapped, "DROP COLUMN p", UnsupportedFeatureError, "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN"),
        (mapped, "DROP COLUMN v", OperationNotAllowedError, "v_set"),
        (mapped, "RENAME COLUMN w TO w2", OperationNotAllowedError, "w_pos"),
        (mapped, "RENAME COLUMN v TO id", InvalidArgumentError, "already exists"),
        (mapped, "RENAME COLUMN nope TO x", InvalidArgumentError, "'nope'"),
        (mapped, "DROP COLUMN s.nope", InvalidArgumentError, "'s.nope'"),
        (mapped, "ADD COLUMNS (q INT NOT NULL)", UnsupportedFeatureError, "NOT NULL"),
        (mapped, "ADD COLUMNS (q INT DEFAULT 1)", UnsupportedFeatureError,
         "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED"),
        (mapped, "ADD COLUMN V STRING", InvalidArgumentError, "'V'"),
        (mapped, "ADD COLUMN q INT AFTER nope", InvalidArgumentError, "'nope'"),
        (mapped, "ALTER COLUMN w SET DEFAULT id + 1", InvalidPredicateError, "'w'"),
        (plain, "ALTER COLUMN v SET DEFAULT 'x'", OperationNotAllowedError, "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"),
        (gen, "DROP COLUMN a", OperationNotAllowedError, "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE"),
        (gen, "RENAME COLUMN a TO a2", OperationNotAllowedError, "b: a * 2"),
        (gen, "ALTER COLUMN b SET DEFAULT 1", InvalidArgumentError, "'b'"),
    ]
    for root, change, error, words in cases:
        before = _snapshot_bytes(root)
        with pytest.raises(error, match=words.replace("(", r"\(").replace("*", r"\*")):
            dvengine.sql(None, f"ALTER TABLE delta.`{root}` {change}")
        assert _snapshot_bytes(root) == before, change
    # The generated column itself may go; DROP ... IF EXISTS of a missing one commits nothing.
    dvengine.sql(None, f"ALTER TABLE delta.`{gen}` DROP COLUMN b")
    assert [f["name"] for f in _schema(gen)["fields"]] == ["a", "c"]
    before = _snapshot_bytes(gen)
    dvengine.sql(None, f"ALTER TABLE delta.`{gen}` DROP COLUMNS IF EXISTS (nope, b)")
    assert _snapshot_bytes(gen) == before
    # The route Delta's error names: support the feature, then set the default.
    dvengine.sql(None, f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')")
    dvengine.sql(None, f"ALTER TABLE delta.`{plain}` ALTER COLUMN v SET DEFAULT 'x'")
    dvengine.sql(None, f"INSERT INTO delta.`{plain}` (id) VALUES (2)")
    _check(str(plain), ["id", "v"], [(1, "a"), (2, "x")])


def test_set_and_drop_default_apply_to_later_inserts_only(tmp_path: Path) -> None:
    root = tmp_path / "t"
    path = _mapped_table(root)
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` ALTER COLUMN w SET DEFAULT 40 + 2")
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` ALTER COLUMN v SET DEFAULT 'dflt'")
    assert _field(root, "w")["metadata"]["CURRENT_DEFAULT"] == "40 + 2"  # the text as written, as Delta stores it
    assert _last(root, "commitInfo")["operation"] == "CHANGE COLUMN"
    assert _file_actions(root, 3) == []
    model = {i: (i, f"v{i}", i * 10) for i in range(1, 5)}  # existing rows keep their values
    dvengine.sql(None, f"INSERT INTO delta.`{path}` (id, p) VALUES (5, 'p1')")
    model[5] = (5, "dflt", 42)
    dvengine.write(pa.table({"id": pa.array([6], pa.int64()), "v": ["given"], "p": ["p0"]}), path, mode="append")
    model[6] = (6, "given", 42)
    source = pa.table({"id": pa.array([7], pa.int64())})
    (DeltaTable.forPath(None, path).alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenNotMatchedInsert(values={"id": "s.id", "p": "'p1'"}).withEngine("local").execute())
    model[7] = (7, "dflt", 42)
    _check(path, ["id", "v", "w"], list(model.values()))
    dvengine.sql(None, f"ALTER TABLE delta.`{path}` ALTER COLUMN w DROP DEFAULT")
    assert "CURRENT_DEFAULT" not in _field(root, "w")["metadata"]
    dvengine.sql(None, f"INSERT INTO delta.`{path}` (id, p) VALUES (8, 'p0')")
    model[8] = (8, "dflt", None)
    _check(path, ["id", "v", "w"], list(model.values()))


def test_column_statements_on_spark(spark: Any, tmp_path: Path) -> None:
    """The same statements through a session, a catalog name, and the Spark executor's reads and DML after."""
    name = "alter_columns_t"
    dvengine.sql(spark, f"""CREATE TABLE {name} (id BIGINT, v STRING, w INT, s STRUCT<x: INT, y: STRING>) USING delta
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.feature.allowColumnDefaults' = 'supported')""")
    table = DeltaTable.forName(spark, name)
    dvengine.write(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"],
                             "w": pa.array([1, 2, 3], pa.int32()),
                             "s": pa.array([{"x": i, "y": str(i)} for i in (1, 2, 3)], ST)}), table.path, mode="append")
    dvengine.sql(spark, f"ALTER TABLE {name} RENAME COLUMN v TO v2; ALTER TABLE {name} DROP COLUMN s.x; "
                        f"ALTER TABLE {name} ADD COLUMNS (s.z INT FIRST); ALTER TABLE {name} ALTER COLUMN w SET DEFAULT 9")
    dvengine.sql(spark, f"UPDATE {name} SET v2 = 'B', s = named_struct('z', 20, 'y', 'two') WHERE id = 2")
    dvengine.sql(spark, f"DELETE FROM {name} WHERE v2 = 'c'")
    dvengine.sql(spark, f"MERGE INTO {name} t USING (SELECT 4L AS id, 'd' AS v2) s ON t.id = s.id "
                        "WHEN NOT MATCHED THEN INSERT (id, v2) VALUES (s.id, s.v2)")
    model = [(1, "a", 1, {"z": None, "y": "1"}), (2, "B", 2, {"z": 20, "y": "two"}), (4, "d", 9, None)]
    _check(table.path, ["id", "v2", "w", "s"], model, spark)
