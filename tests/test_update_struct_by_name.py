"""UPDATE stores a whole struct value by field *name*, as Delta's UPDATE does (struct casts by name,
``resolveMergeUpdateStructsByName.enabled``): a ``named_struct`` / ``STRUCT(... AS f)`` naming the
column's fields in another order, or another struct column whose fields come in another order.
Before, the Spark executor cast by position (values landed in the wrong fields when the types
allowed it) and the in-process evaluator refused the value. Checked against a model, read back by
delta-rs, on both executors; fields that differ by more than order are refused with the table
unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import SchemaMismatchError

S = pa.struct([pa.field("x", pa.string()), pa.field("y", pa.string())])
R = pa.struct([pa.field("y", pa.string()), pa.field("x", pa.string())])  # same fields, other order


def _table(root: str) -> None:
    dvengine.write(pa.table({
        "id": [1, 2, 3, 4],
        "s": pa.array([{"x": f"x{i}", "y": f"y{i}"} for i in range(1, 5)], type=S),
        "r": pa.array([{"y": "ry1", "x": "rx1"}, None, {"y": "ry3", "x": "rx3"}, {"y": "ry4", "x": "rx4"}], type=R),
    }), root)


def _rows(root: str) -> list[tuple[Any, ...]]:
    got = DeltaTable.forPath(None, root).toArrow().to_pylist()
    return sort_rows([(r["id"], None if r["s"] is None else (r["s"]["x"], r["s"]["y"])) for r in got])


def _rs_rows(root: str) -> list[tuple[Any, ...]]:
    out = []
    for i, s, _r in rows_delta_rs(root, ["id", "s", "r"]):
        out.append((i, None if s is None else (s["x"], s["y"])))
    return sort_rows(out)


def _run(table: DeltaTable, engine: str, mode: str | None = None) -> list[tuple[Any, ...]]:
    table.update("id = 1", {"s": "named_struct('y', 'qy', 'x', 'qx')"}, engine=engine, mode=mode)
    table.update("id IN (2, 3)", {"s": "r"}, engine=engine, mode=mode)  # r is NULL on row 2: s becomes NULL
    table.update("id = 4", {"s": "STRUCT('zy' AS Y, 'zx' AS x)"}, engine=engine, mode=mode)
    return sort_rows([(1, ("qx", "qy")), (2, None), (3, ("rx3", "ry3")), (4, ("zx", "zy"))])


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_struct_values_go_by_name_in_process(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    _table(root)
    expected = _run(DeltaTable.forPath(None, root), "local", mode)
    assert _rows(root) == expected
    assert _rs_rows(root) == expected


def test_struct_values_go_by_name_on_spark(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _table(root)
    expected = _run(DeltaTable.forPath(spark, root), "spark")
    assert _rows(root) == expected
    assert _rs_rows(root) == expected


@pytest.mark.parametrize("value", ["named_struct('y', 'a', 'z', 'b')", "named_struct('x', 'a')",
                                   "named_struct('x', 'a', 'y', 'b', 'y', 'c')"])
def test_a_struct_with_other_fields_is_refused(tmp_path: Path, value: str) -> None:
    root = str(tmp_path / "t")
    _table(root)
    before = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir())
    with pytest.raises(SchemaMismatchError, match="matched by field name"):
        DeltaTable.forPath(None, root).update("id = 1", {"s": value})
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == before


@pytest.mark.parametrize("mode", ["dv", "rewrite"])
def test_merge_struct_values_go_by_name_in_process(tmp_path: Path, mode: str) -> None:
    """MERGE casts every struct value by name too (Delta's ``PreprocessTableMerge`` aligns each
    action with ``castIfNeeded`` / ``MergeOrUpdateCastingBehavior``): a ``named_struct`` naming the
    column's fields in another order, in an update or an insert clause. The in-process executor
    refused both (NotLocallyEvaluableError) before MERGE clauses were put in the column's order."""
    root = str(tmp_path / "t")
    _table(root)
    source = pa.table({"id": [1, 9], "v": ["a", "b"]})
    metrics = (
        DeltaTable.forPath(None, root).alias("t").merge(source, "t.id = src.id", source_alias="src")
        .whenMatchedUpdate(set={"s": "named_struct('y', concat('my', src.v), 'x', t.s.x)"})
        .whenNotMatchedInsert(values={"id": "src.id", "s": "STRUCT(src.v AS Y, 'nx' AS x)"})
        .withMode(mode).withEngine("local").executeMetrics()
    )
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"], metrics["executionEngine"]) == (1, 1, "local")
    expected = sort_rows([(1, ("x1", "mya")), (2, ("x2", "y2")), (3, ("x3", "y3")), (4, ("x4", "y4")), (9, ("nx", "b"))])
    assert _rows(root) == expected
    assert _rs_rows(root) == expected
