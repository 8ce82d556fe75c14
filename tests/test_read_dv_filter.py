"""Dropping a DV's rows (dvengine/read/dv_filter.py) and the footer cache (footer_cache.py).

Truth for the filter: numpy / Python list filtering of the same values; for the spans, which
blocks stay zero-copy slices of the decoded column. Truth for the footer cache: what pyarrow
reads from the file on disk after it was replaced behind the cache.
"""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.errors import LogCorruptedError
from dvengine.log import load_snapshot
from dvengine.read.dv_filter import BLOCK_ROWS, TAKE_DELETED_SHARE, KeepSpans
from dvengine.read.footer_cache import clear_footer_cache, local_footer

ROWS = 3 * BLOCK_ROWS + 1_234


def _columns(rows: int) -> dict[str, pa.ChunkedArray]:
    rng = np.random.default_rng(7)
    ints = rng.integers(0, 1_000, rows)
    nulls = rng.random(rows) < 0.1
    one = {
        "int": pa.array(ints, mask=nulls),
        "float": pa.array(rng.random(rows)),
        "text": pa.array([f"s{i % 13}" if i % 11 else None for i in range(rows)]),
        "flag": pa.array(ints % 2 == 0),
        "dec": pa.array([decimal.Decimal(i % 1000) / 100 for i in range(rows)], pa.decimal128(9, 2)),
        "ts": pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(seconds=i) for i in range(rows)]),
    }
    # two chunks, split off a block boundary, as a file with two row groups decodes
    cut = BLOCK_ROWS + 17
    return {k: pa.chunked_array([v.slice(0, cut), v.slice(cut)]) for k, v in one.items()}


def _keep(kind: str) -> np.ndarray:
    keep = np.ones(ROWS, dtype=bool)
    rng = np.random.default_rng(3)
    if kind == "spread":  # every block, 5 %: fixed-width columns take, others filter
        keep[rng.random(ROWS) < 0.05] = False
    elif kind == "corner":  # only the last block holds deletes: the rest stays a zero-copy slice
        keep[ROWS - 900:ROWS - 100] = False
    elif kind == "sparse":  # under TAKE_DELETED_SHARE in the dirty blocks: filter everywhere
        keep[[5, BLOCK_ROWS * 2 + 9]] = False
    elif kind == "boundaries":
        keep[[0, BLOCK_ROWS - 1, BLOCK_ROWS, ROWS - 1]] = False
    elif kind == "all":
        keep[:] = False
    return keep


@pytest.mark.parametrize("kind", ["spread", "corner", "sparse", "boundaries", "all", "none"])
def test_keep_spans_equal_a_plain_filter(kind: str) -> None:
    keep = _keep(kind)
    spans = KeepSpans.of(keep)
    assert spans.live_rows == int(keep.sum())
    for name, column in _columns(ROWS).items():
        got = spans.apply(column)
        assert got.type == column.type
        expected = [v for v, k in zip(column.to_pylist(), keep, strict=True) if k]
        assert got.to_pylist() == expected, (kind, name)


def test_clean_blocks_are_not_copied_and_take_is_chosen_by_share() -> None:
    column = pa.chunked_array([pa.array(np.arange(ROWS, dtype=np.int64))])
    corner = KeepSpans.of(_keep("corner"))
    assert [s.mask is None for s in corner.spans] == [True, False]
    got = corner.apply(column)
    # the first chunk is the original buffer, sliced, not a copy
    assert got.chunk(0).buffers()[1].address == column.chunk(0).buffers()[1].address
    assert corner.spans[1].indexes is not None  # 800 of 66,770 rows deleted: over the take share
    sparse = KeepSpans.of(_keep("sparse"))
    assert all(s.indexes is None for s in sparse.spans)  # 1 of 65,536: filter
    assert 1 / BLOCK_ROWS < TAKE_DELETED_SHARE < 800 / (ROWS - 3 * BLOCK_ROWS + BLOCK_ROWS)


def test_table_read_with_clustered_and_spread_deletes_equals_the_model(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    ids = np.arange(ROWS, dtype=np.int64)
    dvengine.write(pa.table({"id": ids, "s": pa.array([f"v{i}" for i in ids])}), root)
    DeltaTable.forPath(None, root).delete(f"id >= {ROWS - 700} AND id % 3 = 0", mode="dv")
    DeltaTable.forPath(None, root).delete("id % 41 = 5", mode="dv")
    assert load_snapshot(root).files[0].deletion_vector is not None
    got = DeltaTable.forPath(None, root).toArrow().sort_by("id")
    live = [i for i in range(ROWS) if not (i >= ROWS - 700 and i % 3 == 0) and i % 41 != 5]
    assert got.column("id").to_pylist() == live
    assert got.column("s").to_pylist() == [f"v{i}" for i in live]


def test_footer_cache_notices_a_replaced_or_missing_file(tmp_path: Path) -> None:
    clear_footer_cache()
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"a": [1, 2, 3]}), path)
    assert local_footer(path).num_rows == 3
    assert local_footer(path) is local_footer(path)  # cached
    pq.write_table(pa.table({"a": list(range(10))}), path)  # replaced behind the cache
    assert local_footer(path).num_rows == 10
    # through the reader: a data file deleted behind the log is a typed error even once cached
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64())}), root)
    assert DeltaTable.forPath(None, root).toArrow().num_rows == 2
    (tmp_path / "t" / load_snapshot(root).files[0].path).unlink()
    with pytest.raises(LogCorruptedError, match="is missing"):
        DeltaTable.forPath(None, root).toArrow()
