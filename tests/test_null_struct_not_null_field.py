"""A NULL struct whose field is NOT NULL (Delta allows it: the field's constraint holds wherever the
struct exists). In Arrow the field's child array holds NULLs under the NULL parents, which a
whole-table cast refuses ("nulls in input cannot be viewed as non-nullable"); reads of a table of
several files and the in-process rewrites used to fail that way. Checked against a model of the
rows, read back by dvengine, delta-rs and DuckDB (the struct compared as a tuple)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable

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


@pytest.mark.parametrize("mode", ["rewrite", "dv"])
def test_reads_and_rewrites_keep_null_structs_with_not_null_fields(tmp_path: Path, mode: str) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_batch([1, 2, 3]), root, configuration={"delta.autoOptimize.autoCompact": "false"})
    dvengine.write(_batch([4, 5, 6]), root, mode="append")
    model = _model([1, 2, 3, 4, 5, 6])
    table = DeltaTable.forPath(None, root)
    assert _flat(table.toArrow().to_pylist()) == sort_rows(model)  # two files: failed before

    table.update("id IN (1, 4)", {"id": "id + 100"}, engine="local", mode=mode)
    model = [(i + 100 if i in (1, 4) else i, s) for i, s in model]
    table.delete("id = 3", engine="local", mode=mode)
    model = [r for r in model if r[0] != 3]
    source = _batch([5, 7, 8])
    (table.alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(set={"s": "s.s"}).whenNotMatchedInsertAll().execute())
    merged = dict(model)
    merged.update(dict(_model([5, 7, 8])))
    model = list(merged.items())

    expected = sort_rows(model)
    assert _flat(DeltaTable.forPath(None, root).toArrow().to_pylist()) == expected
    via_rs, via_duckdb = _other_readers(root)
    assert via_rs == expected
    assert via_duckdb == expected
