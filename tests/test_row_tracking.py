"""Row tracking (``rowTracking`` + ``domainMetadata``) against PROTOCOL.md "Row Tracking".

The table under test is built exactly as Delta Spark leaves it after ``CREATE TABLE ... TBLPROPERTIES
(delta.enableRowTracking = true)``, an INSERT of two files and a copy-on-write UPDATE (one file
rewritten with materialized row id / row commit version columns), then changed by dvengine. The
truth is an in-memory model: every row's value, stable row id and stable row commit version. The
protocol's invariants are checked from the raw commit JSON (parsed here, not by dvengine) at every
version: each live add carries ``baseRowId`` / ``defaultRowCommitVersion``, fresh id ranges are
disjoint, the high-water mark covers every fresh and stable id, stable ids are unique, an updated or
copied row keeps its id, and a deleted row's id never comes back. delta-rs and DuckDB read the rows.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.errors import UnsupportedFeatureError
from dvengine.log import load_snapshot
from dvengine.maintenance.properties import set_table_properties
from dvengine.read.row_ids import read_row_tracking
from tests.interop import rows_delta_rs, rows_duckdb, sort_rows

ROW_ID_COL = "_row-id-col-" + str(uuid.uuid4())
VERSION_COL = "_row-commit-version-col-" + str(uuid.uuid4())
SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "v", "type": "long", "nullable": True, "metadata": {}},
]}
# Column mapping as Delta Spark assigns it on CREATE TABLE (``col-<uuid>`` physical names, ids 1, 2).
PHYSICAL = {"id": "col-" + str(uuid.uuid4()), "v": "col-" + str(uuid.uuid4())}
FIELD_IDS = {"id": 1, "v": 2}


def _schema(mapping: str | None) -> dict[str, Any]:
    if mapping is None:
        return SCHEMA
    return {"type": "struct", "fields": [
        {**f, "metadata": {"delta.columnMapping.id": FIELD_IDS[f["name"]],
                           "delta.columnMapping.physicalName": PHYSICAL[f["name"]]}}
        for f in SCHEMA["fields"]
    ]}
Model = dict[int, list[int | None]]  # id -> [v, stable row id, stable row commit version]


# --- the table as Delta Spark writes it -------------------------------------------------------------


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _info(operation: str, read_version: int | None) -> dict[str, Any]:
    info: dict[str, Any] = {"timestamp": int(time.time() * 1000), "operation": operation, "operationParameters": {},
                            "isolationLevel": "Serializable", "isBlindAppend": operation == "WRITE",
                            "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}
    if read_version is not None:
        info["readVersion"] = read_version
    if operation in ("DELETE", "UPDATE", "MERGE", "OPTIMIZE"):  # RowTracking.addPreservedRowTrackingTagIfNotSet
        info["tags"] = {"delta.rowTracking.preserved": "true"}
    return {"commitInfo": info}


def _data_file(root: Path, ids: list[int], values: list[int], extra: dict[str, list[int | None]] | None = None,
               mapping: str | None = None) -> dict[str, Any]:
    """A data file as Delta Spark writes it: under a column-mapped schema the columns carry their
    physical names (and Parquet field ids), stats are keyed by physical name; the materialized row
    tracking columns (``extra``) carry their own names and no field id."""
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    phys = PHYSICAL if mapping is not None else {"id": "id", "v": "v"}
    fields = [pa.field(phys[c], pa.int64(), metadata=None if mapping is None else {b"PARQUET:field_id": str(FIELD_IDS[c]).encode()})
              for c in ("id", "v")]
    arrays = [pa.array(ids, pa.int64()), pa.array(values, pa.int64())]
    for key, column in (extra or {}).items():
        fields.append(pa.field(key, pa.int64()))
        arrays.append(pa.array(column, pa.int64()))
    pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), root / name)
    stats = {"numRecords": len(ids), "minValues": {phys["id"]: min(ids), phys["v"]: min(values)},
             "maxValues": {phys["id"]: max(ids), phys["v"]: max(values)}, "nullCount": {phys["id"]: 0, phys["v"]: 0}}
    return {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
            "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats)}


def _mark(n: int) -> dict[str, Any]:
    return {"domainMetadata": {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": n}),
                               "removed": False}}


def delta_spark_table(root: Path, mapping: str | None = None) -> Model:
    """Versions 0-2 as Delta Spark 4 writes them; returns the model of version 2. ``mapping``:
    ``delta.columnMapping.mode`` (``name`` / ``id``) of the table, as Delta creates it with
    ``TBLPROPERTIES (delta.columnMapping.mode = ...)`` (reader feature too, ids and physical names)."""
    configuration = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true",
                     "delta.rowTracking.materializedRowIdColumnName": ROW_ID_COL,
                     "delta.rowTracking.materializedRowCommitVersionColumnName": VERSION_COL}
    reader_features, writer_features = ["deletionVectors"], ["deletionVectors", "domainMetadata", "rowTracking"]
    if mapping is not None:
        configuration |= {"delta.columnMapping.mode": mapping, "delta.columnMapping.maxColumnId": "2"}
        reader_features, writer_features = ["columnMapping", *reader_features], ["columnMapping", *writer_features]
    _commit(root, 0, [
        _info("CREATE TABLE", None),
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": reader_features,
                      "writerFeatures": writer_features}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(_schema(mapping)), "partitionColumns": [], "configuration": configuration,
                      "createdTime": int(time.time() * 1000)}},
    ])
    a = {**_data_file(root, list(range(10)), [i * 10 for i in range(10)], mapping=mapping), "baseRowId": 0, "defaultRowCommitVersion": 1}
    b = {**_data_file(root, list(range(10, 20)), [i * 10 for i in range(10, 20)], mapping=mapping),
         "baseRowId": 10, "defaultRowCommitVersion": 1}
    _commit(root, 1, [_info("WRITE", 0), {"add": a}, {"add": b}, _mark(19)])
    # UPDATE t SET v = -1 WHERE id = 12, copy-on-write: every row of b keeps its stable id
    # (materialized); copied rows keep commit version 1, the updated row's is NULL (= version 2).
    ids = list(range(10, 20))
    c = {**_data_file(root, ids, [-1 if i == 12 else i * 10 for i in ids],
                      {ROW_ID_COL: ids, VERSION_COL: [None if i == 12 else 1 for i in ids]}, mapping),
         "baseRowId": 20, "defaultRowCommitVersion": 2}
    remove = {"path": b["path"], "deletionTimestamp": int(time.time() * 1000), "dataChange": True,
              "extendedFileMetadata": True, "partitionValues": {}, "size": b["size"], "stats": b["stats"],
              "baseRowId": 10, "defaultRowCommitVersion": 1}
    _commit(root, 2, [_info("UPDATE", 1), {"remove": remove}, {"add": c}, _mark(29)])
    model: Model = {i: [i * 10, i, 1] for i in range(20)}
    model[12] = [-1, 12, 2]
    return model


# --- the protocol's invariants, from the raw log ---------------------------------------------------


def _replay(root: Path, version: int) -> tuple[dict[str, dict[str, Any]], int]:
    """Live adds by path and the row id high-water mark at ``version`` (naive replay of the JSON)."""
    live: dict[str, dict[str, Any]] = {}
    mark = -1
    for v in range(version + 1):
        for line in (root / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
            elif "domainMetadata" in action and action["domainMetadata"]["domain"] == "delta.rowTracking":
                mark = json.loads(action["domainMetadata"]["configuration"])["rowIdHighWaterMark"]
    return live, mark


def check_invariants(root: Path, retired_ids: set[int], first: int = 0) -> None:
    """PROTOCOL.md's writer requirements at every version of the table from ``first`` (row tracking enabled)."""
    latest = load_snapshot(str(root)).version
    previous_mark = -1
    for version in range(first, latest + 1):
        live, mark = _replay(root, version)
        assert mark >= previous_mark, f"v{version}: the high-water mark went down"
        previous_mark = mark
        ranges = []
        for add in live.values():
            assert "baseRowId" in add and "defaultRowCommitVersion" in add, f"v{version}: {add['path']}"
            assert add["defaultRowCommitVersion"] <= version
            n = json.loads(add["stats"])["numRecords"]
            ranges.append((add["baseRowId"], add["baseRowId"] + n - 1))
        ranges.sort()
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert end < start, f"v{version}: fresh row id ranges overlap: {ranges}"
        assert not ranges or mark >= ranges[-1][1], f"v{version}: mark {mark} below fresh ids {ranges[-1]}"
        rows = read_row_tracking(load_snapshot(str(root), version=version))
        row_ids = rows.column("row_id").to_pylist()
        assert len(set(row_ids)) == len(row_ids), f"v{version}: duplicate stable row ids"
        assert all(r is not None and r <= mark for r in row_ids)
        if version == latest:
            assert not retired_ids & set(row_ids), f"deleted rows' ids came back: {retired_ids & set(row_ids)}"
    check_preserved_tags(root, first)


PRESERVED = "delta.rowTracking.preserved"
PRESERVING = {"DELETE", "UPDATE", "MERGE", "OPTIMIZE", "REORG"}  # Delta's commands that tag (OPTIMIZE covers REORG)


def _raw_configuration(root: Path, version: int) -> dict[str, str]:
    configuration: dict[str, str] = {}
    for v in range(version + 1):
        for action in _commit_actions(root, v):
            if "metaData" in action:
                configuration = action["metaData"].get("configuration") or {}
    return configuration


def check_preserved_tags(root: Path, first: int = 0) -> None:
    """Every dvengine commit carries Delta's ``delta.rowTracking.preserved`` exactly as Delta
    would (raw JSON): "true" on DELETE / UPDATE / MERGE / OPTIMIZE / REORG of a table whose read
    version had row tracking enabled, "false" when row tracking was enabled by a commit between
    the read version and this one (the commit took that enablement over), absent otherwise."""
    for version in range(max(first, 1), load_snapshot(str(root)).version + 1):
        info = next(a["commitInfo"] for a in _commit_actions(root, version) if "commitInfo" in a)
        if not info.get("engineInfo", "").startswith("dvengine"):
            continue
        enabled = _raw_configuration(root, info["readVersion"]).get("delta.enableRowTracking") == "true"
        want = "true" if info["operation"] in PRESERVING and enabled else None
        if not enabled and _raw_configuration(root, version - 1).get("delta.enableRowTracking") == "true":
            want = "false"  # a concurrent enablement landed after our read: taken over, nothing preserved
        got = (info.get("tags") or {}).get(PRESERVED)
        assert got == want, f"v{version} {info['operation']}: tags {info.get('tags')}, want {PRESERVED}={want}"


def check_model(root: Path, model: Model) -> None:
    """dvengine's row ids and commit versions, and the rows delta-rs and DuckDB read, equal the model."""
    got = read_row_tracking(load_snapshot(str(root)))
    rows = {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in got.to_pylist()}
    assert rows == model
    want = sort_rows([(i, vals[0]) for i, vals in model.items()])
    assert rows_delta_rs(root, ["id", "v"]) == want
    assert rows_duckdb(root, ["id", "v"]) == want


def _mark_now(root: Path) -> int:
    return _replay(root, load_snapshot(str(root)).version)[1]


def _apply_upsert_of_7_100_101(root: Path, model: Model, mark: int, version: int) -> None:
    """The model after a MERGE that updated id 7 to 700 (its row id kept, commit version new) and
    inserted ids 100 and 101 (values 1000 / 1010) at ``version``: the inserted rows' ids are read
    back and must be fresh, above the mark before the MERGE."""
    model[7] = [700, model[7][1], version]
    new_ids = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist() if r["id"] >= 100}
    assert all(r > mark for r in new_ids.values()), "inserted rows must get fresh ids above the old mark"
    model[100], model[101] = [1000, new_ids[100], version], [1010, new_ids[101], version]


def run_dml_steps(root: Path, model: Model, spark: Any, engine: str) -> None:
    """DELETE, UPDATE, MERGE, OPTIMIZE and an append on ``engine``, the model following each."""
    table = DeltaTable.forPath(spark, str(root))
    retired: set[int] = set()

    retired.add(model[3][1])  # type: ignore[arg-type]
    table.deleteMetrics("id = 3", engine=engine)
    del model[3]
    check_invariants(root, retired)
    check_model(root, model)

    version = table.updateMetrics("id IN (5, 15)", {"v": "v + 1"}, engine=engine)["version"]
    for i in (5, 15):
        model[i] = [model[i][0] + 1, model[i][1], version]  # type: ignore[operator]
    check_model(root, model)

    # copy-on-write: the copied rows keep id and commit version, the updated one only its id
    version = table.updateMetrics("id = 16", {"v": "0"}, mode="rewrite", engine=engine)["version"]
    model[16] = [0, model[16][1], version]
    check_model(root, model)

    mark = _mark_now(root)
    source = pa.table({"id": pa.array([7, 100, 101], pa.int64()), "v": pa.array([700, 1000, 1010], pa.int64())})
    metrics = (table.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdateAll()
               .whenNotMatchedInsertAll().withEngine(engine).executeMetrics())
    _apply_upsert_of_7_100_101(root, model, mark, metrics["version"])
    check_invariants(root, retired)
    check_model(root, model)

    table.optimize().executeCompaction()  # copies every row: ids and commit versions kept
    assert len(load_snapshot(str(root)).files) == 1
    check_model(root, model)

    table.deleteMetrics("id = 100", engine=engine)
    retired.add(model.pop(100)[1])  # type: ignore[arg-type]
    check_invariants(root, retired)
    check_model(root, model)


def test_delta_spark_table_changed_locally_keeps_row_ids(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = delta_spark_table(root)
    check_invariants(root, set())
    check_model(root, model)  # dvengine reads Delta's materialized ids and NULL commit versions
    run_dml_steps(root, model, None, "local")
    mark = _mark_now(root)
    dvengine.write(pa.table({"id": pa.array([300, 301], pa.int64()), "v": pa.array([1, 2], pa.int64())}),
                   str(root), mode="append")
    appended = {r["id"]: r for r in read_row_tracking(load_snapshot(str(root))).to_pylist() if r["id"] >= 300}
    assert sorted(r["row_id"] for r in appended.values()) == [mark + 1, mark + 2]
    assert {r["row_commit_version"] for r in appended.values()} == {load_snapshot(str(root)).version}
    check_invariants(root, set())


def test_delta_spark_table_changed_on_spark_keeps_row_ids(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = delta_spark_table(root)
    run_dml_steps(root, model, spark, "spark")
    mark = _mark_now(root)
    dvengine.write(spark.createDataFrame([(400, 4), (401, 5)], "id long, v long"), str(root), mode="append")
    appended = [r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist() if r["id"] >= 400]
    assert sorted(appended) == [mark + 1, mark + 2]
    check_invariants(root, set())


def _read_in_spark(spark: Any, root: Path) -> Model:
    """The ids read in a Spark plan (what Delta shows as ``_metadata.row_id`` / ``row_commit_version``)."""
    from dvengine.engine.spark.row_ids import read_row_tracking_df

    rows = read_row_tracking_df(spark, load_snapshot(str(root))).collect()
    return {r["id"]: [r["v"], r["row_id"], r["row_commit_version"]] for r in rows}


def test_spark_row_plans_keep_row_ids(spark: Any, tmp_path: Path) -> None:
    """The Spark row plans (Spark evaluates the rows; forced here) carry stable ids as file tasks
    do: DELETE / UPDATE with DVs and copy-on-write, a MERGE that updates, inserts and deletes
    (copy-on-write, so its unmatched rows are copied too), and PURGE, which copies every live row."""
    root = tmp_path / "t"
    run_row_plan_steps(spark, root, delta_spark_table(root))


def run_row_plan_steps(spark: Any, root: Path, model: Model) -> None:
    """DML on the Spark row plans (forced), the model and the invariants checked after each step."""
    from dml_helpers import spark_conf

    table = DeltaTable.forPath(spark, str(root))
    retired: set[int] = set()
    with spark_conf(spark, "dvengine.spark.dmlStrategy", "rows"), \
            spark_conf(spark, "dvengine.execution.localMaxSourceRows", "0"):
        table.deleteMetrics("id = 3", engine="spark")  # a DV
        table.deleteMetrics("id = 14", mode="rewrite", engine="spark")  # the file's other rows copied by Spark
        retired |= {model.pop(3)[1], model.pop(14)[1]}  # type: ignore[arg-type]
        check_invariants(root, retired)
        check_model(root, model)

        version = table.updateMetrics("id IN (5, 15)", {"v": "v + 1"}, engine="spark")["version"]
        for i in (5, 15):
            model[i] = [model[i][0] + 1, model[i][1], version]  # type: ignore[operator]
        version = table.updateMetrics("id = 16", {"v": "0"}, mode="rewrite", engine="spark")["version"]
        model[16] = [0, model[16][1], version]
        check_model(root, model)

        mark = _mark_now(root)
        source = spark.createDataFrame([(7, 700), (8, -1), (100, 1000), (101, 1010)], "id long, v long")
        metrics = (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedDelete("s.v < 0")
                   .whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode("rewrite").withEngine("spark")
                   .executeMetrics())
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"], metrics["numTargetRowsDeleted"]) == (1, 2, 1)
        retired.add(model.pop(8)[1])  # type: ignore[arg-type]
        _apply_upsert_of_7_100_101(root, model, mark, metrics["version"])
        check_invariants(root, retired)
        check_model(root, model)

        table.deleteMetrics("id IN (0, 100)", mode="dv", engine="spark")
        retired |= {model.pop(0)[1], model.pop(100)[1]}  # type: ignore[arg-type]
        assert any(f.deletion_vector is not None for f in load_snapshot(str(root)).files)
        assert _read_in_spark(spark, root) == model  # DVs applied in the Spark plan too
        table.purge()  # every live row of the DV'd files copied: ids and commit versions kept
        assert all(f.deletion_vector is None for f in load_snapshot(str(root)).files)
        check_invariants(root, retired)
        check_model(root, model)

    assert _read_in_spark(spark, root) == model


def test_created_table_and_enabling_on_an_existing_table(tmp_path: Path) -> None:
    """Create with the property (features, generated column names) and enable later (backfill)."""
    created = tmp_path / "created"
    dvengine.write(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), str(created), mode="append",
                   configuration={"delta.enableRowTracking": "true"})
    snap = load_snapshot(str(created))
    assert {"rowTracking", "domainMetadata"} <= set(snap.protocol.writer_features or ())
    assert snap.configuration["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert snap.configuration["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith("_row-commit-version-col-")
    from deltalake import DeltaTable as RsTable

    assert "rowTracking" in (RsTable(str(created)).protocol().writer_features or [])

    later = tmp_path / "later"
    for start in (0, 10):
        dvengine.write(pa.table({"id": pa.array(range(start, start + 5), pa.int64())}), str(later), mode="append")
    assert all(f.base_row_id is None for f in load_snapshot(str(later)).files)
    set_table_properties(str(later), {"delta.enableRowTracking": "true"})
    snap = load_snapshot(str(later))
    assert all(f.base_row_id is not None and f.default_row_commit_version == snap.version for f in snap.files)
    check_invariants(later, set(), first=snap.version)
    DeltaTable.forPath(None, str(later)).update("id = 11", {"id": "111"})
    ids = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(later))).to_pylist()}
    before = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(later), version=snap.version)).to_pylist()}
    assert ids[111] == before[11]
    assert rows_duckdb(later, ["id"]) == sort_rows([(i,) for i in [0, 1, 2, 3, 4, 10, 111, 12, 13, 14]])


def test_concurrent_appends_get_disjoint_row_ids(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([0], pa.int64())}), str(root), mode="append",
                   configuration={"delta.enableRowTracking": "true"})
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for j in range(3):
                rows = pa.table({"id": pa.array(range(1000 * k + 10 * j, 1000 * k + 10 * j + 7), pa.int64())})
                dvengine.write(rows, str(root), mode="append")
        except BaseException as exc:  # re-raised below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    snap = load_snapshot(str(root))
    assert len(snap.files) == 13
    check_invariants(root, set())
    assert _mark_now(root) == 13 * 7 - 6 - 1  # 1 + 12 * 7 rows, ids 0..84, no gap: every loser re-assigned


def test_losing_a_race_reassigns_row_ids_above_the_winner(tmp_path: Path) -> None:
    """Two writers from one snapshot: the loser's file gets ids above the winner's mark."""
    from dvengine.commit.transaction import Transaction
    from dvengine.engine.local.writer import write_data_files

    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([0, 1], pa.int64())}), str(root), mode="append",
                   configuration={"delta.enableRowTracking": "true"})

    snap = load_snapshot(str(root))
    txns = []
    for n in (3, 4):
        adds = write_data_files(pa.table({"id": pa.array(range(n), pa.int64())}), str(root), snap.schema, ())
        txn = Transaction(str(root), snap, "WRITE", {"mode": "Append"})
        txn.add_actions(adds)
        txns.append(txn)
    assert txns[0].commit() == 1
    assert txns[1].commit() == 2  # lost the race to version 1, retried at 2
    assert (txns[0].row_id_high_water_mark, txns[1].row_id_high_water_mark) == (4, 8)
    live, mark = _replay(root, 2)
    assert sorted(a["baseRowId"] for a in live.values()) == [0, 2, 5] and mark == 8
    assert sorted(a["defaultRowCommitVersion"] for a in live.values()) == [0, 1, 2]


def test_restore_and_clone_keep_ids_unique(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array(range(5), pa.int64())}), str(root), mode="append",
                   configuration={"delta.enableRowTracking": "true"})
    table = DeltaTable.forPath(None, str(root))
    table.update("id = 2", {"id": "20"}, mode="rewrite")
    table.restoreToVersion(0)
    dvengine.write(pa.table({"id": pa.array([7], pa.int64())}), str(root), mode="append")
    check_invariants(root, set())
    rows = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(root))).to_pylist()}
    assert [rows[i] for i in range(5)] == [0, 1, 2, 3, 4] and rows[7] > 9  # restored ids; above the kept mark

    clone = tmp_path / "clone"
    table.clone(str(clone), isShallow=True)
    dvengine.write(pa.table({"id": pa.array([8], pa.int64())}), str(clone), mode="append")
    cloned = {r["id"]: r["row_id"] for r in read_row_tracking(load_snapshot(str(clone))).to_pylist()}
    assert len(set(cloned.values())) == len(cloned) and cloned[8] > max(rows.values())


def test_suspended_row_tracking_assigns_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1], pa.int64())}), str(root), mode="append")
    DeltaTable.forPath(None, str(root)).addFeatureSupport("rowTracking")
    assert {"rowTracking", "domainMetadata"} <= set(load_snapshot(str(root)).protocol.writer_features or ())
    dvengine.write(pa.table({"id": pa.array([2], pa.int64())}), str(root), mode="append")
    set_table_properties(str(root), {"delta.rowTrackingSuspended": "true"})
    dvengine.write(pa.table({"id": pa.array([3], pa.int64())}), str(root), mode="append")
    bases = sorted(f.base_row_id is not None for f in load_snapshot(str(root)).files)
    assert bases == [False, False, True]  # before support, while suspended: none; while supported: one
    with pytest.raises(UnsupportedFeatureError, match="row tracking enabled"):
        read_row_tracking(load_snapshot(str(root)))


def _commit_actions(root: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def test_drop_feature_row_tracking_as_delta_4(tmp_path: Path) -> None:
    """DROP FEATURE rowTracking in Delta 4.x's steps (RowTrackingPreDowngradeCommand, then the
    downgrade commit): disable + suspend, un-backfill every live file's ids (DVs kept), then the
    protocol without rowTracking, the four properties gone and the domain tombstoned."""
    from deltalake import DeltaTable as RsTable

    from dvengine.errors import OperationNotAllowedError

    root = tmp_path / "t"
    model = delta_spark_table(root)
    table = DeltaTable.forPath(None, str(root))
    table.delete("id = 3")  # a DV the un-backfill must keep
    del model[3]
    before = load_snapshot(str(root))
    dvs = {f.path: f.deletion_vector for f in before.files}
    with pytest.raises(OperationNotAllowedError, match="does not require history truncation"):
        table.dropFeatureSupport("rowTracking", truncateHistory=True)  # Delta refuses it for this feature
    assert load_snapshot(str(root)).version == before.version
    table.dropFeatureSupport("rowTracking")

    v = before.version + 1
    props, unbackfill, drop = (_commit_actions(root, v + k) for k in range(3))
    assert _info_of(props)["operation"] == "SET TBLPROPERTIES"
    config = next(a["metaData"] for a in props if "metaData" in a)["configuration"]
    assert (config["delta.enableRowTracking"], config["delta.rowTrackingSuspended"]) == ("false", "true")

    assert _info_of(unbackfill)["operation"] == "ROW TRACKING UNBACKFILL"
    readds = [a["add"] for a in unbackfill if "add" in a]
    assert sorted(a["path"] for a in readds) == sorted(dvs)
    for add in readds:
        assert "baseRowId" not in add and "defaultRowCommitVersion" not in add and add["dataChange"] is False
        assert (add.get("deletionVector") is None) == (dvs[add["path"]] is None)

    assert _info_of(drop)["operation"] == "DROP FEATURE"
    assert _info_of(drop)["operationParameters"]["featureName"] == "rowTracking"
    protocol = next(a["protocol"] for a in drop if "protocol" in a)
    assert "rowTracking" not in protocol["writerFeatures"] and "domainMetadata" in protocol["writerFeatures"]
    config = next(a["metaData"] for a in drop if "metaData" in a)["configuration"]
    assert not [k for k in config if "rowTracking" in k or k == "delta.enableRowTracking"], config
    domains = [a["domainMetadata"] for a in drop if "domainMetadata" in a]
    assert [(d["domain"], d["removed"]) for d in domains] == [("delta.rowTracking", True)]
    assert "rowTracking" not in (RsTable(str(root)).protocol().writer_features or [])
    want = sort_rows([(i, vals[0]) for i, vals in model.items()])
    assert rows_delta_rs(root, ["id", "v"]) == want and rows_duckdb(root, ["id", "v"]) == want

    dvengine.write(pa.table({"id": pa.array([500], pa.int64()), "v": pa.array([5], pa.int64())}), str(root), mode="append")
    assert all(f.base_row_id is None for f in load_snapshot(str(root)).files)  # no ids any more
    assert "delta.rowTracking" not in load_snapshot(str(root)).domain_metadata or \
        load_snapshot(str(root)).domain_metadata["delta.rowTracking"].removed
    with pytest.raises(UnsupportedFeatureError, match="row tracking enabled"):
        read_row_tracking(load_snapshot(str(root)))
    version = load_snapshot(str(root)).version
    with pytest.raises(OperationNotAllowedError, match="does not support feature 'rowTracking'"):
        table.dropFeatureSupport("rowTracking")
    assert load_snapshot(str(root)).version == version

    # enabled again later: fresh names, fresh ids from 0 (the old mark went with the domain, as in Delta)
    set_table_properties(str(root), {"delta.enableRowTracking": "true"})
    snap = load_snapshot(str(root))
    assert snap.configuration["delta.rowTracking.materializedRowIdColumnName"] != ROW_ID_COL
    check_invariants(root, set(), first=snap.version)


def test_drop_feature_of_supported_only_row_tracking(tmp_path: Path) -> None:
    """Supported but never enabled (ids assigned, nothing materialized): the same three commits."""
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1], pa.int64())}), str(root), mode="append")
    table = DeltaTable.forPath(None, str(root))
    table.addFeatureSupport("rowTracking")
    dvengine.write(pa.table({"id": pa.array([2, 3], pa.int64())}), str(root), mode="append")
    assert sorted(f.base_row_id is not None for f in load_snapshot(str(root)).files) == [False, True]
    start = load_snapshot(str(root)).version
    table.dropFeatureSupport("rowTracking")
    ops = [_info_of(_commit_actions(root, v))["operation"] for v in range(start + 1, load_snapshot(str(root)).version + 1)]
    assert ops == ["SET TBLPROPERTIES", "ROW TRACKING UNBACKFILL", "DROP FEATURE"]
    snap = load_snapshot(str(root))
    assert "rowTracking" not in (snap.protocol.writer_features or ())
    assert all(f.base_row_id is None and f.default_row_commit_version is None for f in snap.files)
    assert rows_duckdb(root, ["id"]) == [(1,), (2,), (3,)]


def _info_of(actions: list[dict[str, Any]]) -> dict[str, Any]:
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)
