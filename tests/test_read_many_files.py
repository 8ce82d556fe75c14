"""The multi-file reader (``read_files_arrow``): large files read column by column on the pool,
their DVs applied per column, small files whole, all back in file order.

Truth: an in-memory model of the rows, delta-rs's reader, and the one-file-at-a-time reader
(``read_file_arrow``) for the exact row order. Files of at least ``THREADED_READ_ROWS`` rows take
the column-task path, so the tables here hold a few such files next to small ones, with DVs,
partitions, a column added after the large files were written (read as nulls) and column mapping.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable as DeltaRsTable
from deltalake import QueryBuilder, write_deltalake
from interop import sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import DataFileError, DeletionVectorError, LogCorruptedError
from dvengine.log import load_snapshot
from dvengine.read import read_file_arrow, read_files_arrow
from dvengine.read.arrow_reader import THREADED_READ_ROWS

LARGE = THREADED_READ_ROWS + 4_000


def _batch(start: int, n: int, part: str) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "part": [part] * n,
        "name": pa.array([f"n{i % 97}" for i in range(start, start + n)]),
    })


def _stream_table(root: Path, partitioned: bool) -> dict[int, tuple[str, str, str | None]]:
    """Two large files, small ones after them, a column added late, DVs on large and small files;
    returns the model id -> (part, name, extra)."""
    model: dict[int, tuple[str, str, str | None]] = {}
    for i, (start, n, part) in enumerate([(0, LARGE, "a"), (LARGE, LARGE, "b"), (2 * LARGE, 300, "a")]):
        batch = _batch(start, n, part)
        dvengine.write(batch, str(root), mode="append" if i else "error", partitionBy=["part"] if partitioned else None)
        model.update({r["id"]: (r["part"], r["name"], None) for r in batch.to_pylist()})
    late = _batch(3 * LARGE, 200, "b").append_column("extra", pa.array([f"x{i}" for i in range(200)]))
    dvengine.write(late, str(root), mode="append", mergeSchema=True)
    model.update({r["id"]: (r["part"], r["name"], r["extra"]) for r in late.to_pylist()})
    t = DeltaTable.forPath(None, str(root))
    t.delete("id % 7 = 3 OR id BETWEEN 1000 AND 1999", engine="local", mode="dv")
    for k in [k for k in model if k % 7 == 3 or 1000 <= k <= 1999]:
        del model[k]
    return model


def _model_rows(model: dict[int, tuple[str, str, str | None]]) -> list[tuple[object, ...]]:
    return sort_rows([(k, *v) for k, v in model.items()])


@pytest.mark.parametrize("partitioned", [False, True])
def test_large_and_small_files_read_as_the_model_and_delta_rs(tmp_path: Path, partitioned: bool) -> None:
    root = tmp_path / "t"
    model = _stream_table(root, partitioned)
    snapshot = load_snapshot(str(root))
    large = [a for a in snapshot.files if (a.num_records or 0) >= THREADED_READ_ROWS]
    assert len(large) == 2 and all(a.deletion_vector is not None for a in large)  # the column-task path runs
    table = DeltaTable.forPath(None, str(root)).toArrow()
    assert table.column_names == ["id", "part", "name", "extra"]
    got = sort_rows([tuple(r.values()) for r in table.to_pylist()])
    assert got == _model_rows(model)
    theirs = pa.table(QueryBuilder().register("t", DeltaRsTable(str(root)))
                      .execute("SELECT id, part, name, extra FROM t").read_all())
    assert got == sort_rows([tuple(r.values()) for r in theirs.to_pylist()])
    # file order and row order within each file, as the one-file reader gives them
    one_by_one = pa.concat_tables([read_file_arrow(snapshot, a) for a in snapshot.files])
    assert read_files_arrow(snapshot, snapshot.files).equals(one_by_one.cast(table.schema))


def test_projection_reads_only_the_asked_columns_in_schema_order(tmp_path: Path) -> None:
    root = tmp_path / "t"
    model = _stream_table(root, partitioned=True)
    table = DeltaTable.forPath(None, str(root)).toArrow(columns=["extra", "ID"])
    assert table.column_names == ["id", "extra"]
    assert sort_rows([tuple(r.values()) for r in table.to_pylist()]) == sort_rows(
        [(k, v[2]) for k, v in model.items()]
    )


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_large_file_reads_by_physical_name(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "t"
    data = _batch(0, LARGE, "a").rename_columns(["id", "Part Col", "a name"])
    write_deltalake(str(root), data, configuration={"delta.columnMapping.mode": mode})  # another writer's mapping
    field = load_snapshot(str(root)).schema.get("a name")
    assert field.physical_name != "a name"  # the files hold physical names
    expected = sort_rows([tuple(r.values()) for r in data.to_pylist()])
    table = DeltaTable.forPath(None, str(root)).toArrow()
    assert table.column_names == ["id", "Part Col", "a name"]
    assert sort_rows([tuple(r.values()) for r in table.to_pylist()]) == expected


def _largest(root: Path) -> str:
    snapshot = load_snapshot(str(root))
    return os.path.join(str(root), max(snapshot.files, key=lambda a: a.size).path)


def test_missing_large_file_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _stream_table(root, partitioned=False)
    victim = _largest(root)
    os.remove(victim)
    with pytest.raises(LogCorruptedError, match=os.path.basename(victim)):
        DeltaTable.forPath(None, str(root)).toArrow()


def test_large_file_with_other_row_count_or_garbage_is_a_typed_error(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _stream_table(root, partitioned=False)
    victim = _largest(root)
    pa.parquet.write_table(_batch(0, 10, "a"), victim)  # another file under the same name
    with pytest.raises(DeletionVectorError, match="numRecords"):
        DeltaTable.forPath(None, str(root)).toArrow()
    with open(victim, "wb") as fh:
        fh.write(b"not parquet at all" * 100)
    with pytest.raises(DataFileError, match=os.path.basename(victim)):
        DeltaTable.forPath(None, str(root)).toArrow()
