"""The full reader's per-process DV spans cache (dvengine/read/dv_spans_cache.py) and its dictionary
path for string/binary columns of large files (many_files._read_column).

Truth: the one-file-at-a-time reader's rows and types (``read_file_arrow`` over pyarrow's plain
decode), a model of the rows, and delta-rs. The cache must never serve a DV the log no longer
names, nor hide a DV file damaged or deleted behind the log."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.dv import absolute_dv_path
from dvengine.errors import DeletionVectorError
from dvengine.log import load_snapshot
from dvengine.read import dv_spans_cache, read_file_arrow, read_files_arrow
from dvengine.read.arrow_reader import THREADED_READ_ROWS
from dvengine.read.many_files import _dictionary_dense

ROWS = THREADED_READ_ROWS + 5_000


@pytest.fixture(autouse=True)
def _empty() -> Any:
    dv_spans_cache.clear_dv_spans_cache()
    yield
    dv_spans_cache.clear_dv_spans_cache()


def _large(start: int) -> pa.Table:
    ids = np.arange(start, start + ROWS, dtype=np.int64)
    few = [None if i % 11 == 0 else f"t{i % 13}" for i in range(ROWS)]  # dictionary-dense, with NULLs
    return pa.table({
        "id": ids,
        "few": pa.array(few, pa.string()),
        "raw": pa.array([None if i % 5 == 0 else bytes([i % 3]) for i in range(ROWS)], pa.binary()),
        "unique": pa.array([f"u{i:09d}" for i in ids]),  # every value distinct: falls back to plain
    })


def _per_file(root: str) -> pa.Table:
    snap = load_snapshot(root)
    return pa.concat_tables([read_file_arrow(snap, add) for add in snap.files])


def test_dictionary_path_reads_the_same_values_and_types(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_large(0), root)
    dvengine.write(_large(ROWS), root, mode="append")
    snap = load_snapshot(root)
    parquet = pq.ParquetFile(os.path.join(root, snap.files[0].path))
    assert _dictionary_dense(parquet, "few") and _dictionary_dense(parquet, "raw")
    assert not _dictionary_dense(parquet, "unique") and not _dictionary_dense(parquet, "id")
    DeltaTable.forPath(None, root).delete("id % 9 = 4 OR id BETWEEN 70000 AND 70100")  # DVs on both files
    snap = load_snapshot(root)
    got = read_files_arrow(snap, snap.files)
    expected = _per_file(root)
    assert got.schema == expected.schema
    assert got.equals(expected)
    model = sort_rows(
        [(r["id"], r["few"]) for r in pa.concat_tables([_large(0), _large(ROWS)]).select(["id", "few"]).to_pylist()
         if not (r["id"] % 9 == 4 or 70000 <= r["id"] <= 70100)]
    )
    assert sort_rows([(r["id"], r["few"]) for r in got.select(["id", "few"]).to_pylist()]) == model
    assert rows_delta_rs(root, ["id", "few"]) == model


def test_spans_are_computed_once_per_dv_and_follow_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.read.dv_filter import KeepSpans

    root = str(tmp_path / "t")
    dvengine.write(_large(0), root)
    t = DeltaTable.forPath(None, root)
    t.delete("id < 10")
    built: list[int] = []
    real = KeepSpans.of
    monkeypatch.setattr(dv_spans_cache.KeepSpans, "of", staticmethod(lambda keep: built.append(1) or real(keep)))
    for _ in range(3):
        assert t.toArrow().num_rows == ROWS - 10
    assert len(built) == 1
    t.delete("id BETWEEN 100 AND 104")  # a new DV: new descriptor, new spans
    assert t.toArrow().num_rows == ROWS - 15
    assert len(built) == 2
    ids = t.toArrow().column("id").to_numpy()
    assert not np.isin(ids, [0, 9, 100, 104]).any() and np.isin([10, 99, 105], ids).all()


def test_a_dv_file_gone_behind_the_log_fails_the_read_even_when_cached(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_large(0), root)
    t = DeltaTable.forPath(None, root)
    t.delete("id % 50 = 0")  # 1,411 scattered rows: a DV file, not inline
    snap = load_snapshot(root)
    (add,) = snap.files
    assert add.deletion_vector is not None and not add.deletion_vector.is_inline
    first = t.toArrow().num_rows  # the spans are cached now
    os.remove(absolute_dv_path(root, add.deletion_vector))
    with pytest.raises(DeletionVectorError, match="does not exist"):
        t.toArrow()
    assert first == len([i for i in range(ROWS) if i % 50])
