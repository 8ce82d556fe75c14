"""A NULL struct whose field is NOT NULL.

Delta's writer refuses such a row: ``Invariants.getFromSchema`` makes ``NotNull(s.x)`` of every
NOT NULL field reached through structs, ``DeltaInvariantCheckerExec`` reads it with
``GetStructField`` (NULL under a NULL ``s``) and throws DELTA_NOT_NULL_CONSTRAINT_VIOLATED; Delta's
``InvariantEnforcementSuite`` "reject non-nullable nested column" refuses ``Row(null)`` for a
nullable ``top`` with a NOT NULL ``top.key``. dvengine's append, UPDATE and MERGE refuse it the same
way (``SchemaViolationError`` naming ``s.x``, the folder byte for byte unchanged).

Other writers do write such rows (delta-rs 1.6 appends them), so tables may hold them: in Arrow the
field's child array holds NULLs under the NULL parents, which a whole-table cast refuses ("nulls
in input cannot be viewed as non-nullable"); reads of a table of several files and the in-process
rewrites used to fail that way. Rows copied unchanged by a copy-on-write rewrite are not checked
again (dvengine's rule for every constraint, spec_notes/writer-features.md; Delta's ``writeFiles``
would check them). Checked against a model of the rows, read back by dvengine, delta-rs and
DuckDB (the struct compared as a tuple)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import folder_state
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SchemaViolationError

STRUCT = pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())])
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("s", STRUCT)])


def _batch(ids: list[int]) -> pa.Table:
    values = [None if i % 2 else {"x": i * 10, "y": f"v{i}"} for i in ids]
    return pa.table({"id": ids, "s": pa.array(values, type=STRUCT)}, schema=SCHEMA)


def _model(ids: list[int]) -> list[tuple[Any, ...]]:
    return [(i, None if i % 2 else (i * 10, f"v{i}")) for i in ids]


def _flat(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sort_rows([(r["id"], None if r["s"] is None else (r["s"]["x"], r["s"]["y"])) for r in rows])


def _other_readers(root: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    def flat(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        out = []
        for i, s in rows:
            if isinstance(s, dict):
                s = (s["x"], s["y"])
            out.append((i, s))
        return sort_rows(out)

    return flat(rows_delta_rs(root, ["id", "s"])), flat(rows_duckdb(root, ["id", "s"]))


def _table_with_null_parents(root: str) -> list[tuple[Any, ...]]:
    """Rows 1..6 in three files: 2 written by dvengine (which makes ``s.x`` NOT NULL), 1, 3 and 4,
    5, 6 appended by delta-rs, odd ids with a NULL ``s``; the model of its rows."""
    from deltalake import write_deltalake

    dvengine.write(_batch([2]), root, configuration={"delta.autoOptimize.autoCompact": "false"})
    write_deltalake(root, _batch([1, 3]), mode="append")
    write_deltalake(root, _batch([4, 5, 6]), mode="append")
    return _model([1, 2, 3, 4, 5, 6])


@pytest.mark.parametrize("mode", ["rewrite", "dv"])
def test_reads_and_rewrites_keep_null_structs_with_not_null_fields(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    model = _table_with_null_parents(root)
    table = DeltaTable.forPath(None, root)
    assert _flat(table.toArrow().to_pylist()) == sort_rows(model)  # several files: failed before

    # rows 2 and 4 have a struct; a rewrite copies 5 and 6 of 4's file unchanged
    table.update("id IN (2, 4)", {"id": "id + 100"}, engine="local", mode=mode)
    model = [(i + 100 if i in (2, 4) else i, s) for i, s in model]
    table.delete("id = 3", engine="local", mode=mode)
    model = [r for r in model if r[0] != 3]
    source = _batch([6, 8])  # even ids: non-NULL structs
    (table.alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"s": "s.s"}).whenNotMatchedInsertAll().execute())
    merged = dict(model)
    merged.update(dict(_model([6, 8])))
    model = list(merged.items())

    expected = sort_rows(model)
    assert _flat(DeltaTable.forPath(None, root).toArrow().to_pylist()) == expected
    via_rs, via_duckdb = _other_readers(root)
    assert via_rs == expected
    assert via_duckdb == expected


NULL_S = "CAST(NULL AS STRUCT<x: BIGINT, y: STRING>)"


def _merge(root: str, source_ids: list[int], matched: bool) -> None:
    builder = DeltaTable.forPath(None, root).alias("t").merge(_batch(source_ids), "t.id = s.id", source_alias="s")
    builder = builder.whenMatchedUpdate(set={"s": "s.s"}) if matched else builder.whenNotMatchedInsertAll()
    builder.execute()


REFUSED = {
    "append a NULL struct": lambda root: dvengine.write(_batch([7]), root, mode="append"),
    "append a NULL field of a struct": lambda root: dvengine.write(
        pa.table({"id": [8], "s": pa.array([{"x": None, "y": "v"}], pa.struct([("x", pa.int64()), ("y", pa.string())]))}),
        root, mode="append"),
    "update s = NULL, dv": lambda root: DeltaTable.forPath(None, root).update("id = 2", {"s": NULL_S}, engine="local", mode="dv"),
    "update s = NULL, rewrite": lambda root: DeltaTable.forPath(None, root).update(
        "id = 2", {"s": NULL_S}, engine="local", mode="rewrite"),
    # the updated row is written again, NULL struct and all: Delta's writeFiles checks it
    "update another column of a row with a NULL struct": lambda root: DeltaTable.forPath(None, root).update(
        "id = 1", {"id": "id + 100"}, engine="local", mode="dv"),
    "merge update with a NULL struct": lambda root: _merge(root, [4, 5], matched=True),
    "merge insert of a NULL struct": lambda root: _merge(root, [9], matched=False),
}


@pytest.mark.parametrize("operation", list(REFUSED))
def test_a_null_parent_of_a_not_null_field_is_refused_as_delta_does(tmp_path: Path, operation: str) -> None:
    """SchemaViolationError naming ``s.x``, nothing written: the folder byte for byte as before and
    delta-rs still reads the model."""
    root = str(tmp_path / "t")
    model = _table_with_null_parents(root)
    before = folder_state(Path(root))
    with pytest.raises(SchemaViolationError, match=r"NOT NULL column.*'s\.x'"):
        REFUSED[operation](root)
    assert folder_state(Path(root)) == before
    assert _other_readers(root)[0] == sort_rows(model)


def test_a_nested_assignment_on_a_null_struct_builds_one_and_is_accepted(tmp_path: Path) -> None:
    """``SET s.x = 1`` on a row whose ``s`` is NULL builds ``{x: 1, y: NULL}`` (``y`` is nullable),
    which satisfies ``s.x``; an append of complete structs is accepted too."""
    root = str(tmp_path / "t")
    model = _table_with_null_parents(root)
    DeltaTable.forPath(None, root).update("id = 1", {"s.x": "1"}, engine="local", mode="dv")
    dvengine.write(_batch([10]), root, mode="append")
    model = [(i, (1, None) if i == 1 else s) for i, s in model] + _model([10])
    assert _other_readers(root)[0] == sort_rows(model)
    assert _flat(DeltaTable.forPath(None, root).toArrow().to_pylist()) == sort_rows(model)


SPARK_REFUSED = {
    "update s = NULL": lambda spark, root: DeltaTable.forPath(spark, root).update("id = 2", {"s": NULL_S}, engine="spark"),
    "update another column of a row with a NULL struct": lambda spark, root: DeltaTable.forPath(spark, root).update(
        "id = 1", {"id": "id + 100"}, engine="spark"),
    "merge update with a NULL struct": lambda spark, root: (
        DeltaTable.forPath(spark, root).alias("t").merge(spark.createDataFrame(_batch([4, 5])).alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"s": "s.s"}).execute()),
}


@pytest.mark.parametrize("operation", list(SPARK_REFUSED))
def test_the_spark_executor_refuses_a_null_parent_as_well(spark: Any, tmp_path: Path, operation: str) -> None:
    """The same rule on the Spark executor (its file tasks and row plan share the check)."""
    root = str(tmp_path / "t")
    model = _table_with_null_parents(root)
    before = folder_state(Path(root))
    with pytest.raises(SchemaViolationError, match=r"'s\.x'"):
        SPARK_REFUSED[operation](spark, root)
    assert folder_state(Path(root)) == before
    assert _other_readers(root)[0] == sort_rows(model)
