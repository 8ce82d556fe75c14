"""CHECK constraints (``checkConstraints``): enforced by write, UPDATE and MERGE on both executors;
ALTER TABLE ADD / DROP CONSTRAINT as Delta does them.

Truth: an in-memory model of the rows (a rejected command leaves it, and the table, unchanged),
delta-rs and DuckDB reading the result, and the log shape Delta Spark writes for ADD CONSTRAINT
(operation ``ADD CONSTRAINT`` with ``name``/``expr``, the ``checkConstraints`` writer feature on a
table-features protocol, writer 3 on a legacy one, ``delta.constraints.<name>`` in the configuration).
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
from dvengine import DeltaTable
from dvengine.errors import (
    ConstraintError,
    ConstraintViolationError,
    NotLocallyEvaluableError,
    UnsupportedFeatureError,
)
from dvengine.log import latest_version, load_snapshot
from dvengine.maintenance.constraints import add_constraint, drop_constraint

COLUMNS = ["id", "qty", "name"]


def _base(path: Path, dvs: bool = True) -> str:
    data = pa.table({
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "qty": pa.array([10, 20, 30, 40], pa.int64()),
        "name": ["a", "b", "c", "d"],
    })
    dvengine.write(data, str(path), configuration={"delta.enableDeletionVectors": str(dvs).lower()})
    return str(path)


def _delta_spark_add_constraint(root: str, name: str, expr: str) -> None:
    """Commit ALTER TABLE ADD CONSTRAINT exactly as Delta Spark 3.x/4.x writes it to the log."""
    snapshot = load_snapshot(root)
    version = snapshot.version + 1
    metadata = snapshot.metadata.to_json()
    metadata["configuration"] = {**metadata.get("configuration", {}), f"delta.constraints.{name}": expr}
    p = snapshot.protocol
    protocol = {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": list(p.reader_features or ()),
        "writerFeatures": sorted({*(p.writer_features or ()), "checkConstraints"}),
    }
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "ADD CONSTRAINT",
                        "operationParameters": {"name": name, "expr": expr}, "readVersion": snapshot.version,
                        "isolationLevel": "Serializable", "isBlindAppend": False, "operationMetrics": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"protocol": protocol},
        {"metaData": metadata},
    ]
    with open(os.path.join(root, "_delta_log", f"{version:020d}.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def _readers(root: str, expected: list[tuple[Any, ...]]) -> None:
    want = sort_rows(expected)
    assert rows_delta_rs(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want


MODEL = [(1, 10, "a"), (2, 20, "b"), (3, 30, "c"), (4, 40, "d")]


# --- DML on a table whose constraint Delta Spark added -------------------------------------------


def test_dml_on_a_delta_spark_constraint_table_locally(tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    _delta_spark_add_constraint(root, "qty_positive", "qty > 0")
    table = DeltaTable.forPath(None, root)
    model = list(MODEL)

    table.delete("id = 4", mode="dv", engine="local")  # DELETE writes no new rows: allowed, with a DV
    model = [r for r in model if r[0] != 4]
    assert table.historyRecords(1)[0]["operationMetrics"]["numDeletionVectorsAdded"] in (1, "1")

    with pytest.raises(ConstraintViolationError, match=r"qty_positive \(qty > 0\).*qty = -5"):
        table.update("id = 1", {"qty": "qty - 15"}, engine="local")
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        table.update("id = 2", {"qty": "NULL"}, engine="local")  # NULL breaks a constraint, as in Delta
    table.update("id = 1", {"qty": "qty + 5"}, engine="local")
    model = [(1, 15, "a") if r[0] == 1 else r for r in model]

    bad_insert = pa.table({"id": pa.array([9], pa.int64()), "qty": pa.array([0], pa.int64()), "name": ["z"]})
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        table.alias("t").merge(bad_insert, "t.id = s.id", source_alias="s").whenNotMatchedInsertAll().execute()
    bad_update = pa.table({"id": pa.array([2], pa.int64()), "qty": pa.array([-1], pa.int64()), "name": ["b"]})
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        table.alias("t").merge(bad_update, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().execute()
    good = pa.table({"id": pa.array([2, 7], pa.int64()), "qty": pa.array([22, 70], pa.int64()), "name": ["b", "g"]})
    table.alias("t").merge(good, "t.id = s.id", source_alias="s").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    model = [(2, 22, "b") if r[0] == 2 else r for r in model] + [(7, 70, "g")]

    version = latest_version(root)
    with pytest.raises(ConstraintViolationError, match="qty_positive"):
        dvengine.write(pa.table({"id": pa.array([8], pa.int64()), "qty": pa.array([-8], pa.int64()),
                                 "name": ["h"]}), root, mode="append")
    assert latest_version(root) == version  # every refusal left the table as it was
    _readers(root, model)


def test_dml_on_spark_checks_new_rows_in_the_tasks(spark: Any, tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    _delta_spark_add_constraint(root, "qty_positive", "qty > 0")
    table = DeltaTable.forPath(spark, root)
    for strategy in ("files", "rows"):
        spark.conf.set("dvengine.spark.dmlStrategy", strategy)
        try:
            with pytest.raises(ConstraintViolationError, match="qty_positive"):
                table.update("id = 1", {"qty": "qty - 15"}, engine="spark")
            source = spark.createDataFrame([(9, 0, "z")], "id bigint, qty bigint, name string")
            with pytest.raises(ConstraintViolationError, match="qty_positive"):
                (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenNotMatchedInsertAll()
                 .withEngine("spark").execute())
        finally:
            spark.conf.unset("dvengine.spark.dmlStrategy")
    with pytest.raises(ConstraintViolationError, match=r"qty_positive.*qty = -1"):
        dvengine.write(spark.createDataFrame([(5, -1, "e")], "id bigint, qty bigint, name string"), root, mode="append")
    assert latest_version(root) == 1
    table.update("id = 3", {"qty": "qty * 2"}, engine="spark")
    _readers(root, [(3, 60, "c") if r[0] == 3 else r for r in MODEL])


def test_a_constraint_the_arrow_evaluator_cannot_check_refuses_dml_before_writing(tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    _delta_spark_add_constraint(root, "named", "initcap(name) <> ''")  # the Arrow evaluator does not evaluate initcap
    table = DeltaTable.forPath(None, root)
    with pytest.raises(UnsupportedFeatureError, match=r"named \(initcap\(name\) <> ''\).*INITCAP"):
        table.update("id = 1", {"qty": "2"})
    with pytest.raises(UnsupportedFeatureError, match="named"):
        table.alias("t").merge(pa.table({"id": pa.array([1], pa.int64())}), "t.id = s.id",
                               source_alias="s").whenMatchedDelete().execute()
    with pytest.raises(NotLocallyEvaluableError, match="named"):
        dvengine.write(pa.table({"id": pa.array([5], pa.int64()), "qty": pa.array([5], pa.int64()), "name": ["e"]}),
                       root, mode="append")
    assert latest_version(root) == 1
    table.delete("id = 4")  # DELETE writes no new rows: nothing to check, allowed
    _readers(root, MODEL[:3])


# --- ALTER TABLE ADD / DROP CONSTRAINT -------------------------------------------------------------


def _raw_commit(root: str, version: int) -> dict[str, Any]:
    """Commit ``version``'s actions keyed by action name (one of each here), read as raw JSON."""
    lines = Path(root, "_delta_log", f"{version:020d}.json").read_text().splitlines()
    return {key: value for line in lines for key, value in json.loads(line).items()}


def test_add_constraint_writes_what_delta_spark_writes(tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    version = add_constraint(root, "Qty_Positive", "qty > 0")
    info = json.loads(Path(root, "_delta_log", f"{version:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert info["operation"] == "ADD CONSTRAINT"
    # AddConstraint(name, exprText): the name as the statement spelled it; the key is lower-cased
    assert info["operationParameters"] == {"name": "Qty_Positive", "expr": "qty > 0"}
    dt = deltalake.DeltaTable(root)
    assert dt.metadata().configuration["delta.constraints.qty_positive"] == "qty > 0"
    assert "checkConstraints" in (dt.protocol().writer_features or [])
    assert dt.protocol().min_writer_version == 7
    _readers(root, MODEL)


def test_add_constraint_on_a_legacy_protocol_raises_the_writer_version_to_3(tmp_path: Path) -> None:
    root = _base(tmp_path / "t", dvs=False)
    assert (load_snapshot(root).protocol.min_reader_version, load_snapshot(root).protocol.min_writer_version) == (1, 2)
    add_constraint(root, "p", "qty > 0")
    protocol = deltalake.DeltaTable(root).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 3)
    with pytest.raises(ConstraintViolationError, match="p"):
        DeltaTable.forPath(None, root).update("id = 1", {"qty": "0"})
    DeltaTable.forPath(None, root).update("id = 1", {"qty": "1"})  # copy-on-write: no DVs on (1, 3)
    _readers(root, [(1, 1, "a") if r[0] == 1 else r for r in MODEL])


def test_add_constraint_checks_existing_rows_and_names(tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    with pytest.raises(ConstraintError, match=r"2 row\(s\).*DELTA_NEW_CHECK_CONSTRAINT_VIOLATION"):
        add_constraint(root, "small", "qty < 25")
    DeltaTable.forPath(None, root).delete("id = 4")  # rows hidden by a DV do not count
    with pytest.raises(ConstraintError, match=r"1 row\(s\)"):
        add_constraint(root, "small", "qty < 25")
    add_constraint(root, "small", "qty < 35")
    with pytest.raises(ConstraintError, match="already exists"):
        add_constraint(root, "SMALL", "qty < 100")
    with pytest.raises(Exception, match="nope"):
        add_constraint(root, "bad", "nope > 1")  # unknown column: an AnalysisException, named
    version = latest_version(root)
    assert drop_constraint(root, "Small") == version + 1
    assert "delta.constraints.small" not in load_snapshot(root).configuration
    assert "checkConstraints" in (load_snapshot(root).protocol.writer_features or ())  # the feature stays
    with pytest.raises(ConstraintError, match="DELTA_CONSTRAINT_DOES_NOT_EXIST"):
        drop_constraint(root, "small")
    assert latest_version(root) == version + 1
    drop_info = _raw_commit(root, version + 1)["commitInfo"]
    assert drop_info["operationParameters"] == {"name": "Small", "expr": "qty < 35", "existed": "true"}
    # AlterTableDropConstraintDeltaCommand commits DropConstraint(name, None) when IF EXISTS finds nothing:
    # CheckConstraintsSuite "delta history for constraints" expects Map("name" -> ..., "existed" -> "false")
    assert drop_constraint(root, "Small", if_exists=True) == version + 2
    absent = _raw_commit(root, version + 2)
    assert absent["commitInfo"]["operation"] == "DROP CONSTRAINT"
    assert absent["commitInfo"]["operationParameters"] == {"name": "Small", "existed": "false"}
    assert absent["metaData"] == _raw_commit(root, version + 1)["metaData"]  # the metadata, unchanged
    assert set(absent) == {"commitInfo", "metaData"}
    assert deltalake.DeltaTable(root).history(1)[0]["operationParameters"] == {"name": "Small", "existed": "false"}
    dvengine.write(pa.table({"id": pa.array([5], pa.int64()), "qty": pa.array([99], pa.int64()), "name": ["e"]}),
                   root, mode="append")  # the dropped constraint no longer applies
    _readers(root, [r for r in MODEL if r[0] != 4] + [(5, 99, "e")])


def test_alter_table_constraint_sql(spark: Any, tmp_path: Path) -> None:
    root = _base(tmp_path / "t")
    dvengine.sql(spark, f"ALTER TABLE delta.`{root}` ADD CONSTRAINT named CHECK (length(name) = 1 AND (qty > 0))")
    assert load_snapshot(root).configuration["delta.constraints.named"] == "length(name) = 1 AND (qty > 0)"
    with pytest.raises(ConstraintError, match="4 row"):  # every existing row violates it
        dvengine.sql(spark, f"ALTER TABLE delta.`{root}` ADD CONSTRAINT long_name CHECK (md5(name) = 'x')")
    dvengine.sql(spark, f"ALTER TABLE delta.`{root}` DROP CONSTRAINT IF EXISTS long_name")
    dvengine.sql(spark, f"ALTER TABLE delta.`{root}` DROP CONSTRAINT named")
    assert not [k for k in load_snapshot(root).configuration if k.startswith("delta.constraints.")]
    records = DeltaTable.forPath(None, root).historyRecords(3)
    assert [h["operation"] for h in records] == ["DROP CONSTRAINT", "DROP CONSTRAINT", "ADD CONSTRAINT"]
    assert records[1]["operationParameters"] == {"name": "long_name", "existed": "false"}  # IF EXISTS, absent


def test_alter_table_constraint_statements_parse() -> None:
    from dvengine.errors import SqlParseError
    from dvengine.sqlcmd.parse import parse_sql
    from dvengine.sqlcmd.statements import AlterConstraintStatement, TableRef

    text = "ALTER TABLE delta.`/x/y` ADD CONSTRAINT c1 CHECK (name IN ('a', 'b)') AND (qty > 0))"
    assert parse_sql(text) == [AlterConstraintStatement(TableRef(path="/x/y"), "c1", "name IN ('a', 'b)') AND (qty > 0)")]
    assert parse_sql("alter table db.t drop constraint if exists C1") == [
        AlterConstraintStatement(TableRef(name="db.t"), "C1", None, True)]
    for bad in ("ALTER TABLE t ADD CONSTRAINT c CHECK x > 1", "ALTER TABLE t ADD CONSTRAINT c CHECK (x > 1",
                "ALTER TABLE t ADD CONSTRAINT c CHECK ()", "ALTER TABLE t DROP CONSTRAINT"):
        with pytest.raises(SqlParseError, match="CONSTRAINT"):
            parse_sql(bad)
