"""write(): tables written by dvengine read back equal through delta-rs and DuckDB (independent readers).

DuckDB's delta extension comes from the pip package ``duckdb-ext-delta``: it ships the binary at
``duckdb_ext/extensions/v<duckdb>/<platform>/delta.duckdb_extension``, i.e. laid out like a DuckDB
extension directory. Plain ``LOAD delta`` tries to download it (no network here), so the
connection is opened with ``extension_directory`` pointing at that folder; then ``LOAD delta``
finds the packaged, signed binary.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dvengine.commit.transaction import Transaction
from dvengine.engine.spark.write_api import write
from dvengine.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    SchemaViolationError,
    TableAlreadyExistsError,
)
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.storage.logstore import resolve_data_path

UTC = dt.UTC


def _duckdb() -> Any:
    spec = importlib.util.find_spec("duckdb_ext")
    assert spec is not None and spec.submodule_search_locations, "pip package duckdb-ext-delta is not installed"
    ext_dir = os.path.join(next(iter(spec.submodule_search_locations)), "extensions")
    con = duckdb.connect(config={"extension_directory": ext_dir})
    con.execute("LOAD delta")
    return con


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _normalize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        norm = {}
        for k, v in r.items():
            if isinstance(v, dt.datetime) and v.tzinfo is not None:
                v = v.astimezone(UTC)
            norm[k] = v
        out.append(norm)
    return sorted(out, key=_key)


def rows_delta_rs(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable, QueryBuilder

    result = QueryBuilder().register("t", DeltaTable(path)).execute("select * from t").read_all()
    return _normalize(pa.table(result).to_pylist())


def rows_duckdb(path: str) -> list[dict[str, Any]]:
    con = _duckdb()
    try:
        return _normalize(con.execute(f"select * from delta_scan('{path}')").fetch_arrow_table().to_pylist())
    finally:
        con.close()


def assert_readers_see(path: str, expected: pa.Table) -> None:
    want = _normalize(expected.to_pylist())
    assert rows_delta_rs(path) == want, "delta-rs disagrees"
    assert rows_duckdb(path) == want, "duckdb disagrees"


def commits(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json"))


def log_actions(path: str, version: int) -> list[dict[str, Any]]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def data_files(path: str) -> set[str]:
    out = set()
    for d, _, names in os.walk(path):
        if "_delta_log" not in d:
            out.update(os.path.join(d, n) for n in names if n.endswith(".parquet"))
    return out


def typed_table(offset: int = 0) -> pa.Table:
    n = 6
    return pa.table(
        {
            "id": pa.array([offset + i for i in range(n)], pa.int64()),
            "i32": pa.array([1, None, 3, -4, 5, 6], pa.int32()),
            "s": pa.array(["a", "b" * 50, None, "é€😀", "", "z"]),
            "d": pa.array([dt.date(2024, 1, 1), None, dt.date(1970, 1, 1), dt.date(2000, 2, 29), dt.date(2024, 1, 1), None]),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 1, 2, 3, 456789, tzinfo=UTC), None, dt.datetime(1999, 12, 31, tzinfo=UTC)] * 2,
                pa.timestamp("us", tz="UTC"),
            ),
            "dec": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("-2.25"), decimal.Decimal("0.00"),
                             decimal.Decimal("99.99"), None], pa.decimal128(6, 2)),
            "st": pa.array([{"x": 1, "y": "p"}, None, {"x": None, "y": "q"}, {"x": 4, "y": None}, {"x": 5, "y": "r"}, None]),
            "b": pa.array([True, False, None, True, False, True]),
        }
    )


def test_create_unpartitioned_reads_back_everywhere(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = typed_table()
    assert write(data, path, spark=spark) == 0
    assert_readers_see(path, data)
    actions = log_actions(path, 0)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "WRITE" and info["operationParameters"] == {"mode": "ErrorIfExists", "partitionBy": "[]"}
    assert info["operationMetrics"]["numOutputRows"] == "6" and info["isBlindAppend"] is True
    assert actions[1]["protocol"] == {"minReaderVersion": 3, "minWriterVersion": 7,
                                      "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    assert actions[2]["metaData"]["configuration"] == {"delta.enableDeletionVectors": "true"}
    adds = [a["add"] for a in actions if "add" in a]
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == 6
    assert info["operationMetrics"]["numFiles"] == str(len(adds))
    # each file's stats bound its own rows (truth from pyarrow.compute over the file's data)
    for a in adds:
        stats = json.loads(a["stats"])
        file_data = pq.read_table(resolve_data_path(path, a["path"]))
        assert stats["tightBounds"] is True and stats["numRecords"] == file_data.num_rows
        for col in ("id", "i32"):
            mm = pc.min_max(file_data[col])
            if mm["min"].as_py() is not None:
                assert stats["minValues"][col] == mm["min"].as_py() and stats["maxValues"][col] == mm["max"].as_py()
            assert stats["nullCount"][col] == file_data[col].null_count


def test_partitioned_with_nulls_and_escaping(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = pa.table(
        {
            "v": pa.array(range(8), pa.int64()),
            "ps": ["a b/c=d%", None, "plain", "a b/c=d%", "x:y#z?", "", "plain", "é"],
            "pi": pa.array([1, 2, None, 1, 3, 4, 2, 5], pa.int32()),
            "pd": pa.array([dt.date(2024, 1, 1), None, dt.date(2024, 1, 2), dt.date(2024, 1, 1), None,
                            dt.date(2023, 6, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 1)]),
        }
    )
    write(data, path, partitionBy=["ps", "pi", "pd"], spark=spark)
    # Spark and Delta treat an empty partition string as null
    expected = data.set_column(1, "ps", pa.array(["a b/c=d%", None, "plain", "a b/c=d%", "x:y#z?", None, "plain", "é"]))
    assert_readers_see(path, expected)
    adds = [a["add"] for a in log_actions(path, 0) if "add" in a]
    for a in adds:
        assert os.path.exists(resolve_data_path(path, a["path"])), a["path"]
        assert set(a["partitionValues"]) == {"ps", "pi", "pd"}
        assert "ps" not in pq.read_schema(resolve_data_path(path, a["path"])).names
    assert {a["partitionValues"]["ps"] for a in adds} == {"a b/c=d%", None, "plain", "x:y#z?", "é"}
    assert any(a["path"].startswith("ps=a%20b%252Fc%253Dd%2525/") for a in adds)
    assert any(a["partitionValues"]["pd"] is None and a["path"].split("/")[2] == "pd=__HIVE_DEFAULT_PARTITION__"
               for a in adds)


def test_append_and_overwrite(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    first = typed_table()
    write(first, path, spark=spark)
    second = typed_table(offset=100)
    assert write(second, path, mode="append", spark=spark) == 1
    assert_readers_see(path, pa.concat_tables([first, second]))
    info = log_actions(path, 1)[0]["commitInfo"]
    assert info["isBlindAppend"] is True and info["readVersion"] == 0 and info["operationParameters"]["mode"] == "Append"

    table_id = log_actions(path, 0)[2]["metaData"]["id"]
    third = typed_table(offset=200)
    assert write(third, path, mode="overwrite", spark=spark) == 2
    assert_readers_see(path, third)
    actions = log_actions(path, 2)
    assert actions[0]["commitInfo"]["isBlindAppend"] is False
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    earlier = {a["add"]["path"] for v in (0, 1) for a in log_actions(path, v) if "add" in a}
    assert removed == earlier
    assert not any("metaData" in a for a in actions)  # identity kept
    assert log_actions(path, 0)[2]["metaData"]["id"] == table_id


def test_append_accepts_other_column_order_and_case(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write(pa.table({"a": [1, 2], "b": ["x", "y"]}), path, spark=spark)
    write(pa.table({"B": ["z"], "A": [3]}), path, mode="append", spark=spark)
    assert_readers_see(path, pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}))


@pytest.mark.parametrize(
    "bad",
    [
        pa.table({"a": [1], "b": ["x"], "c": [1.0]}),  # extra column
        # a missing nullable column is written as NULL, as Delta does (tests/test_write_error_rules.py)
        pa.table({"a": pa.array([1], pa.int32()), "b": ["x"]}),  # type mismatch
    ],
    ids=["extra", "type"],
)
def test_append_schema_mismatch_writes_nothing(spark: Any, tmp_path: Path, bad: pa.Table) -> None:
    path = str(tmp_path / "t")
    write(pa.table({"a": [1, 2], "b": ["x", "y"]}), path, spark=spark)
    before_files, before_log = data_files(path), commits(path)
    with pytest.raises(SchemaMismatchError):
        write(bad, path, mode="append", spark=spark)
    assert commits(path) == before_log and data_files(path) == before_files


def test_null_into_not_null_column_is_refused(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])
    write(pa.table({"a": [1], "b": ["x"]}, schema=schema), path, spark=spark)
    meta = json.loads(log_actions(path, 0)[2]["metaData"]["schemaString"])
    assert meta["fields"][0]["nullable"] is False
    before_files, before_log = data_files(path), commits(path)
    with pytest.raises(SchemaViolationError, match="'a'"):
        write(pa.table({"a": pa.array([2, None], pa.int64()), "b": ["y", "z"]}), path, mode="append", spark=spark)
    assert commits(path) == before_log and data_files(path) == before_files
    write(pa.table({"a": pa.array([2], pa.int64()), "b": [None]}, schema=pa.schema([("a", pa.int64()), ("b", pa.string())])),
          path, mode="append", spark=spark)
    assert_readers_see(path, pa.table({"a": [1, 2], "b": ["x", None]}))


def test_modes_checked(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(InvalidArgumentError, match="mode"):
        write(pa.table({"a": [1]}), path, mode="upsert", spark=spark)
    assert not os.path.exists(path)
    write(pa.table({"a": [1]}), path, spark=spark)
    with pytest.raises(TableAlreadyExistsError):
        write(pa.table({"a": [1]}), path, spark=spark)
    assert commits(path) == ["00000000000000000000.json"]


def test_dvs_disabled_gives_legacy_protocol(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write(pa.table({"a": [1]}), path, configuration={"delta.enableDeletionVectors": "false", "k": "v"}, spark=spark)
    actions = log_actions(path, 0)
    assert actions[1]["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    assert actions[2]["metaData"]["configuration"] == {"delta.enableDeletionVectors": "false", "k": "v"}
    assert_readers_see(path, pa.table({"a": [1]}))


def test_append_to_column_mapped_table_uses_physical_names(spark: Any, tmp_path: Path) -> None:
    """A table created (by hand, as another engine would) with column mapping 'name'."""
    path = str(tmp_path / "t")
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True,
         "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1111"}},
        {"name": "p", "type": "string", "nullable": True,
         "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2222"}},
        {"name": "st", "type": {"type": "struct", "fields": [
            {"name": "x", "type": "integer", "nullable": True,
             "metadata": {"delta.columnMapping.id": 4, "delta.columnMapping.physicalName": "col-4444"}}]},
         "nullable": True, "metadata": {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-3333"}},
    ]}
    txn = Transaction(path, None, "CREATE TABLE", {})
    txn.update_protocol(Protocol(3, 7, ("columnMapping",), ("columnMapping",)))
    txn.update_metadata(Metadata("cm", json.dumps(schema), ("p",),
                                 {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "4"}))
    txn.commit()
    data = pa.table({"id": [1, 2], "p": ["a", None], "st": pa.array([{"x": 7}, None], pa.struct([("x", pa.int32())]))})
    write(data, path, mode="append", spark=spark)
    adds = [a["add"] for a in log_actions(path, 1) if "add" in a]
    for a in adds:
        assert set(a["partitionValues"]) == {"col-2222"}
        file_schema = pq.read_schema(resolve_data_path(path, a["path"]))
        assert file_schema.names == ["col-1111", "col-3333"]
        assert file_schema.field("col-3333").type.field(0).name == "col-4444"
        assert "col-1111" in json.loads(a["stats"])["minValues"]
    assert rows_delta_rs(path) == _normalize(data.to_pylist())


def test_null_struct_above_a_not_null_field_is_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    """Delta's rule (InvariantEnforcementSuite "reject non-nullable nested column"): a NULL struct
    above a NOT NULL field counts as NULL; a Spark DataFrame append is refused like an Arrow one."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    path = str(tmp_path / "t")
    inner = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int64())])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("top", inner)])
    write(pa.table({"id": [1], "top": [{"key": "a", "value": 1}]}, schema=schema), path, spark=spark)
    before_files, before_log = data_files(path), commits(path)
    loose = StructType([
        StructField("id", LongType()),
        StructField("top", StructType([StructField("key", StringType()), StructField("value", LongType())])),
    ])
    for row in ((2, None), (4, (None, 4))):  # the struct NULL, or the field
        with pytest.raises(SchemaViolationError, match="'top.key'"):
            write(spark.createDataFrame([row], loose), path, mode="append", spark=spark)
        assert commits(path) == before_log and data_files(path) == before_files
    # an empty string is a value; the frame's nullable field is no reason to refuse (it was, by Spark's cast)
    write(spark.createDataFrame([(3, ("", 3))], loose), path, mode="append", spark=spark)
    assert len(commits(path)) == len(before_log) + 1
    assert_readers_see(path, pa.table({"id": [1, 3], "top": [{"key": "a", "value": 1}, {"key": "", "value": 3}]},
                                      schema=schema))
