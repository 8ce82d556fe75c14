"""Per-file dictionary choice of the data file writer (dvengine/engine/local/parquet_encoding.py).

Truth is the written file itself: its footer says which column chunks carry a dictionary page, and
pyarrow's own Parquet schema names the leaf paths the choice must use."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine.engine.local.parquet_encoding import SAMPLE_SIZE, dictionary_columns, leaf_paths
from dvengine.log import load_snapshot


def _dictionary_pages(data: bytes | str) -> dict[str, bool]:
    metadata = pq.read_metadata(io.BytesIO(data) if isinstance(data, bytes) else data)
    group = metadata.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).has_dictionary_page for i in range(group.num_columns)}


def _written(table: pa.Table, use_dictionary: bool | list[str] | None = None) -> bytes:
    """``table`` as a Parquet file, with the writer's choice of dictionaries unless told which."""
    sink = io.BytesIO()
    chosen = dictionary_columns(table) if use_dictionary is None else use_dictionary
    pq.write_table(table, sink, use_dictionary=chosen, store_schema=False)
    return sink.getvalue()


def _mixed(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    rounds = rng.integers(0, 50, rows)
    return pa.table({
        "id": pa.array(rng.permutation(rows * 4)[:rows].astype(np.int64)),
        "amount": pa.array(rng.random(rows)),
        "val": pa.array(rounds),
        "tag": pa.array([f"r{x}" for x in rounds]),
        "uuid": pa.array([f"{x:032x}" for x in rng.permutation(rows * 4)[:rows]]),
    })


@pytest.mark.parametrize("rows", [200, SAMPLE_SIZE, 5_000, 200_000])
def test_unique_columns_are_written_plain_and_repeating_ones_with_a_dictionary(rows: int) -> None:
    pages = _dictionary_pages(_written(_mixed(rows)))
    assert pages == {"id": False, "amount": False, "val": True, "tag": True, "uuid": False}


def test_a_table_without_unique_columns_keeps_pyarrows_default() -> None:
    table = _mixed(5_000).select(["val", "tag"])
    assert dictionary_columns(table) is True
    assert _dictionary_pages(_written(table)) == {"val": True, "tag": True}


def test_a_column_of_moderate_cardinality_keeps_its_dictionary() -> None:
    # 20,000 distinct values in 1M rows repeat 50 times each: the sample (1,024 draws) repeats ~26
    # times, the estimate is ~20,000, far under half the rows.
    rng = np.random.default_rng(5)
    table = pa.table({"k": pa.array(rng.integers(0, 20_000, 1_000_000))})
    assert dictionary_columns(table) is True


def test_nulls_booleans_and_arrow_dictionaries_keep_a_dictionary() -> None:
    rows = 3_000
    table = pa.table({
        "id": pa.array(np.arange(rows)),
        "nothing": pa.nulls(rows, pa.int64()),
        "flag": pa.array(np.arange(rows) % 2 == 0),
        "coded": pa.array([f"v{i}" for i in range(rows)]).dictionary_encode(),
    })
    assert dictionary_columns(table) == ["nothing", "flag", "coded"]


def test_leaf_paths_name_the_columns_pyarrow_writes() -> None:
    item = pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])
    table = pa.table({
        "s": pa.array([{"a": 1, "b": ["x"]}], item),
        "l": pa.array([[1, 2]], pa.list_(pa.int64())),
        "m": pa.array([[("k", 1.5)]], pa.map_(pa.string(), pa.float64())),
        "ls": pa.array([[{"a": 2, "b": []}]], pa.list_(item)),
        "x": pa.array([7]),
    })
    named = [p for field in table.schema for p in leaf_paths(field.name, field.type)]
    pages = _dictionary_pages(_written(table, named))
    assert sorted(named) == sorted(pages)
    assert all(pages.values())  # every path was recognised by the writer's enable_dictionary


def test_nested_columns_keep_their_dictionaries_beside_a_plain_key() -> None:
    rows = 2_000
    table = pa.table({
        "id": pa.array(np.arange(rows)),
        "s": pa.array([{"a": i % 3, "b": "same"} for i in range(rows)], pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "l": pa.array([[i % 4] for i in range(rows)], pa.list_(pa.int64())),
    })
    pages = _dictionary_pages(_written(table))
    assert pages == {"id": False, "s.a": True, "s.b": True, "l.list.element": True}


def test_files_written_with_the_choice_read_identically_in_dvengine_delta_rs_and_duckdb(tmp_path: Path) -> None:
    rows = _mixed(30_000)
    root = str(tmp_path)
    dvengine.write(rows, root)
    (add,) = load_snapshot(root).files
    pages = _dictionary_pages(f"{root}/{add.path}")
    assert pages["id"] is False and pages["uuid"] is False and pages["tag"] is True
    columns = rows.column_names
    expected = sort_rows([tuple(d[c] for c in columns) for d in rows.to_pylist()])
    assert rows_arrow(root, columns) == expected
    assert rows_delta_rs(root, columns) == expected
    assert rows_duckdb(root, columns) == expected
