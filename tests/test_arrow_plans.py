"""Acero plans on the calling thread for small inputs give what pyarrow's threaded paths give.

Truth: ``Table.filter(expression)`` (pyarrow's own, always threaded) and the compute kernels
called directly, on both sides of ``THREADED_MIN_ROWS`` and on multi-chunk tables, with row
order compared (a filter or project must not reorder rows, threaded or not).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dvengine.expressions.arrow_plans import THREADED_MIN_ROWS, filter_table, project_table, use_threads


def _table(rows: int, chunks: int) -> pa.Table:
    rng = np.random.default_rng(rows + chunks)
    ids = rng.permutation(rows).astype(np.int64)
    values = rng.integers(-1000, 1000, rows)
    nulls = rng.random(rows) < 0.1
    strings = pa.array([f"k{i % 97}" for i in range(rows)], pa.string())
    whole = pa.table({"id": ids, "v": pa.array(values, pa.int64(), mask=nulls), "s": strings})
    if chunks == 1 or rows == 0:
        return whole
    step = max(1, rows // chunks)
    return pa.concat_tables([whole.slice(i, step) for i in range(0, rows, step)])


def test_threads_only_from_the_threshold_on() -> None:
    assert not use_threads(0)
    assert not use_threads(THREADED_MIN_ROWS - 1)
    assert use_threads(THREADED_MIN_ROWS)


@pytest.mark.parametrize("rows", [0, 1, 7, THREADED_MIN_ROWS - 1, THREADED_MIN_ROWS, THREADED_MIN_ROWS + 4097])
@pytest.mark.parametrize("chunks", [1, 5])
def test_filter_keeps_the_rows_and_order_pyarrow_keeps(rows: int, chunks: int) -> None:
    table = _table(rows, chunks)
    condition = (pc.field("v") > 10) & pc.field("s").isin(["k1", "k5", "k50"])
    got = filter_table(table, condition)
    mask = pc.and_kleene(pc.greater(table["v"], 10), pc.is_in(table["s"], value_set=pa.array(["k1", "k5", "k50"])))
    assert got.equals(table.filter(mask).combine_chunks())  # the kernels, in input order
    assert got.equals(table.filter(condition).combine_chunks())  # pyarrow's threaded path


@pytest.mark.parametrize("rows", [1, 3, THREADED_MIN_ROWS - 1, THREADED_MIN_ROWS])
@pytest.mark.parametrize("chunks", [1, 4])
def test_project_computes_what_the_kernels_compute(rows: int, chunks: int) -> None:
    table = _table(rows, chunks)
    got = project_table(table, [pc.field("id"), pc.negate(pc.field("v")), pc.utf8_upper(pc.field("s"))], ["id", "v", "s"])
    assert got.column_names == ["id", "v", "s"]
    assert got["id"].combine_chunks().equals(table["id"].combine_chunks())
    assert got["v"].combine_chunks().equals(pc.negate(table["v"]).combine_chunks())
    assert got["s"].combine_chunks().equals(pc.utf8_upper(table["s"]).combine_chunks())


def test_a_failing_expression_raises_as_before() -> None:
    table = pa.table({"v": pa.array([1, 0], pa.int64())})
    with pytest.raises(pa.ArrowInvalid, match="divide by zero"):
        project_table(table, [pc.divide_checked(pc.field("v"), pc.field("v"))], ["q"])
