"""Identity columns (``identityColumns``): builders, values assigned on append beyond the high-water
mark (which the commit stores), GENERATED ALWAYS rules, uniqueness under concurrent writers.

Truth: the values PROTOCOL.md allows (``start + k * step`` beyond the mark, all distinct), the mark
in the field metadata read back by delta-rs, rows read by delta-rs and DuckDB, and a table whose log
is written as Delta Spark writes an identity table after an insert (mark already at 3).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable, IdentityGenerator
from dvengine.errors import (
    InvalidArgumentError,
    MetadataChangedError,
    OperationNotAllowedError,
    UnsupportedFeatureError,
)
from dvengine.log import latest_version, load_snapshot


def _mark(root: str, column: str = "id") -> Any:
    fields = json.loads(deltalake.DeltaTable(root).schema().to_json())["fields"]
    return next(f for f in fields if f["name"] == column)["metadata"].get("delta.identity.highWaterMark")


def _rows(root: str) -> list[tuple[Any, ...]]:
    got = rows_delta_rs(root, ["id", "v"])
    assert got == rows_duckdb(root, ["id", "v"])
    return got


def _create(root: str, always: bool = True, start: int = 1, step: int = 1) -> DeltaTable:
    spec = IdentityGenerator(start=start, step=step)
    kwargs = {"generatedAlwaysAs": spec} if always else {"generatedByDefaultAs": spec}
    return DeltaTable.create(None).location(root).addColumn("id", "bigint", **kwargs).addColumn("v", "string").execute()


def _delta_spark_identity_table(root: Path) -> str:
    """As Delta Spark leaves `CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING)` after
    `INSERT INTO t (v) VALUES ('a'), ('b'), ('c')`: ids 1..3 in a data file, mark 3 in the schema."""
    os.makedirs(root / "_delta_log")
    pa_table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    import pyarrow.parquet as pq

    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(pa_table, root / name)
    identity = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False}
    schema = lambda mark: {"type": "struct", "fields": [  # noqa: E731
        {"name": "id", "type": "long", "nullable": True,
         "metadata": {**identity, **({} if mark is None else {"delta.identity.highWaterMark": mark})}},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    ]}
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
            "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": int(time.time() * 1000)}
    commit0 = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE", "operationParameters": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["appendOnly", "deletionVectors", "identityColumns", "invariants"]}},
        {"metaData": {**meta, "schemaString": json.dumps(schema(None))}},
    ]
    stats = {"numRecords": 3, "minValues": {"id": 1, "v": "a"}, "maxValues": {"id": 3, "v": "c"},
             "nullCount": {"id": 0, "v": 0}}
    commit1 = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE",
                        "operationParameters": {"mode": "Append", "partitionBy": "[]"},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"metaData": {**meta, "schemaString": json.dumps(schema(3))}},
        {"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                 "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats)}},
    ]
    for version, actions in enumerate((commit0, commit1)):
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def test_the_builder_stores_identity_columns_as_delta(tmp_path: Path) -> None:
    always, by_default = str(tmp_path / "a"), str(tmp_path / "b")
    _create(always, start=10, step=5)
    _create(by_default, always=False)
    fields = json.loads(deltalake.DeltaTable(always).schema().to_json())["fields"]
    assert fields[0]["metadata"] == {"delta.identity.start": 10, "delta.identity.step": 5,
                                     "delta.identity.allowExplicitInsert": False}
    fields = json.loads(deltalake.DeltaTable(by_default).schema().to_json())["fields"]
    assert fields[0]["metadata"]["delta.identity.allowExplicitInsert"] is True
    assert "identityColumns" in (deltalake.DeltaTable(always).protocol().writer_features or [])
    legacy = str(tmp_path / "legacy")
    (DeltaTable.create(None).location(legacy).addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator())
     .property("delta.enableDeletionVectors", "false").execute())
    protocol = deltalake.DeltaTable(legacy).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 6)
    with pytest.raises(InvalidArgumentError, match="BIGINT"):
        DeltaTable.create(None).location(str(tmp_path / "c")).addColumn("id", "int", generatedAlwaysAs=IdentityGenerator()) \
            .execute()


def test_appends_assign_values_beyond_the_mark_and_commit_it(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, start=10, step=5)
    dvengine.write(pa.table({"v": ["a", "b", "c"]}), root, mode="append")
    assert _mark(root) == 20
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")
    assert _mark(root) == 25
    assert _rows(root) == sort_rows([(10, "a"), (15, "b"), (20, "c"), (25, "d")])
    down = str(tmp_path / "down")
    _create(down, start=-1, step=-2)
    dvengine.write(pa.table({"v": ["a", "b"]}), down, mode="append")
    assert _mark(down) == -3 and _rows(down) == sort_rows([(-1, "a"), (-3, "b")])


def test_generated_always_refuses_given_values_and_updates(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    table = _create(root)
    dvengine.write(pa.table({"v": ["a", "b"]}), root, mode="append")
    version = latest_version(root)
    with pytest.raises(OperationNotAllowedError, match="GENERATED ALWAYS"):
        dvengine.write(pa.table({"id": pa.array([7], pa.int64()), "v": ["x"]}), root, mode="append")
    with pytest.raises(OperationNotAllowedError, match="IDENTITY"):
        table.update("v = 'a'", {"id": "id + 100"})
    source = pa.table({"v": ["z"]})
    with pytest.raises(UnsupportedFeatureError, match="IDENTITY"):
        table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenNotMatchedInsertAll().execute()
    assert latest_version(root) == version
    table.update("v = 'a'", {"v": "'A'"})  # other columns change as usual; the id stays
    table.delete("v = 'b'")
    source = pa.table({"v": ["A"]})
    table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenMatchedUpdate(set={"v": "'AA'"}).execute()
    assert _rows(root) == [(1, "AA")]


def test_by_default_accepts_given_values(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False)
    dvengine.write(pa.table({"id": pa.array([100], pa.int64()), "v": ["given"]}), root, mode="append")
    dvengine.write(pa.table({"v": ["generated"]}), root, mode="append")
    assert _rows(root) == sort_rows([(100, "given"), (1, "generated")])


def test_concurrent_appends_never_commit_duplicate_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _delta_spark_identity_table(tmp_path / "t")
    assert _mark(root) == 3
    stale = load_snapshot(root)
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")  # the winner takes 4
    from dvengine.commands import write as write_command

    monkeypatch.setattr(write_command, "load_snapshot", lambda _root: stale)  # a writer that read mark 3 too
    with pytest.raises(MetadataChangedError):
        dvengine.write(pa.table({"v": ["e"]}), root, mode="append")
    monkeypatch.undo()
    dvengine.write(pa.table({"v": ["e"]}), root, mode="append")  # retried on fresh state: 5
    rows = _rows(root)
    assert rows == sort_rows([(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")])
    assert _mark(root) == 5


def test_spark_appends_assign_unique_values(spark: Any, tmp_path: Path) -> None:
    root = _delta_spark_identity_table(tmp_path / "t")
    frame = spark.createDataFrame([(f"s{i}",) for i in range(20)], "v string").repartition(3)
    dvengine.write(frame, root, mode="append")
    rows = _rows(root)
    new = [i for i, v in rows if v.startswith("s")]
    assert len(new) == 20 == len(set(new)) and min(new) >= 4
    assert _mark(root) == max(new)
    dvengine.write(pa.table({"v": ["after"]}), root, mode="append")
    assert [i for i, v in _rows(root) if v == "after"] == [max(new) + 1]


def test_restore_keeps_the_high_water_mark(tmp_path: Path) -> None:
    """RESTORE brings back an older schema, but values handed out since stay used (Delta keeps the mark)."""
    root = str(tmp_path / "t")
    table = _create(root)
    dvengine.write(pa.table({"v": ["a"]}), root, mode="append")  # version 1: id 1
    dvengine.write(pa.table({"v": ["b", "c"]}), root, mode="append")  # version 2: ids 2, 3
    table.restoreToVersion(1)
    assert _mark(root) == 3 and _rows(root) == [(1, "a")]
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")
    assert _rows(root) == sort_rows([(1, "a"), (4, "d")])  # 2 and 3 are not handed out again
