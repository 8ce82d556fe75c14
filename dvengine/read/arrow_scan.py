"""``DeltaTable.toArrow(condition=..., columns=...)``: the no-JVM counterpart of ``scan()``.

The log chooses the files first (partition pruning, then stats skipping, the same planner DML
uses), so a selective read opens only the files that can hold matches; only the columns the
output and the condition need are read; the condition is then evaluated on the live rows with
``pyarrow.compute`` (the translation the local executor uses for DML, with SQL's three-valued
logic: a row whose condition is NULL is not returned). A condition Arrow cannot evaluate
faithfully is an InvalidPredicateError, never a different answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from dvengine.errors import InvalidArgumentError
from dvengine.expressions import BoundPredicate, to_pyarrow_expression
from dvengine.log import Snapshot
from dvengine.planning.candidates import plan_candidates
from dvengine.read.arrow_reader import read_files_arrow


def output_columns(snapshot: Snapshot, columns: Sequence[str] | None) -> list[str] | None:
    """The logical names ``columns`` asks for, in schema order (None: all); unknown names are an
    InvalidArgumentError naming them."""
    if columns is None:
        return None
    unknown = [c for c in columns if snapshot.schema.find(c) is None]
    if unknown:
        raise InvalidArgumentError(f"unknown column(s) {unknown}; the table has {snapshot.schema.field_names}")
    wanted = {snapshot.schema.get(c).name for c in columns}
    return [f.name for f in snapshot.schema.fields if f.name in wanted]


def scan_snapshot_arrow(
    snapshot: Snapshot, predicate: BoundPredicate | None = None, columns: Sequence[str] | None = None
) -> pa.Table:
    """Live rows of ``snapshot`` matching ``predicate`` (all when None), limited to ``columns``
    (logical names; all when None), in schema column order."""
    wanted = output_columns(snapshot, columns)
    if predicate is None:
        return read_files_arrow(snapshot, snapshot.files, wanted)
    condition = to_pyarrow_expression(predicate)  # an untranslatable condition fails before any read
    files = plan_candidates(snapshot, predicate).candidates
    needed = None if wanted is None else sorted(set(wanted) | set(predicate.columns))
    table = read_files_arrow(snapshot, files, needed).filter(condition)
    return table if wanted is None else table.select(wanted)
