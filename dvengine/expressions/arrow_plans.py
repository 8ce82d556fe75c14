"""Evaluate Arrow expressions over tables with Acero, on the calling thread when the input is small.

Acero runs a plan on pyarrow's CPU thread pool when asked to (``use_threads=True``, which is also
what ``Table.filter(expression)`` always does). That pays a scheduler set-up and a hand-off to a
pool thread and back whatever the size, and buys nothing until the input is large. Measured on
the 2-core machine of spec_notes/executors.md (pyarrow 26, 2026-12-03): a project over 1 row took
195 us wall / 172 us process CPU threaded against 29 / 29 us on the calling thread; over 100,000
rows in one chunk 452 / 495 against 201 / 201 us; a hash join of 100 x 100 rows 0.29 against
0.11 ms. Threads pay off on large inputs (a join of 10,000 x 1,000,000 rows: 67 against 103 ms
wall), so plans of at least ``THREADED_MIN_ROWS`` input rows keep them. Point DML, what a
high-frequency job runs, is always below; with several writers on one table every hand-off is
also a wake-up that may preempt another writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyarrow import acero

THREADED_MIN_ROWS = 100_000


def use_threads(input_rows: int) -> bool:
    """Whether an Acero plan over ``input_rows`` rows should run on the thread pool."""
    return input_rows >= THREADED_MIN_ROWS


def _run_over(table: pa.Table, node: acero.Declaration) -> pa.Table:
    """One Acero node over ``table``, threaded only for large tables."""
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    return acero.Declaration.from_sequence([source, node]).to_table(use_threads=use_threads(table.num_rows))


def filter_table(table: pa.Table, condition: Any) -> pa.Table:
    """``table.filter(condition)`` for an Arrow expression."""
    return _run_over(table, acero.Declaration("filter", acero.FilterNodeOptions(condition)))


def project_table(table: pa.Table, expressions: Sequence[Any], names: Sequence[str]) -> pa.Table:
    """The columns ``names`` computed by ``expressions`` over ``table`` (Acero's project node)."""
    return _run_over(table, acero.Declaration("project", acero.ProjectNodeOptions(list(expressions), list(names))))
