"""Column invariants (``delta.invariants`` field metadata, the legacy ``invariants`` writer feature):
enforced by appends, UPDATE and MERGE as CHECK constraints are, on both executors.

The tables are made the way old Delta versions and other tools leave them: rows written first,
then a commit whose ``metaData`` schema carries ``{"expression": {"expression": "<sql>"}}`` in a
field's metadata (Delta's ``InvariantEnforcementSuite`` commits its schemas the same way, with a
ManualUpdate), on a legacy (1, 2) protocol and on a table-features protocol listing ``invariants``.

Truth: an in-memory model of the rows (a refused command leaves it, and the table folder byte for
byte, unchanged), the raw log, delta-rs and DuckDB reading the result, and delta-rs's own writer,
which enforces the same invariants, refusing the rows dvengine refuses.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import STRATEGY_CONF, folder_state, spark_conf
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    ConstraintViolationError,
    NotLocallyEvaluableError,
    SchemaViolationError,
    UnsupportedFeatureError,
)
from dvengine.log import latest_version, load_snapshot

COLUMNS = ["id", "qty", "info", "name"]
INFO = pa.struct([("score", pa.int32()), ("tag", pa.string())])


def _rows(rows: list[tuple[Any, ...]]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "qty": pa.array([r[1] for r in rows], pa.int64()),
        "info": pa.array([r[2] for r in rows], INFO),
        "name": pa.array([r[3] for r in rows], pa.string()),
    })


MODEL: list[tuple[Any, ...]] = [(i, 10 * i, {"score": i, "tag": f"t{i}"}, chr(96 + i)) for i in range(1, 5)]


def _invariant(sql: str) -> str:
    """The field-metadata value Delta writes (``Invariants.PersistedExpression(sql).json``)."""
    return json.dumps({"expression": {"expression": sql}})


def _with_field_metadata(schema: dict[str, Any], path: tuple[str, ...], extra: dict[str, Any], nullable: bool | None) -> None:
    fields = schema["fields"]
    for name in path[:-1]:
        fields = next(f for f in fields if f["name"] == name)["type"]["fields"]
    field = next(f for f in fields if f["name"] == path[-1])
    field["metadata"] = {**field.get("metadata", {}), **extra}
    if nullable is not None:
        field["nullable"] = nullable


def _commit_invariants(root: str, invariants: dict[str, str], not_null: tuple[str, ...] = (), raw: bool = False) -> None:
    """Commit a metadata change putting ``{dotted column: expression}`` into the schema as Delta
    wraps it (``raw``: the values stored as given) and, on a table-features protocol,
    ``invariants`` into the writer features. ``not_null`` columns become NOT NULL in the same commit."""
    snapshot = load_snapshot(root)
    metadata = snapshot.metadata.to_json()
    schema = json.loads(metadata["schemaString"])
    for column, value in invariants.items():
        stored = value if raw else _invariant(value)
        _with_field_metadata(schema, tuple(column.split(".")), {"delta.invariants": stored}, None)
    for column in not_null:
        _with_field_metadata(schema, tuple(column.split(".")), {}, False)
    metadata["schemaString"] = json.dumps(schema)
    actions: list[dict[str, Any]] = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "Manual Update", "operationParameters": {},
                        "readVersion": snapshot.version, "isolationLevel": "Serializable", "isBlindAppend": False,
                        "engineInfo": "Apache-Spark/3.5.3 Delta-Lake/3.3.0", "txnId": str(uuid.uuid4())}},
    ]
    p = snapshot.protocol
    if p.min_writer_version >= 7:
        protocol = p.to_json()
        protocol["writerFeatures"] = sorted({*(p.writer_features or ()), "invariants"})
        actions.append({"protocol": protocol})
    else:
        assert (p.min_reader_version, p.min_writer_version) == (1, 2)  # writer 2 implies invariants
    actions.append({"metaData": metadata})
    with open(os.path.join(root, "_delta_log", f"{snapshot.version + 1:020d}.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def _base(path: Path, dvs: bool, invariants: dict[str, str], not_null: tuple[str, ...] = (), raw: bool = False) -> str:
    dvengine.write(_rows(MODEL), str(path), configuration={"delta.enableDeletionVectors": str(dvs).lower()})
    _commit_invariants(str(path), invariants, not_null, raw)
    return str(path)


def _readers(root: str, expected: list[tuple[Any, ...]]) -> None:
    want = sort_rows(expected)
    assert rows_arrow(root, COLUMNS) == want
    assert rows_delta_rs(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want


def _refused(root: str, error: type[Exception], pattern: str, action: Any) -> None:
    """``action`` fails with ``error`` matching ``pattern`` and leaves the folder byte-identical."""
    before = folder_state(Path(root))
    with pytest.raises(error, match=pattern):
        action()
    assert folder_state(Path(root)) == before


def _append(root: str, rows: list[tuple[Any, ...]]) -> None:
    dvengine.write(_rows(rows), root, mode="append")


def _merge(table: DeltaTable, rows: list[tuple[Any, ...]]) -> None:
    (table.alias("t").merge(_rows(rows), "t.id = s.id", source_alias="s")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())


QTY = r"invariant of column qty \(qty > 0\) violated by row with values: qty = "
SCORE = r"invariant of column info\.score \(info\.score < 100\) violated by row with values: info = "


@pytest.mark.parametrize("dvs", [True, False], ids=["table-features-dvs", "legacy-1-2"])
def test_local_appends_updates_and_merges_enforce_invariants(tmp_path: Path, dvs: bool) -> None:
    root = _base(tmp_path / "t", dvs, {"qty": "qty > 0", "info.score": "info.score < 100"})
    table = DeltaTable.forPath(None, root)
    model = list(MODEL)

    _append(root, [(5, 50, {"score": 99, "tag": "e"}, "e")])
    model.append((5, 50, {"score": 99, "tag": "e"}, "e"))
    _refused(root, ConstraintViolationError, QTY + "0", lambda: _append(root, [(6, 0, {"score": 1, "tag": None}, "f")]))
    _refused(root, ConstraintViolationError, QTY + "None", lambda: _append(root, [(6, None, None, "f")]))  # NULL fails
    # a column the data lacks is written as NULL, which fails the invariant (InvariantEnforcementSuite)
    _refused(root, ConstraintViolationError, QTY + "None",
             lambda: dvengine.write(pa.table({"id": pa.array([6], pa.int64())}), root, mode="append"))
    _refused(root, ConstraintViolationError, SCORE + r"\{'score': 100",
             lambda: _append(root, [(6, 60, {"score": 100, "tag": "f"}, "f")]))
    _refused(root, ConstraintViolationError, SCORE + "None",  # a NULL parent makes info.score NULL
             lambda: _append(root, [(6, 60, None, "f")]))

    _refused(root, ConstraintViolationError, QTY + "-5", lambda: table.update("id = 1", {"qty": "qty - 15"}))
    _refused(root, ConstraintViolationError, QTY + "None", lambda: table.update("id = 2", {"qty": "NULL"}))
    _refused(root, ConstraintViolationError, "invariant of column info.score",
             lambda: table.update("id = 3", {"info": "named_struct('score', 100, 'tag', 'x')"}))
    table.update("id = 1", {"qty": "qty + 5"})
    model = [(1, 15, *r[2:]) if r[0] == 1 else r for r in model]

    _refused(root, ConstraintViolationError, QTY + "0", lambda: _merge(table, [(9, 0, {"score": 9, "tag": "z"}, "z")]))
    _refused(root, ConstraintViolationError, QTY + "-1", lambda: _merge(table, [(2, -1, {"score": 2, "tag": "b"}, "b")]))
    _refused(root, ConstraintViolationError, "invariant of column info.score",
             lambda: _merge(table, [(7, 70, {"score": 700, "tag": "g"}, "g")]))
    good = [(2, 22, {"score": 22, "tag": "b"}, "b"), (7, 70, {"score": 7, "tag": "g"}, "g")]
    _merge(table, good)
    model = [good[0] if r[0] == 2 else r for r in model] + [good[1]]

    table.delete("id = 4")  # DELETE adds no rows: nothing to check
    model = [r for r in model if r[0] != 4]
    _readers(root, model)
    fields = {f.name: f for f in load_snapshot(root).schema.fields}
    assert json.loads(str(fields["qty"].metadata["delta.invariants"])) == {"expression": {"expression": "qty > 0"}}


def test_delta_rs_refuses_the_rows_dvengine_refuses(tmp_path: Path) -> None:
    """An independent writer's verdict on the same table: delta-rs enforces invariants too."""
    from deltalake import write_deltalake

    root = _base(tmp_path / "t", True, {"qty": "qty > 0", "info.score": "info.score < 100"})
    bads = ([(6, 0, {"score": 1, "tag": "f"}, "f")], [(6, 60, {"score": 100, "tag": "f"}, "f")],
            [(6, None, {"score": 1, "tag": "f"}, "f")], [(6, 1, None, "f")])  # NULL fails in both writers
    for bad in bads:
        with pytest.raises(Exception, match="failed validation"):
            write_deltalake(root, _rows(bad), mode="append")
        with pytest.raises(ConstraintViolationError):
            _append(root, bad)
    good = [(6, 1, {"score": 99, "tag": "f"}, "f")]
    write_deltalake(root, _rows(good), mode="append")
    _append(root, [(7, 2, {"score": -3, "tag": None}, None)])
    _readers(root, [*MODEL, *good, (7, 2, {"score": -3, "tag": None}, None)])


def test_add_constraint_on_an_invariant_table_keeps_both_rules(tmp_path: Path) -> None:
    """ADD CONSTRAINT was refused on such tables while invariants were not evaluated; Delta allows it."""
    from dvengine.maintenance.constraints import add_constraint

    root = _base(tmp_path / "t", False, {"qty": "qty > 0"})
    version = add_constraint(root, "small", "qty < 100")
    protocol = load_snapshot(root).protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 3)  # still implies invariants
    _refused(root, ConstraintViolationError, QTY + "0", lambda: _append(root, [(5, 0, None, "e")]))
    _refused(root, ConstraintViolationError, r"small \(qty < 100\).*qty = 100", lambda: _append(root, [(5, 100, None, "e")]))
    _append(root, [(5, 99, None, "e")])
    assert latest_version(root) == version + 1
    _readers(root, [*MODEL, (5, 99, None, "e")])


def test_a_null_safe_invariant_accepts_nulls(tmp_path: Path) -> None:
    root = _base(tmp_path / "t", True, {"qty": "qty IS NULL OR qty > 0"})
    table = DeltaTable.forPath(None, root)
    _append(root, [(5, None, None, None)])
    table.update("id = 1", {"qty": "NULL"})
    _refused(root, ConstraintViolationError, r"qty IS NULL OR qty > 0.*qty = 0", lambda: table.update("id = 2", {"qty": "0"}))
    _readers(root, [(1, None, *MODEL[0][2:]), *MODEL[1:], (5, None, None, None)])


def test_an_invariant_on_a_not_null_column_is_enforced_with_the_not_null(tmp_path: Path) -> None:
    """Delta Spark's ``Invariants.getFromSchema`` keeps only the NOT NULL check for a NOT NULL
    field and skips its invariant; the protocol says writers must enforce every invariant, and
    delta-rs does. dvengine enforces both (spec_notes/writer-features.md)."""
    root = _base(tmp_path / "t", True, {"qty": "qty > 0"}, not_null=("qty",))
    table = DeltaTable.forPath(None, root)
    _refused(root, SchemaViolationError, "qty", lambda: _append(root, [(5, None, None, "e")]))
    _refused(root, ConstraintViolationError, QTY + "0", lambda: _append(root, [(5, 0, None, "e")]))
    _refused(root, ConstraintViolationError, QTY + "-1", lambda: table.update("id = 1", {"qty": "-1"}))
    _append(root, [(5, 1, None, "e")])
    _readers(root, [*MODEL, (5, 1, None, "e")])


@pytest.mark.parametrize("stored", [
    json.dumps({"expression": "qty > 0"}),  # the expression not wrapped in its own object
    json.dumps({"other": {"expression": "qty > 0"}}),
    "qty > 0",  # not JSON
], ids=["flat", "no-expression", "not-json"])
def test_an_unrecognized_invariant_refuses_every_write(tmp_path: Path, stored: str) -> None:
    """Delta's ``Invariants.getFromSchema`` fails such a schema (DELTA_UNRECOGNIZED_INVARIANT, or
    its JSON parser's error); dvengine refuses with a typed error naming the column."""
    root = _base(tmp_path / "t", True, {"qty": stored}, raw=True)
    table = DeltaTable.forPath(None, root)
    pattern = r"column 'qty'.*DELTA_UNRECOGNIZED_INVARIANT"
    _refused(root, UnsupportedFeatureError, pattern, lambda: _append(root, [(5, 5, None, "e")]))
    _refused(root, UnsupportedFeatureError, pattern, lambda: table.update("id = 1", {"qty": "2"}))
    _refused(root, UnsupportedFeatureError, pattern, lambda: _merge(table, [(5, 5, None, "e")]))
    _readers(root, MODEL)


def test_an_invariant_the_arrow_evaluator_cannot_check_refuses_before_writing(tmp_path: Path) -> None:
    root = _base(tmp_path / "t", True, {"name": "initcap(name) <> ''"})  # initcap: not in the Arrow evaluator
    table = DeltaTable.forPath(None, root)
    named = r"invariant of column name \(initcap\(name\) <> ''\)"
    _refused(root, UnsupportedFeatureError, named + ".*INITCAP", lambda: table.update("id = 1", {"qty": "2"}))
    _refused(root, UnsupportedFeatureError, named, lambda: _merge(table, [(5, 5, None, "e")]))
    _refused(root, NotLocallyEvaluableError, named, lambda: _append(root, [(5, 5, None, "e")]))
    table.delete("id = 4")  # DELETE adds no rows: allowed
    _readers(root, MODEL[:3])


def test_invariants_inside_arrays_and_maps_are_not_checked_as_delta_does(tmp_path: Path) -> None:
    """Delta collects invariants with ``filterRecursively(schema, checkComplexTypes = false)``:
    fields of structs inside arrays or maps are never looked at, so their invariants bind nowhere."""
    elem = pa.struct([("v", pa.int64())])
    data = pa.table({"id": pa.array([1], pa.int64()), "xs": pa.array([[{"v": 1}]], pa.list_(elem))})
    root = str(tmp_path / "t")
    dvengine.write(data, root)
    snapshot = load_snapshot(root)
    metadata = snapshot.metadata.to_json()
    schema = json.loads(metadata["schemaString"])
    xs = next(f for f in schema["fields"] if f["name"] == "xs")
    xs["type"]["elementType"]["fields"][0]["metadata"] = {"delta.invariants": _invariant("v > 100")}
    metadata["schemaString"] = json.dumps(schema)
    with open(os.path.join(root, "_delta_log", f"{snapshot.version + 1:020d}.json"), "w") as f:
        f.write(json.dumps({"metaData": metadata}) + "\n")
    dvengine.write(pa.table({"id": pa.array([2], pa.int64()), "xs": pa.array([[{"v": 2}]], pa.list_(elem))}),
                   root, mode="append")
    DeltaTable.forPath(None, root).update("id = 1", {"id": "3"})
    assert latest_version(root) == snapshot.version + 3
    assert sorted(r["id"] for r in DeltaTable.forPath(None, root).toArrow().to_pylist()) == [2, 3]


def test_a_rename_leaves_the_invariant_naming_the_old_column_and_writes_refused(tmp_path: Path) -> None:
    """RENAME COLUMN looks for dependent CHECK constraints and generation expressions only (Delta's
    checkDependentExpressions), so the invariant keeps the old name and no longer binds: typed, nothing written."""
    from dvengine.errors import UnresolvedColumnError
    from dvengine.maintenance.column_changes import rename_column

    root = str(tmp_path / "t")
    dvengine.write(_rows(MODEL), root, configuration={"delta.columnMapping.mode": "name"})
    _commit_invariants(root, {"qty": "qty > 0"})
    rename_column(root, ["qty"], "q")
    _refused(root, UnresolvedColumnError, r"invariant of column q \(qty > 0\).*'qty' does not exist",
             lambda: dvengine.write(pa.table({"id": pa.array([9], pa.int64()), "q": pa.array([5], pa.int64())}),
                                    root, mode="append"))


def test_spark_appends_and_dml_enforce_invariants(spark: Any, tmp_path: Path) -> None:
    """Spark appends check invariants with Spark SQL (their own code path); Spark DML checks its
    new rows on Arrow in the writer tasks, like CHECK constraints."""
    root = _base(tmp_path / "t", True, {"qty": "qty > 0", "info.score": "info.score < 100"})
    table = DeltaTable.forPath(spark, root)
    ddl = "id bigint, qty bigint, info struct<score: int, tag: string>, name string"
    _refused(root, ConstraintViolationError, QTY + "-1",
             lambda: dvengine.write(spark.createDataFrame([(5, -1, (1, "e"), "e")], ddl), root, mode="append"))
    _refused(root, ConstraintViolationError, "invariant of column info.score",
             lambda: dvengine.write(spark.createDataFrame([(5, 5, (100, "e"), "e")], ddl), root, mode="append"))
    _refused(root, ConstraintViolationError, "invariant of column info.score",
             lambda: dvengine.write(spark.createDataFrame([(5, 5, None, "e")], ddl), root, mode="append"))
    dvengine.write(spark.createDataFrame([(5, 5, (50, "e"), "e")], ddl), root, mode="append")
    _refused(root, ConstraintViolationError, QTY + "-5", lambda: table.update("id = 1", {"qty": "qty - 15"}, engine="spark"))
    source = spark.createDataFrame([(9, 9, (900, "z"), "z")], ddl)
    with spark_conf(spark, STRATEGY_CONF, "rows"):  # the row plan's writer tasks
        _refused(root, ConstraintViolationError, "invariant of column info.score", lambda: (
            table.alias("t").merge(source.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().withEngine("spark").execute()))
    table.update("id = 3", {"qty": "qty * 2"}, engine="spark")
    model = [(3, 60, *r[2:]) if r[0] == 3 else r for r in MODEL] + [(5, 5, {"score": 50, "tag": "e"}, "e")]
    _readers(root, model)
