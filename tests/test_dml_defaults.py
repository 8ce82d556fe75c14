"""The DEFAULT keyword in UPDATE (``SET c = DEFAULT``) and in MERGE clauses.

Truth: an in-memory model of the rows, whose defaults come from the same declaration the table's
log is written from (field metadata ``CURRENT_DEFAULT``, as Delta Spark leaves it after
``ALTER COLUMN ... SET DEFAULT``), and Spark's rule for ``SET c = DEFAULT`` (Spark's
``ResolveDefaultColumns.resolveColumnDefaultInAssignmentValue``): the column's default, else NULL
for a nullable column, else NO_DEFAULT_COLUMN_VALUE_AVAILABLE; DEFAULT inside an expression is
DEFAULT_PLACEMENT_INVALID. The table is read by dvengine, delta-rs and DuckDB. MERGE clauses do not
get DEFAULT: Delta resolves them itself (ResolveDeltaMergeInto), where DEFAULT is an unknown column.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import spark_conf
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    ConstraintViolationError,
    DefaultPlacementError,
    InvalidPredicateError,
    NoDefaultValueError,
    OperationNotAllowedError,
    UnresolvedColumnError,
)

Row = dict[str, Any]

# (name, Delta type, nullable, CURRENT_DEFAULT SQL text or None, the value that text stands for)
COLUMNS: list[tuple[str, str, bool, str | None, Any]] = [
    ("id", "long", False, None, None),
    ("status", "string", False, "'new'", "new"),
    ("qty", "long", True, "3 + 4", 7),
    ("note", "string", True, None, None),
]
NAMES = [c[0] for c in COLUMNS]
ARROW_TYPES = {"long": pa.int64(), "string": pa.string()}


def _table(root: Path, with_defaults: bool = True, columns: list[tuple[str, str, bool, str | None, Any]] = COLUMNS) -> str:
    """A Delta table's first commit as Delta Spark writes it: defaults in CURRENT_DEFAULT and the
    allowColumnDefaults feature (``with_defaults``), or neither (a table without the feature)."""
    fields = [
        {"name": name, "type": typ, "nullable": nullable,
         "metadata": {"CURRENT_DEFAULT": text} if with_defaults and text is not None else {}}
        for name, typ, nullable, text, _ in columns
    ]
    features = ["appendOnly", "deletionVectors", "invariants"] + (["allowColumnDefaults"] if with_defaults else [])
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE", "operationParameters": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": sorted(features)}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true"},
                      "createdTime": int(time.time() * 1000)}},
    ]
    os.makedirs(root / "_delta_log")
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def _seed(root: str, rows: list[Row], columns: list[tuple[str, str, bool, str | None, Any]] = COLUMNS) -> None:
    data = {name: pa.array([r[name] for r in rows], ARROW_TYPES[typ]) for name, typ, *_ in columns}
    dvengine.write(pa.table(data), root, mode="append")


def _start_rows() -> list[Row]:
    return [{"id": i, "status": f"s{i}", "qty": i * 10, "note": f"n{i}"} for i in range(1, 7)]


def _model_update(rows: list[Row], where: Callable[[Row], bool], columns: list[str], with_defaults: bool) -> None:
    """Spark's rule: the declared default, else NULL (the columns assigned here are all allowed)."""
    declared = {name: value for name, _, _, text, value in COLUMNS if text is not None and with_defaults}
    for row in rows:
        if where(row):
            for c in columns:
                row[c] = declared.get(c)


def _commits(root: str | Path) -> int:
    return sum(1 for name in os.listdir(Path(root) / "_delta_log") if name.endswith(".json"))


def _tuples(rows: list[Row], names: list[str] = NAMES) -> list[tuple[Any, ...]]:
    return sort_rows([tuple(r[n] for n in names) for r in rows])


def _check_readers(root: str, model: list[Row], names: list[str] = NAMES) -> None:
    want = _tuples(model, names)
    assert rows_arrow(root, names) == want
    assert rows_delta_rs(root, names) == want
    assert rows_duckdb(root, names) == want


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_update_set_default_assigns_defaults_or_null_locally(tmp_path: Path, mode: str) -> None:
    root = _table(tmp_path / "t")
    model = _start_rows()
    _seed(root, model)
    table = DeltaTable.forPath(None, root)
    steps: list[tuple[str, dict[str, str], Callable[[Row], bool]]] = [
        ("id >= 4", {"status": "DEFAULT", "qty": "default"}, lambda r: r["id"] >= 4),
        ("id = 2", {"note": "`DEFAULT`"}, lambda r: r["id"] == 2),  # no default: NULL; quoted is the keyword too
        ("id = 1", {"qty": "Default", "note": "concat(note, '!')"}, lambda r: r["id"] == 1),
    ]
    for condition, assignments, where in steps:
        metrics = table.updateMetrics(condition, assignments, mode=mode, engine="local")
        for row in model:
            if where(row) and "note" in assignments and assignments["note"].startswith("concat"):
                row["note"] = row["note"] + "!"
        _model_update(model, where, [c for c, v in assignments.items() if v.strip("`").upper() == "DEFAULT"], True)
        assert metrics["numUpdatedRows"] == sum(1 for r in model if where(r))
    _check_readers(root, model)


def test_update_default_without_the_feature_is_null(tmp_path: Path) -> None:
    """Spark does not look at allowColumnDefaults for SET c = DEFAULT: a table without it has no
    defaults, so a nullable column gets NULL and a NOT NULL one is refused."""
    root = _table(tmp_path / "t", with_defaults=False)
    model = _start_rows()
    _seed(root, model)
    table = DeltaTable.forPath(None, root)
    table.update("id > 3", {"qty": "DEFAULT", "note": "DEFAULT"}, engine="local")
    _model_update(model, lambda r: r["id"] > 3, ["qty", "note"], with_defaults=False)
    _check_readers(root, model)
    versions = _commits(root)
    with pytest.raises(NoDefaultValueError, match="status"):
        table.update("id = 1", {"status": "DEFAULT"}, engine="local")
    assert _commits(root) == versions
    _check_readers(root, model)


@pytest.mark.parametrize(
    ("assignments", "error", "names"),
    [
        ({"qty": "DEFAULT + 1"}, DefaultPlacementError, "qty"),
        ({"note": "coalesce(note, DEFAULT)"}, DefaultPlacementError, "note"),
        ({"status": "'x'", "id": "DEFAULT"}, NoDefaultValueError, "'id'"),  # NOT NULL, no default
    ],
)
def test_update_default_refusals_leave_the_table_unchanged(
    tmp_path: Path, assignments: dict[str, str], error: type[Exception], names: str
) -> None:
    root = _table(tmp_path / "t")
    model = _start_rows()
    _seed(root, model)
    table = DeltaTable.forPath(None, root)
    files = sorted(os.listdir(root))
    with pytest.raises(error, match=names) as info:
        table.update("id = 1", assignments, engine="local")
    assert isinstance(info.value, InvalidPredicateError)  # callers catching the binder's errors still catch these
    assert sorted(os.listdir(root)) == files and _commits(root) == 2
    _check_readers(root, model)


def test_update_default_names_a_column_called_default(tmp_path: Path) -> None:
    """Spark resolves an assigned value against the table first: a column named ``default`` wins."""
    columns = [*COLUMNS, ("default", "long", True, None, None)]
    root = _table(tmp_path / "t", columns=columns)
    model = [{**r, "default": r["id"] * 100} for r in _start_rows()]
    _seed(root, model, columns)
    DeltaTable.forPath(None, root).update("id <= 2", {"qty": "DEFAULT"}, engine="local")
    for row in model:
        if row["id"] <= 2:
            row["qty"] = row["default"]
    _check_readers(root, model, [*NAMES, "default"])


def test_update_default_on_an_identity_column_is_refused(tmp_path: Path) -> None:
    """Identity columns cannot be updated at all (Delta's DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED)."""
    root = tmp_path / "t"
    table = (DeltaTable.create(None).location(str(root))
             .addColumn("id", "BIGINT", generatedByDefaultAs=dvengine.IdentityGenerator(1, 1))
             .addColumn("v", "STRING").execute())
    dvengine.write(pa.table({"v": ["a", "b"]}), str(root), mode="append")
    before = rows_arrow(root, ["id", "v"])
    with pytest.raises(OperationNotAllowedError, match="id"):
        table.update("v = 'a'", {"id": "DEFAULT"}, engine="local")
    assert rows_arrow(root, ["id", "v"]) == before


def test_update_default_on_a_generated_column_is_null_and_breaks_its_check(tmp_path: Path) -> None:
    """A generated column has no CURRENT_DEFAULT, so DEFAULT is NULL, which Delta's generated-column
    check refuses unless the generation expression is NULL for the row."""
    root = tmp_path / "t"
    table = (DeltaTable.create(None).location(str(root)).addColumn("id", "BIGINT")
             .addColumn("g", "BIGINT", generatedAlwaysAs="id * 2").execute())
    dvengine.write(pa.table({"id": pa.array([1, None], pa.int64())}), str(root), mode="append")
    with pytest.raises(ConstraintViolationError, match="g"):
        table.update("id = 1", {"g": "DEFAULT"}, engine="local")
    assert rows_arrow(root, ["id", "g"]) == [(1, 2), (None, None)]
    table.update("id IS NULL", {"g": "DEFAULT"}, engine="local")  # NULL = id * 2 for that row: allowed
    assert rows_arrow(root, ["id", "g"]) == [(1, 2), (None, None)]
    assert _commits(root) == 3  # create, append, the allowed UPDATE (the refused one committed nothing)


@pytest.mark.parametrize("clause", ["matched_update", "not_matched_insert", "not_matched_by_source_update"])
def test_merge_default_is_an_unknown_column_as_in_delta(tmp_path: Path, clause: str) -> None:
    """Delta resolves MERGE clauses itself and has no DEFAULT there (DELTA_MERGE_UNRESOLVED_EXPRESSION)."""
    root = _table(tmp_path / "t")
    model = _start_rows()
    _seed(root, model)
    source = pa.table({"id": pa.array([2, 9], pa.int64())})
    builder = DeltaTable.forPath(None, root).alias("t").merge(source, "t.id = s.id", source_alias="s")
    if clause == "matched_update":
        builder = builder.whenMatchedUpdate(set={"qty": "DEFAULT"})
    elif clause == "not_matched_insert":
        builder = builder.whenNotMatchedInsert(values={"id": "s.id", "status": "'x'", "qty": "DEFAULT"})
    else:
        builder = builder.whenNotMatchedBySourceUpdate(set={"note": "DEFAULT"})
    with pytest.raises(UnresolvedColumnError, match="DEFAULT"):
        builder.withEngine("local").execute()
    assert _commits(root) == 2
    _check_readers(root, model)


# --- Spark: dvengine.sql on the Spark executor ----------------------------------------------------


def test_sql_update_set_default_on_spark(spark: Any, tmp_path: Path) -> None:
    root = _table(tmp_path / "t")
    model = _start_rows()
    _seed(root, model)
    with spark_conf(spark, "dvengine.execution.engine", "spark"):
        dvengine.sql(spark, f"UPDATE delta.`{root}` AS t SET t.status = DEFAULT, qty = DEFAULT, note = DEFAULT "
                            "WHERE id % 2 = 0")
        with pytest.raises(DefaultPlacementError, match="qty"):
            dvengine.sql(spark, f"UPDATE delta.`{root}` SET qty = DEFAULT * 2 WHERE id = 1")
    _model_update(model, lambda r: r["id"] % 2 == 0, ["status", "qty", "note"], True)
    _check_readers(root, model)
    assert _commits(root) == 3  # create, append, one UPDATE
    # delta-spark's update(set=...) builds the same UpdateTable, so a Column DEFAULT is the keyword too
    from pyspark.sql import functions as F

    metrics = DeltaTable.forPath(spark, root).updateMetrics("id = 1", {"qty": F.expr("DEFAULT")}, engine="spark")
    assert metrics["executionEngine"] == "spark" and metrics["numUpdatedRows"] == 1
    with pytest.raises(DefaultPlacementError, match="note"):
        DeltaTable.forPath(spark, root).update("id = 3", {"note": F.expr("concat(DEFAULT, 'x')")})
    _model_update(model, lambda r: r["id"] == 1, ["qty"], True)
    _check_readers(root, model)  # create, append, one UPDATE


def test_sql_merge_default_is_refused_on_spark(spark: Any, tmp_path: Path) -> None:
    root = _table(tmp_path / "t")
    model = _start_rows()
    _seed(root, model)
    spark.createDataFrame([(2,), (9,)], "id bigint").createOrReplaceTempView("dml_default_src")
    with spark_conf(spark, "dvengine.execution.engine", "spark"), pytest.raises(UnresolvedColumnError, match="DEFAULT"):
        dvengine.sql(spark, f"MERGE INTO delta.`{root}` t USING dml_default_src s ON t.id = s.id "
                            "WHEN MATCHED THEN UPDATE SET qty = DEFAULT "
                            "WHEN NOT MATCHED THEN INSERT (id, status, qty) VALUES (s.id, 'x', DEFAULT)")
    assert _commits(root) == 2
    _check_readers(root, model)
