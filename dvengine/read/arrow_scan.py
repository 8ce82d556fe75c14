"""``DeltaTable.toArrow(condition=..., columns=...)``: the no-JVM counterpart of ``scan()``.

The log chooses the files and columns first (``scan_plan.plan_scan``, shared with Spark's
``scan()``), so a selective read opens only the files that can hold matches and reads only the
columns the output and the condition need; the condition is then evaluated on the live rows with
``pyarrow.compute`` (the translation the local executor uses for DML, with SQL's three-valued
logic: a row whose condition is NULL is not returned). A condition Arrow cannot evaluate
faithfully is an InvalidPredicateError, never a different answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from dvengine.expressions import BoundPredicate, to_pyarrow_expression
from dvengine.expressions.arrow_plans import filter_table
from dvengine.log import Snapshot
from dvengine.read.many_files import read_files_arrow
from dvengine.read.scan_plan import plan_scan


def scan_snapshot_arrow(
    snapshot: Snapshot, predicate: BoundPredicate | None = None, columns: Sequence[str] | None = None
) -> pa.Table:
    """Live rows of ``snapshot`` matching ``predicate`` (all when None), limited to ``columns``
    (logical names; all when None), in schema column order."""
    plan = plan_scan(snapshot, predicate, columns)
    condition = None if predicate is None else to_pyarrow_expression(predicate)  # fails before any read
    table = read_files_arrow(snapshot, plan.files, None if plan.needed is None else sorted(plan.needed))
    if condition is not None:
        table = filter_table(table, condition)
    return table if plan.output is None else table.select(list(plan.output))
