"""Type widening (``typeWidening``): schema evolution widens columns of an enabled table, records each
change in ``delta.typeChanges``, and every reader casts files of the older, narrower type up.

Truth: a table whose log is written as Delta Spark 4.0 writes `CREATE TABLE ... TBLPROPERTIES
('delta.enableTypeWidening' = 'true')` and one INSERT (PROTOCOL.md "Type Widening"), a Python model
of the rows, DuckDB's delta_scan (delta-kernel-rs) reading every result, and delta-rs, which does not
support the feature (1.6: "Unsupported table features required: [TypeWidening]") and must refuse.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_arrow, rows_duckdb, rows_spark, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, SchemaMismatchError, UnsupportedFeatureError
from dvengine.log import load_snapshot
from dvengine.maintenance.column_type import change_column_type
from dvengine.maintenance.properties import set_table_properties
from dvengine.protocol.schema import DecimalType, PrimitiveType
from dvengine.protocol.type_widening import is_supported_for_schema_evolution, is_type_change_supported
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import AlterColumnTypeStatement

COLUMNS = ["id", "s", "f", "d", "day"]
P = PrimitiveType


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    (root / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def _delta_spark_table(root: Path, enabled: bool = True) -> str:
    """`CREATE TABLE t (id INT, s SHORT, f FLOAT, d DECIMAL(5,2), day DATE) TBLPROPERTIES
    ('delta.enableDeletionVectors'='true', 'delta.enableTypeWidening'='true')` and one INSERT of 3 rows,
    as Delta Spark 4.0 writes them (the feature in readerFeatures and writerFeatures)."""
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "s", "type": "short", "nullable": True, "metadata": {}},
        {"name": "f", "type": "float", "nullable": True, "metadata": {}},
        {"name": "d", "type": "decimal(5,2)", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
    ]}
    now = int(time.time() * 1000)
    config = {"delta.enableDeletionVectors": "true", "delta.enableTypeWidening": "true" if enabled else "false"}
    os.makedirs(root / "_delta_log")
    _commit(root, 0, [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE",
                        "operationParameters": {"partitionBy": "[]", "clusterBy": "[]", "description": None,
                                                "isManaged": "false", "properties": json.dumps(config)},
                        "isolationLevel": "Serializable", "isBlindAppend": True, "operationMetrics": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": config,
                      "createdTime": now}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors", "typeWidening"],
                      "writerFeatures": ["deletionVectors", "typeWidening"]}},
    ])
    rows = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()), "s": pa.array([10, 20, None], pa.int16()),
        "f": pa.array([1.5, 2.5, 3.5], pa.float32()),
        "d": pa.array([Decimal("1.25"), Decimal("2.50"), Decimal("-3.75")], pa.decimal128(5, 2)),
        "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None], pa.date32()),
    })
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(rows, root / name)
    size = (root / name).stat().st_size
    stats = {"numRecords": 3, "minValues": {"id": 1, "s": 10, "f": 1.5, "d": -3.75, "day": "2024-01-01"},
             "maxValues": {"id": 3, "s": 20, "f": 3.5, "d": 2.5, "day": "2024-01-02"},
             "nullCount": {"id": 0, "s": 1, "f": 0, "d": 0, "day": 1}, "tightBounds": True}
    _commit(root, 1, [
        {"commitInfo": {"timestamp": now + 1, "operation": "WRITE",
                        "operationParameters": {"mode": "Append", "partitionBy": "[]"}, "readVersion": 0,
                        "isolationLevel": "Serializable", "isBlindAppend": True, "operationMetrics": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"add": {"path": name, "partitionValues": {}, "size": size, "modificationTime": now, "dataChange": True,
                 "stats": json.dumps(stats)}},
    ])
    return str(root)


# (id, s, f, d, day) as the table types them after widening: day is a timestamp_ntz at midnight
MODEL0 = [
    (1, 10, 1.5, Decimal("1.250"), dt.datetime(2024, 1, 1)),
    (2, 20, 2.5, Decimal("2.500"), dt.datetime(2024, 1, 2)),
    (3, None, 3.5, Decimal("-3.750"), None),
]


def _wider_rows(**values: list[Any]) -> pa.Table:
    types = {"id": pa.int64(), "s": pa.int32(), "f": pa.float64(), "d": pa.decimal128(9, 3), "day": pa.timestamp("us")}
    return pa.table({k: pa.array(v, types[k]) for k, v in values.items()})


def _field_changes(root: str) -> dict[str, tuple[str, list[Any]]]:
    schema = json.loads(load_snapshot(root).metadata.schema_string)
    return {f["name"]: (f["type"], f["metadata"].get("delta.typeChanges", [])) for f in schema["fields"]}


def _readers(root: str, model: list[tuple[Any, ...]]) -> None:
    want = sort_rows(model)
    assert rows_arrow(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want


def _widened(tmp_path: Path) -> str:
    root = _delta_spark_table(tmp_path / "t")
    dvengine.write(_wider_rows(id=[4], s=[40000], f=[4.5], d=[Decimal("12345.125")], day=[dt.datetime(2024, 1, 3, 12)]),
                   root, mode="append", mergeSchema=True)
    return root


# --- the rules ------------------------------------------------------------------------------------


def test_protocol_widenings_and_the_schema_evolution_subset() -> None:
    allowed = [(P("byte"), P("short")), (P("short"), P("integer")), (P("integer"), P("long")), (P("byte"), P("long")),
               (P("float"), P("double")), (P("integer"), P("double")), (P("date"), P("timestamp_ntz")),
               (DecimalType(5, 2), DecimalType(7, 4)), (P("integer"), DecimalType(10, 0)), (P("long"), DecimalType(22, 2))]
    refused = [(P("long"), P("integer")), (P("double"), P("float")), (P("long"), P("double")), (P("date"), P("timestamp")),
               (DecimalType(5, 2), DecimalType(5, 3)), (DecimalType(5, 2), DecimalType(6, 1)), (P("long"), DecimalType(20, 1)),
               (P("integer"), DecimalType(9, 0)), (P("integer"), P("string")), (P("float"), DecimalType(38, 10))]
    for frm, to in allowed:
        assert is_type_change_supported(frm, to), (frm, to)
    for frm, to in refused:
        assert not is_type_change_supported(frm, to), (frm, to)
    # schema evolution widens within a type family only; integer -> double / decimal needs ALTER TABLE in Delta
    assert is_supported_for_schema_evolution(P("short"), P("long"))
    assert is_supported_for_schema_evolution(DecimalType(5, 2), DecimalType(9, 3))
    assert is_supported_for_schema_evolution(P("date"), P("timestamp_ntz"))
    assert not is_supported_for_schema_evolution(P("integer"), P("double"))
    assert not is_supported_for_schema_evolution(P("integer"), DecimalType(12, 0))


# --- append with mergeSchema -----------------------------------------------------------------------


def test_merge_schema_widens_and_records_type_changes(tmp_path: Path) -> None:
    root = _widened(tmp_path)
    snapshot = load_snapshot(root)
    assert snapshot.version == 2
    assert "timestampNtz" in (snapshot.protocol.reader_features or ())  # date -> timestamp_ntz needs the feature
    assert _field_changes(root) == {
        "id": ("long", [{"fromType": "integer", "toType": "long"}]),
        "s": ("integer", [{"fromType": "short", "toType": "integer"}]),
        "f": ("double", [{"fromType": "float", "toType": "double"}]),
        "d": ("decimal(9,3)", [{"fromType": "decimal(5,2)", "toType": "decimal(9,3)"}]),
        "day": ("timestamp_ntz", [{"fromType": "date", "toType": "timestamp_ntz"}]),
    }
    model = [*MODEL0, (4, 40000, 4.5, Decimal("12345.125"), dt.datetime(2024, 1, 3, 12))]
    _readers(root, model)
    from deltalake import DeltaTable as RsTable
    from deltalake.exceptions import DeltaError

    with pytest.raises(DeltaError, match="(?i)typeWidening"):  # delta-rs 1.x does not support the feature
        RsTable(root).to_pyarrow_table()
    # a second widening appends to the history
    dvengine.write(pa.table({"s": pa.array([7], pa.int64())}), root, mode="append", mergeSchema=True)
    assert _field_changes(root)["s"] == ("long", [{"fromType": "short", "toType": "integer"},
                                                  {"fromType": "integer", "toType": "long"}])
    _readers(root, [*model, (None, 7, None, None, None)])


@pytest.mark.parametrize(
    ("enabled", "data", "why"),
    [
        (False, pa.table({"id": pa.array([9], pa.int64())}), "delta.enableTypeWidening=true"),
        (True, pa.table({"id": pa.array(["x"], pa.string())}), "not a widening"),
        (True, pa.table({"id": pa.array([9.5], pa.float64())}), "not a widening"),  # integer -> double: ALTER only
        (True, pa.table({"d": pa.array([Decimal("1.5")], pa.decimal128(5, 1))}), r"decimal\(5,2\) and the data decimal\(5,1\)"),  # scale shrinks
    ],
)
def test_refused_type_changes_leave_the_table_unchanged(tmp_path: Path, enabled: bool, data: pa.Table, why: str) -> None:
    root = _delta_spark_table(tmp_path / "t", enabled=enabled)
    files = sorted(str(f) for f in Path(root).rglob("*"))
    with pytest.raises(SchemaMismatchError, match=why):
        dvengine.write(data, root, mode="append", mergeSchema=True)
    assert sorted(str(f) for f in Path(root).rglob("*")) == files
    with pytest.raises(SchemaMismatchError):  # without mergeSchema nothing widens, enabled or not
        dvengine.write(pa.table({"id": pa.array([9], pa.int64())}), root, mode="append")


def test_overwrite_with_merge_schema_widens(tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([2**40], pa.int64())}), root, mode="overwrite", mergeSchema=True)
    assert _field_changes(root)["id"] == ("long", [{"fromType": "integer", "toType": "long"}])
    _readers(root, [(2**40, None, None, None, None)])


# --- DML with DVs on a widened table whose first file still has the narrow types --------------------


def test_dml_with_deletion_vectors_on_a_widened_table(tmp_path: Path) -> None:
    root = _widened(tmp_path)
    model = [*MODEL0, (4, 40000, 4.5, Decimal("12345.125"), dt.datetime(2024, 1, 3, 12))]
    table = DeltaTable.forPath(None, root)
    # stats of the narrow file ("2024-01-01" for a date) still prune the widened timestamp_ntz column
    metrics = table.delete("day < TIMESTAMP_NTZ'2024-01-01 06:00:00'", mode="dv")
    assert (metrics["numDeletedRows"], metrics["numDeletionVectorsAdded"], metrics["numFilesSkippedByStats"]) == (1, 1, 1)
    model = [r for r in model if r[0] != 1]
    _readers(root, model)
    metrics = table.update("id = 2", {"s": "s + 100000", "d": "5"}, mode="dv")
    assert metrics["numUpdatedRows"] == 1 and metrics["numDeletionVectorsUpdated"] + metrics["numDeletionVectorsAdded"] == 1
    model = [(2, 100020, 2.5, Decimal("5.000"), dt.datetime(2024, 1, 2)) if r[0] == 2 else r for r in model]
    _readers(root, model)
    # MERGE widens `s` (integer -> long) and `d` (decimal(9,3) -> decimal(12,4)) by schema evolution
    src = pa.table({"id": pa.array([3, 9], pa.int64()), "s": pa.array([2**40, 5], pa.int64()),
                    "d": pa.array([Decimal("1.5"), Decimal("-0.0001")], pa.decimal128(12, 4))})
    (DeltaTable.forPath(None, root).alias("t").merge(src, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"s": "s.s", "d": "s.d"}).whenNotMatchedInsert(values={"id": "s.id", "s": "s.s", "d": "s.d"})
     .withSchemaEvolution().withMode("dv").execute())
    changes = _field_changes(root)
    assert changes["s"] == ("long", [{"fromType": "short", "toType": "integer"}, {"fromType": "integer", "toType": "long"}])
    assert changes["d"] == ("decimal(12,4)", [{"fromType": "decimal(5,2)", "toType": "decimal(9,3)"},
                                              {"fromType": "decimal(9,3)", "toType": "decimal(12,4)"}])
    model = [(3, 2**40, 3.5, Decimal("1.5000"), None) if r[0] == 3 else (*r[:3], Decimal(r[3]).quantize(Decimal("0.0001")), r[4])
             for r in model] + [(9, 5, None, Decimal("-0.0001"), None)]
    _readers(root, model)
    # without evolution a MERGE casts a wider source to the table type, as any MERGE does
    src = pa.table({"id": pa.array([9], pa.int64()), "f": pa.array([0.25], pa.float64())})
    DeltaTable.forPath(None, root).alias("t").merge(src, "t.id = s.id", source_alias="s").whenMatchedUpdate(set={"f": "s.f"}).execute()
    model = [(9, 5, 0.25, Decimal("-0.0001"), None) if r[0] == 9 else r for r in model]
    _readers(root, model)


def test_spark_reads_and_changes_a_widened_table(spark: Any, tmp_path: Path) -> None:
    root = _widened(tmp_path)
    model = [*MODEL0, (4, 40000, 4.5, Decimal("12345.125"), dt.datetime(2024, 1, 3, 12))]
    assert rows_spark(spark, root, COLUMNS) == sort_rows(model)  # the narrow file cast up by Spark's Parquet reader
    table = DeltaTable.forPath(spark, root)
    table.update("id = 1", {"s": "s + 70000"}, mode="dv", engine="spark")
    model = [(1, 70010, *r[2:]) if r[0] == 1 else r for r in model]
    src = spark.createDataFrame([(2, 2**35), (8, 1)], "id long, s long")
    (table.alias("t").merge(src.alias("x"), "t.id = x.id").whenMatchedUpdate(set={"s": "x.s"})
     .whenNotMatchedInsert(values={"id": "x.id", "s": "x.s"}).withSchemaEvolution().withEngine("spark").execute())
    model = [(2, 2**35, *r[2:]) if r[0] == 2 else r for r in model] + [(8, 1, None, None, None)]
    assert _field_changes(root)["s"][0] == "long"
    _readers(root, model)
    assert rows_spark(spark, root, COLUMNS) == sort_rows(model)
    dvengine.sql(spark, f"ALTER TABLE delta.`{root}` CHANGE COLUMN d TYPE DECIMAL(14, 4)")
    assert _field_changes(root)["d"][0] == "decimal(14,4)"
    model = [(*r[:3], None if r[3] is None else Decimal(r[3]).quantize(Decimal("0.0001")), r[4]) for r in model]
    assert rows_spark(spark, root, COLUMNS) == sort_rows(model)
    _readers(root, model)


# --- enabling, and the reader check --------------------------------------------------------------------


def test_enabling_by_property_adds_the_feature(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1], pa.int32())}), root)
    set_table_properties(root, {"delta.enableTypeWidening": "true"})
    protocol = load_snapshot(root).protocol
    assert "typeWidening" in (protocol.reader_features or ()) and "typeWidening" in (protocol.writer_features or ())
    dvengine.write(pa.table({"id": pa.array([2**33], pa.int64())}), root, mode="append", mergeSchema=True)
    assert _field_changes(root)["id"] == ("long", [{"fromType": "integer", "toType": "long"}])
    assert rows_duckdb(root, ["id"]) == [(1,), (2**33,)]
    created = str(tmp_path / "c")
    dvengine.write(pa.table({"id": pa.array([1], pa.int32())}), created, configuration={"delta.enableTypeWidening": "true"})
    assert "typeWidening" in (load_snapshot(created).protocol.writer_features or ())


def test_a_type_change_outside_the_protocol_is_refused_on_read(tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "t")
    snapshot = load_snapshot(root)
    schema = json.loads(snapshot.metadata.schema_string)
    schema["fields"][0]["type"] = "string"
    schema["fields"][0]["metadata"]["delta.typeChanges"] = [{"fromType": "integer", "toType": "string"}]
    metadata = json.loads(Path(root, "_delta_log", f"{0:020d}.json").read_text().splitlines()[1])
    metadata["metaData"]["schemaString"] = json.dumps(schema)
    _commit(Path(root), 2, [{"commitInfo": {"timestamp": 1}}, metadata])
    with pytest.raises(UnsupportedFeatureError, match="'id'.*integer -> string"):
        load_snapshot(root)


# --- ALTER TABLE ... ALTER COLUMN ... TYPE ----------------------------------------------------------


def test_alter_column_type_applies_the_changes_schema_evolution_does_not(tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "t")
    change_column_type(root, "id", "DOUBLE")  # integer -> double: ALTER only
    change_column_type(root, "s", "DECIMAL(12, 2)")  # short -> decimal(10 + 2, 2)
    change_column_type(root, "`day`", "TIMESTAMP_NTZ")
    changes = _field_changes(root)
    assert changes["id"] == ("double", [{"fromType": "integer", "toType": "double"}])
    assert changes["s"] == ("decimal(12,2)", [{"fromType": "short", "toType": "decimal(12,2)"}])
    assert changes["day"] == ("timestamp_ntz", [{"fromType": "date", "toType": "timestamp_ntz"}])
    history = DeltaTable.forPath(None, root).history()
    assert [h["operation"] for h in history[:3]] == ["CHANGE COLUMN"] * 3  # type: ignore[index]
    model = [(float(r[0]), None if r[1] is None else Decimal(r[1]).quantize(Decimal("0.01")), *r[2:]) for r in MODEL0]
    _readers(root, model)
    DeltaTable.forPath(None, root).delete("id = 2.0", mode="dv")
    _readers(root, [r for r in model if r[0] != 2.0])


def test_alter_column_type_sql_without_a_session_runs_in_process(tmp_path: Path) -> None:
    """``dvengine.sql(None, "ALTER TABLE ... ALTER COLUMN c TYPE t")`` is metadata-only work, like the
    other ALTER TABLE column statements: it must not start a SparkSession (it used to start
    dvengine's default session, a JVM, before committing in-process anyway)."""
    from unittest import mock

    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int32()), "s": pa.array([{"x": 1}, None], pa.struct([("x", pa.int32())]))}),
                   str(root), configuration={"delta.enableTypeWidening": "true", "delta.columnMapping.mode": "name"})
    with mock.patch("dvengine.engine.spark.session.get_or_create_session", side_effect=AssertionError("Spark started")):
        assert dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN id TYPE BIGINT").num_rows == 0
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN s.x TYPE BIGINT")
    table = DeltaTable.forPath(None, root).toArrow()
    assert table.schema.field("id").type == pa.int64() and table.schema.field("s").type.field("x").type == pa.int64()
    assert table.to_pylist() == [{"id": 1, "s": {"x": 1}}, {"id": 2, "s": None}]


@pytest.mark.parametrize(
    ("column", "type_text", "error", "why"),
    [
        ("id", "SMALLINT", SchemaMismatchError, "integer -> short is not a widening"),
        ("d", "DECIMAL(5,3)", SchemaMismatchError, r"decimal\(5,2\) -> decimal\(5,3\)"),
        ("f", "STRING", SchemaMismatchError, "float -> string"),
        ("nope", "BIGINT", InvalidArgumentError, "no column 'nope'"),
    ],
)
def test_alter_column_type_refusals(tmp_path: Path, column: str, type_text: str, error: type[Exception], why: str) -> None:
    root = _delta_spark_table(tmp_path / "t")
    before = sorted(str(f) for f in Path(root).rglob("*"))
    with pytest.raises(error, match=why):
        change_column_type(root, column, type_text)
    assert sorted(str(f) for f in Path(root).rglob("*")) == before


def test_alter_column_type_needs_the_property_and_leaves_dependent_columns(tmp_path: Path) -> None:
    root = _delta_spark_table(tmp_path / "off", enabled=False)
    with pytest.raises(OperationNotAllowedError, match="delta.enableTypeWidening=true"):
        change_column_type(root, "id", "BIGINT")
    root = _delta_spark_table(tmp_path / "c")
    set_table_properties(root, {"delta.constraints.positive": "id > 0"})
    with pytest.raises(OperationNotAllowedError, match="constraint positive"):
        change_column_type(root, "id", "BIGINT")
    change_column_type(root, "s", "INT")  # a column no constraint reads
    part = str(tmp_path / "p")
    dvengine.write(pa.table({"k": pa.array([1], pa.int32()), "v": pa.array([1], pa.int32())}), part, partitionBy=["k"],
                   configuration={"delta.enableTypeWidening": "true"})
    with pytest.raises(UnsupportedFeatureError, match="partition column"):
        change_column_type(part, "k", "BIGINT")


def test_alter_column_type_sql_forms_parse() -> None:
    for text in ("ALTER TABLE delta.`/t` ALTER COLUMN a.b TYPE DECIMAL(12, 2)",
                 "ALTER TABLE t CHANGE COLUMN a.b TYPE DECIMAL(12, 2)", "alter table t change a.b type decimal(12, 2)"):
        [stmt] = parse_sql(text)
        assert isinstance(stmt, AlterColumnTypeStatement), text
        assert (stmt.column, stmt.data_type.upper()) == ("a.b", "DECIMAL(12, 2)")


# --- nested fields ---------------------------------------------------------------------------------


def test_nested_fields_record_their_changes_where_the_protocol_says(tmp_path: Path) -> None:
    root = str(tmp_path / "n")
    first = pa.table({"id": pa.array([1], pa.int64()),
                      "st": pa.array([{"x": 1}], pa.struct([("x", pa.int16())])),
                      "arr": pa.array([[1, 2]], pa.list_(pa.int32())),
                      "m": pa.array([[("a", 1.5)]], pa.map_(pa.string(), pa.float32()))})
    dvengine.write(first, root, configuration={"delta.enableTypeWidening": "true"})
    wider = pa.table({"id": pa.array([2], pa.int64()),
                      "st": pa.array([{"x": 70000}], pa.struct([("x", pa.int32())])),
                      "arr": pa.array([[2**40]], pa.list_(pa.int64())),
                      "m": pa.array([[("b", 0.1)]], pa.map_(pa.string(), pa.float64()))})
    dvengine.write(wider, root, mode="append", mergeSchema=True)
    schema = json.loads(load_snapshot(root).metadata.schema_string)
    fields = {f["name"]: f for f in schema["fields"]}
    assert fields["st"]["metadata"] == {}  # the struct's own field x carries its change
    assert fields["st"]["type"]["fields"][0]["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer"}]
    assert fields["arr"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long", "fieldPath": "element"}]
    assert fields["m"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double", "fieldPath": "value"}]
    got = sorted(DeltaTable.forPath(None, root).toArrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["st"]["x"], r["arr"], dict(r["m"])) for r in got] == [(1, [1, 2], {"a": 1.5}), (70000, [2**40], {"b": 0.1})]
    duck = sorted(rows_duckdb(root, ["id", "st", "arr"]))
    assert duck == [(1, {"x": 1}, [1, 2]), (2, {"x": 70000}, [2**40])]
