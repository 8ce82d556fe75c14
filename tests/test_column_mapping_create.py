"""Column-mapped tables made by dvengine (issue 26): created in mode ``name`` / ``id`` through
``dvengine.write``, the table builders and SQL ``CREATE TABLE ... TBLPROPERTIES``, or upgraded from
``none`` to ``name`` by ``ALTER TABLE SET TBLPROPERTIES``; then appended to and changed by DELETE /
UPDATE / MERGE with deletion vectors on both executors.

The truth is independent of dvengine's reader: the raw log is walked for the protocol's column
mapping invariants (an id and a physical name on every field at every nesting level, ``col-<uuid>``
for new tables and the logical name for upgraded ones, unique ids, ``maxColumnId`` their maximum,
the ``columnMapping`` feature in the protocol), every live Parquet file for physical names and
field ids, and the rows against an in-memory model with delta-rs (QueryBuilder) and DuckDB
(delta-kernel-rs), which resolve physical names themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.log import load_snapshot
from dvengine.maintenance.properties import set_table_properties, unset_table_properties
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.mapping_modes import with_column_mapping
from dvengine.storage import resolve_data_path

COLS = ["id", "v", "p", "st"]
DATA_COLS = ["id", "v", "st"]  # DuckDB 1.4.4 reads partition columns of mapped tables as NULL (see below)
ST = pa.struct([("x", pa.int32()), ("tags", pa.list_(pa.struct([("z", pa.int32())])))])
SPARK_SCHEMA = "id long, v string, p string, st struct<x: int, tags: array<struct<z: int>>>"
UUID_NAME = re.compile(r"^col-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
Model = dict[int, tuple[Any, ...]]


def _st(i: int) -> dict[str, Any] | None:
    return None if i % 5 == 0 else {"x": i, "tags": [{"z": i}, {"z": -i}] if i % 2 else []}


def _rows(ids: list[int], v: str) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([f"{v}{i}" for i in ids]),
        "p": pa.array([f"p{i % 3}" for i in ids]),
        "st": pa.array([_st(i) for i in ids], ST),
    })


def _model(table: pa.Table) -> Model:
    return {r["id"]: (r["id"], r["v"], r["p"], r["st"]) for r in table.to_pylist()}


def _log(root: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for path in sorted((root / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            yield int(path.stem), json.loads(line)


def _latest(root: Path, kind: str) -> dict[str, Any]:
    found = [a[kind] for _, a in _log(root) if kind in a]
    assert found, f"no {kind} action in {root}"
    return found[-1]


def _fields(data_type: Any) -> Iterator[dict[str, Any]]:
    """Every struct field inside a schema-JSON type, through arrays and maps, parents first."""
    if isinstance(data_type, dict) and data_type.get("type") == "struct":
        for f in data_type["fields"]:
            yield f
            yield from _fields(f["type"])
    elif isinstance(data_type, dict) and data_type.get("type") == "array":
        yield from _fields(data_type["elementType"])
    elif isinstance(data_type, dict) and data_type.get("type") == "map":
        yield from _fields(data_type["keyType"])
        yield from _fields(data_type["valueType"])


def check_mapped_log(root: Path, mode: str, upgraded: bool = False) -> dict[str, Any]:
    """The raw log's column mapping invariants; returns the latest schema JSON."""
    metadata = _latest(root, "metaData")
    config = metadata["configuration"]
    assert config["delta.columnMapping.mode"] == mode
    schema = json.loads(metadata["schemaString"])
    fields = list(_fields(schema))
    assert len(fields) == 7  # id, v, p, st, st.x, st.tags, st.tags.element.z
    ids = [f["metadata"]["delta.columnMapping.id"] for f in fields]
    assert all(isinstance(i, int) for i in ids) and len(set(ids)) == len(ids)
    assert int(config["delta.columnMapping.maxColumnId"]) == max(ids)
    for f in fields:
        physical = f["metadata"]["delta.columnMapping.physicalName"]
        assert physical == f["name"] if upgraded else UUID_NAME.match(physical), (f["name"], physical)
    protocol = _latest(root, "protocol")
    if protocol["minWriterVersion"] >= 7:
        assert protocol["minReaderVersion"] == 3
        assert "columnMapping" in protocol["readerFeatures"] and "columnMapping" in protocol["writerFeatures"]
    else:
        assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (2, 5)
    return schema


def _check_arrow_field(arrow: pa.Field, delta: dict[str, Any], where: str) -> None:
    meta = delta["metadata"]
    assert arrow.name == meta["delta.columnMapping.physicalName"], where
    # Delta writes Parquet field ids in both modes ("the spec requires writers to always write them")
    assert (arrow.metadata or {}).get(b"PARQUET:field_id") == str(meta["delta.columnMapping.id"]).encode(), where
    _check_arrow_type(arrow.type, delta["type"], where)


def _check_arrow_type(arrow: pa.DataType, delta: Any, where: str) -> None:
    if isinstance(delta, dict) and delta["type"] == "struct":
        assert pa.types.is_struct(arrow) and arrow.num_fields == len(delta["fields"]), where
        for i, f in enumerate(delta["fields"]):
            _check_arrow_field(arrow.field(i), f, f"{where}.{f['name']}")
    elif isinstance(delta, dict) and delta["type"] == "array":
        _check_arrow_type(arrow.value_type, delta["elementType"], f"{where}[]")


def check_physical_files(root: Path) -> None:
    """Every live file stores each non-partition column under its physical name and field id."""
    schema = json.loads(_latest(root, "metaData")["schemaString"])
    partitions = set(_latest(root, "metaData")["partitionColumns"])
    data = [f for f in schema["fields"] if f["name"] not in partitions]
    snapshot = load_snapshot(str(root))
    assert snapshot.files
    for add in snapshot.files:
        file_schema = pq.read_schema(resolve_data_path(str(root), add.path))
        assert len(file_schema) == len(data), (add.path, file_schema.names)
        for arrow, delta in zip(file_schema, data, strict=True):
            _check_arrow_field(arrow, delta, f"{add.path}:{delta['name']}")
        physical = {f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"] if f["name"] in partitions}
        assert set(add.partition_values) == physical


def check_rows(root: Path, model: Model, spark: Any = None) -> None:
    want = sort_rows(list(model.values()))
    assert rows_arrow(root, COLS) == want
    assert rows_delta_rs(root, COLS) == want
    # DuckDB's delta extension (1.4.4) returns NULL partition values for mapped tables whose
    # physical names differ from the logical ones (also for delta-rs' tables): data columns only,
    # plus the partition column when the physical names are the logical ones (upgraded tables).
    mapped_p = _latest(root, "metaData")["schemaString"].find('"physicalName":"p"') < 0
    cols = DATA_COLS if mapped_p else COLS
    assert rows_duckdb(root, cols) == sort_rows([tuple(r[COLS.index(c)] for c in cols) for r in model.values()])
    if spark is not None:  # dvengine's Spark reader; nested Rows as dicts
        rows = [r.asDict(recursive=True) for r in DeltaTable.forPath(spark, str(root)).toDF().collect()]
        assert sort_rows([tuple(r[c] for c in COLS) for r in rows]) == want


def run_dml(root: Path, model: Model, spark: Any, engine: str) -> None:
    """Append, DELETE, UPDATE and MERGE with deletion vectors on ``engine``; the model follows."""
    version = load_snapshot(str(root)).version
    appended: Any = spark.createDataFrame(_rows([20, 21, 22], "a").to_pylist(), SPARK_SCHEMA) if engine == "spark" \
        else _rows([20, 21, 22], "a")
    dvengine.write(appended, str(root), mode="append", spark=spark if engine == "spark" else None)
    model |= _model(_rows([20, 21, 22], "a"))
    table = DeltaTable.forPath(spark if engine == "spark" else None, str(root))
    m = table.deleteMetrics("id % 4 = 1 OR st.x = 21", mode="dv", engine=engine)
    gone = [k for k, r in model.items() if k % 4 == 1 or (r[3] is not None and r[3]["x"] == 21)]
    assert m["numDeletedRows"] == len(gone) and m["numDeletionVectorsAdded"] > 0
    for k in gone:
        del model[k]
    m = table.updateMetrics("p = 'p0'", {"v": "'upd'", "st": "NULL"}, mode="dv", engine=engine)
    hit = [k for k, r in model.items() if r[2] == "p0"]
    assert m["numUpdatedRows"] == len(hit)
    for k in hit:
        model[k] = (k, "upd", model[k][2], None)
    # no struct column in the source: the local MERGE's Arrow join refuses struct payload columns
    # (raw ArrowInvalid, reported) and cannot store a struct value from the source
    source = _rows([2, 3, 30, 31], "m").drop_columns(["st"])
    src: Any = spark.createDataFrame(source.to_pylist(), "id long, v string, p string") if engine == "spark" else source
    m = (table.alias("t").merge(src, "t.id = s.id", source_alias="s")
         .whenMatchedUpdate(set={"v": "s.v"})
         .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "p": "s.p"})
         .withEngine(engine).withMode("dv").executeMetrics())
    for r in source.to_pylist():
        k = r["id"]
        model[k] = (k, r["v"], *model[k][2:]) if k in model else (k, r["v"], r["p"], None)
    assert m["numTargetRowsInserted"] == 2 and m["numTargetRowsUpdated"] == 2
    assert any(f.deletion_vector is not None for f in load_snapshot(str(root)).files)
    assert load_snapshot(str(root)).version == version + 4


@pytest.mark.parametrize("mode", ["name", "id"])
def test_write_creates_a_mapped_table_changed_locally(tmp_path: Path, mode: str) -> None:
    root = tmp_path / mode
    first = _rows(list(range(12)), "v")
    dvengine.write(first, str(root), partitionBy=["p"], configuration={"delta.columnMapping.mode": mode})
    check_mapped_log(root, mode)
    assert _latest(root, "protocol") == {"minReaderVersion": 3, "minWriterVersion": 7,
                                         "readerFeatures": ["columnMapping", "deletionVectors"],
                                         "writerFeatures": ["columnMapping", "deletionVectors"]}
    check_physical_files(root)
    model = _model(first)
    check_rows(root, model)
    before = {f["name"]: f["metadata"] for f in _fields(check_mapped_log(root, mode))}
    run_dml(root, model, None, "local")
    check_rows(root, model)
    check_physical_files(root)
    assert {f["name"]: f["metadata"] for f in _fields(check_mapped_log(root, mode))} == before  # DML keeps the mapping


def test_mapped_table_without_deletion_vectors_is_legacy_2_5(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(_rows([1, 2, 3], "v"), str(root), configuration={
        "delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "false"})
    assert _latest(root, "protocol") == {"minReaderVersion": 2, "minWriterVersion": 5}
    check_mapped_log(root, "name")
    model = _model(_rows([1, 2, 3], "v"))
    DeltaTable.forPath(None, str(root)).deleteMetrics("id = 2")  # a rewrite: no DVs on this table
    del model[2]
    check_rows(root, model)
    check_physical_files(root)


def test_create_refuses_a_mode_that_is_none_of_none_name_id(tmp_path: Path) -> None:
    root = tmp_path / "t"
    with pytest.raises(InvalidArgumentError, match="'names' is not supported.*DELTA_MODE_NOT_SUPPORTED"):
        dvengine.write(_rows([1], "v"), str(root), configuration={"delta.columnMapping.mode": "names"})
    with pytest.raises(InvalidArgumentError, match="maxColumnId='x'"):
        DeltaTable.create(None).location(str(root)).addColumn("id", "BIGINT") \
            .property("delta.columnMapping.mode", "name").property("delta.columnMapping.maxColumnId", "x").execute()
    assert not root.exists() or not any(root.rglob("*"))


@pytest.mark.parametrize("mode", ["name", "id"])
def test_builder_creates_and_replaces_a_mapped_table(tmp_path: Path, mode: str) -> None:
    root = tmp_path / mode

    def builder(how: Any) -> Any:
        return (how(None).location(str(root)).addColumn("id", "BIGINT").addColumn("v", "STRING")
                .addColumn("p", "STRING").addColumn("st", "STRUCT<x: INT, tags: ARRAY<STRUCT<z: INT>>>")
                .partitionedBy("p").property("delta.columnMapping.mode", mode))

    builder(DeltaTable.create).execute()
    check_mapped_log(root, mode)
    assert _latest(root, "metaData")["configuration"]["delta.columnMapping.maxColumnId"] == "7"
    dvengine.write(_rows(list(range(8)), "v"), str(root), mode="append")
    model = _model(_rows(list(range(8)), "v"))
    check_physical_files(root)
    check_rows(root, model)
    # REPLACE: fresh physical names, ids counting on from the old maxColumnId (as Delta)
    builder(DeltaTable.replace).execute()
    check_mapped_log(root, mode)
    ids = sorted(f["metadata"]["delta.columnMapping.id"] for f in _fields(json.loads(_latest(root, "metaData")["schemaString"])))
    assert ids == list(range(8, 15))
    dvengine.write(_rows([100, 101], "r"), str(root), mode="append")
    check_rows(root, _model(_rows([100, 101], "r")))


def test_mapped_table_with_row_tracking_at_create(tmp_path: Path) -> None:
    """Row tracking's materialized column names are chosen beside the mapped physical names."""
    root = tmp_path / "t"
    dvengine.write(_rows([1, 2, 3], "v"), str(root), configuration={
        "delta.columnMapping.mode": "name", "delta.enableRowTracking": "true", "delta.enableDeletionVectors": "false"})
    protocol = _latest(root, "protocol")
    assert protocol["minReaderVersion"] == 3 and protocol["readerFeatures"] == ["columnMapping"]
    assert {"columnMapping", "rowTracking", "domainMetadata"} <= set(protocol["writerFeatures"])
    check_mapped_log(root, "name")
    model = _model(_rows([1, 2, 3], "v"))
    DeltaTable.forPath(None, str(root)).updateMetrics("id = 2", {"v": "'two'"})
    model[2] = (2, "two", *model[2][2:])
    check_rows(root, model)


def test_clustered_mapped_table_names_physical_columns_in_its_domain(tmp_path: Path) -> None:
    """The ``delta.clustering`` domain holds physical names (PROTOCOL.md "Clustered Table"); after
    OPTIMIZE every reader still sees the rows."""
    root = tmp_path / "t"
    DeltaTable.create(None).location(str(root)).addColumn("x", "BIGINT").addColumn("y", "BIGINT").clusterBy("x") \
        .property("delta.columnMapping.mode", "name").execute()
    domain = next(a["domainMetadata"] for _, a in _log(root) if "domainMetadata" in a)
    schema = json.loads(_latest(root, "metaData")["schemaString"])
    assert json.loads(domain["configuration"]) == {
        "clusteringColumns": [[schema["fields"][0]["metadata"]["delta.columnMapping.physicalName"]]]}
    model = []
    for i in range(3):
        dvengine.write(pa.table({"x": pa.array([3 - i, 10 + i], pa.int64()), "y": pa.array([i, i], pa.int64())}),
                       str(root), mode="append")
        model += [(3 - i, i), (10 + i, i)]
    assert DeltaTable.forPath(None, str(root)).optimize().executeCompaction()["metrics"]["numFilesRemoved"] == 3
    assert rows_arrow(root, ["x", "y"]) == rows_delta_rs(root, ["x", "y"]) == rows_duckdb(root, ["x", "y"]) == sort_rows(model)


def test_spark_executor_creates_and_changes_a_mapped_table(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    first = _rows(list(range(12)), "v")
    # one Spark partition: one file per table partition, so a DELETE of some rows leaves DVs
    dvengine.write(spark.createDataFrame(first.to_pylist(), SPARK_SCHEMA).coalesce(1), str(root), partitionBy=["p"], configuration={"delta.columnMapping.mode": "id"}, spark=spark)
    check_mapped_log(root, "id")
    check_physical_files(root)
    model = _model(first)
    run_dml(root, model, spark, "spark")
    check_physical_files(root)
    check_rows(root, model, spark)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_sql_create_table_with_tblproperties(spark: Any, tmp_path: Path, mode: str) -> None:
    root = tmp_path / mode
    dvengine.sql(spark, f"CREATE TABLE delta.`{root}` (id BIGINT, v STRING, p STRING, "
                        "st STRUCT<x: INT, tags: ARRAY<STRUCT<z: INT>>>) USING delta PARTITIONED BY (p) "
                        f"TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')")
    check_mapped_log(root, mode)
    dvengine.write(_rows(list(range(6)), "v"), str(root), mode="append")
    model = _model(_rows(list(range(6)), "v"))
    dvengine.sql(spark, f"DELETE FROM delta.`{root}` WHERE id = 4")
    del model[4]
    check_physical_files(root)
    check_rows(root, model, spark)


@pytest.mark.parametrize("dvs", ["true", "false"])
def test_upgrade_none_to_name_keeps_old_files_readable(tmp_path: Path, dvs: str) -> None:
    """ALTER TABLE SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name') on an unmapped table with
    files and (with DVs) a deletion vector: one metadata commit, no file rewritten, the physical
    names are the logical ones; old and new files read alike by every reader."""
    root = tmp_path / dvs
    dvengine.write(_rows(list(range(10)), "v"), str(root), partitionBy=["p"],
                   configuration={"delta.enableDeletionVectors": dvs})
    model = _model(_rows(list(range(10)), "v"))
    DeltaTable.forPath(None, str(root)).deleteMetrics("id = 3")
    del model[3]
    files_before = sorted(p.name for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts)
    before = load_snapshot(str(root))
    version = set_table_properties(str(root), {"delta.columnMapping.mode": "name"})
    commit = [a for v, a in _log(root) if v == version]
    assert {next(iter(a)) for a in commit} == {"commitInfo", "metaData", "protocol"}
    check_mapped_log(root, "name", upgraded=True)
    protocol = _latest(root, "protocol")
    if dvs == "true":
        assert protocol == {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["columnMapping", "deletionVectors"],
                            "writerFeatures": ["columnMapping", "deletionVectors"]}
    else:
        assert protocol == {"minReaderVersion": 2, "minWriterVersion": 5}
    assert sorted(p.name for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts) == files_before
    assert [f.path for f in load_snapshot(str(root)).files] == [f.path for f in before.files]
    check_rows(root, model)
    # new files under the mapping: physical = logical names, with field ids
    dvengine.write(_rows([40, 41], "n"), str(root), mode="append")
    model |= _model(_rows([40, 41], "n"))
    DeltaTable.forPath(None, str(root)).updateMetrics("id = 40 OR id = 5", {"v": "'u'"})
    for k in (40, 5):
        model[k] = (k, "u", *model[k][2:])
    check_rows(root, model)
    new_file = next(f for f in load_snapshot(str(root)).files if f.path not in {g.path for g in before.files})
    assert (pq.read_schema(resolve_data_path(str(root), new_file.path)).field("id").metadata or {}).get(
        b"PARQUET:field_id") == b"1"


@pytest.mark.parametrize(
    ("start", "change", "error", "fragment"),
    [
        ("none", {"delta.columnMapping.mode": "id"}, UnsupportedFeatureError, "from 'none' to 'id' is not supported"),
        ("name", {"delta.columnMapping.mode": "id"}, UnsupportedFeatureError, "from 'name' to 'id' is not supported"),
        ("id", {"delta.columnMapping.mode": "name"}, UnsupportedFeatureError, "from 'id' to 'name' is not supported"),
        ("name", {"delta.columnMapping.mode": "none"}, UnsupportedFeatureError, "rewriting every data file"),
        ("id", None, UnsupportedFeatureError, "from 'id' to 'none' is not supported"),
        ("none", {"delta.columnMapping.mode": "Nom"}, InvalidArgumentError, "DELTA_MODE_NOT_SUPPORTED"),
        ("name", {"delta.columnMapping.maxColumnId": "99"}, UnsupportedFeatureError, "maxColumnId"),
    ],
)
def test_refused_mode_changes_leave_the_table_unchanged(
    tmp_path: Path, start: str, change: dict[str, str] | None, error: type[Exception], fragment: str
) -> None:
    root = tmp_path / "t"
    config = {} if start == "none" else {"delta.columnMapping.mode": start}
    dvengine.write(_rows([1, 2], "v"), str(root), configuration=config)
    listing = sorted(str(p) for p in root.rglob("*"))
    with pytest.raises(error, match=fragment):
        if change is None:
            unset_table_properties(str(root), ["delta.columnMapping.mode"])
        else:
            set_table_properties(str(root), change)
    assert sorted(str(p) for p in root.rglob("*")) == listing


def test_upgrade_refused_when_the_schema_already_has_mapping_metadata(tmp_path: Path) -> None:
    """Delta's DELTA_ENABLING_COLUMN_MAPPING_DISALLOWED_WHEN_COLUMN_MAPPING_METADATA_ALREADY_EXISTS:
    stale ids / physical names in an unmapped table's schema (a lax writer's) would not describe its files."""
    root = tmp_path / "t"
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "st", "type": {"type": "struct", "fields": [
                                               {"name": "x", "type": "integer", "nullable": True,
                                                "metadata": {"delta.columnMapping.physicalName": "col-stale"}}]},
                                            "nullable": True, "metadata": {}}]}
    txn = Transaction(str(root), None, "CREATE TABLE", {})
    txn.update_protocol(Protocol(1, 2))
    txn.update_metadata(Metadata("stale", json.dumps(schema), (), {}))
    txn.commit()
    listing = sorted(str(p) for p in root.rglob("*"))
    with pytest.raises(UnsupportedFeatureError, match="METADATA_ALREADY_EXISTS"):
        set_table_properties(str(root), {"delta.columnMapping.mode": "name"})
    assert sorted(str(p) for p in root.rglob("*")) == listing


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (Protocol(1, 2), Protocol(2, 5)),
        (Protocol(1, 4), Protocol(2, 5)),
        (Protocol(1, 6), Protocol(2, 6)),
        (Protocol(2, 5), Protocol(2, 5)),
        (Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)),
         Protocol(3, 7, ("columnMapping", "deletionVectors"), ("columnMapping", "deletionVectors"))),
        (Protocol(1, 7, None, ("domainMetadata", "rowTracking")),
         Protocol(3, 7, ("columnMapping",), ("columnMapping", "domainMetadata", "rowTracking"))),
        (Protocol(1, 7, None, ("appendOnly", "invariants")),
         Protocol(3, 7, ("columnMapping",), ("appendOnly", "columnMapping", "invariants"))),
    ],
)
def test_protocol_with_column_mapping(before: Protocol, after: Protocol) -> None:
    assert with_column_mapping(before) == after


NESTED_IN_CONTAINERS = pa.schema([
    ("id", pa.int64()),
    ("l", pa.list_(pa.struct([("h", pa.string())]))),
    ("m", pa.map_(pa.string(), pa.struct([("h", pa.string()), ("k", pa.int32())]))),
])
NESTED_ROWS = [
    {"id": 1, "l": [{"h": "a"}], "m": [("k1", {"h": "a", "k": 1}), ("k2", None)]},
    {"id": 2, "l": None, "m": None},
    {"id": 3, "l": [{"h": "b"}, None], "m": [("k3", {"h": None, "k": 3})]},
    {"id": 4, "l": [], "m": []},
]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_structs_inside_maps_keep_their_values_in_a_mapped_table(tmp_path: Path, mode: str) -> None:
    """A struct that is a map's value gets physical field names in the file like any nested struct;
    it was converted with Arrow's cast, which matches struct fields by *name*, so every field of it
    was written NULL (dvengine's writes and rewrites; delta-rs and DuckDB then read NULLs)."""
    root = tmp_path / mode
    dvengine.write(pa.Table.from_pylist(NESTED_ROWS, NESTED_IN_CONTAINERS), str(root), configuration={"delta.columnMapping.mode": mode})
    DeltaTable.forPath(None, str(root)).update("id = 3", {"l": "l"}, mode="rewrite", engine="local")  # rewrites its file
    expected = sort_rows([tuple(r.values()) for r in NESTED_ROWS])
    cols = list(NESTED_IN_CONTAINERS.names)
    assert rows_arrow(root, cols) == expected
    assert rows_delta_rs(root, cols) == expected
