"""What a read with a condition and a projection touches, decided from the log before any I/O.

``DeltaTable.scan()`` (Spark) and ``DeltaTable.toArrow(condition=..., columns=...)`` (pyarrow)
plan the same way: partition pruning and stats skipping choose the files (the planner DML uses),
and the columns read are the requested ones plus those the condition references. One plan, two
engines that execute it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dvengine.errors import InvalidArgumentError
from dvengine.expressions import BoundPredicate
from dvengine.log import Snapshot
from dvengine.planning.candidates import plan_candidates
from dvengine.protocol.actions import AddFile


@dataclass(frozen=True, slots=True)
class ScanPlan:
    """``files`` to open; ``output``: the logical columns returned, in schema order (None: all);
    ``needed``: ``output`` plus the condition's columns (None: all)."""

    files: tuple[AddFile, ...]
    output: tuple[str, ...] | None
    needed: frozenset[str] | None


def output_columns(snapshot: Snapshot, columns: Sequence[str] | None) -> tuple[str, ...] | None:
    """The logical names ``columns`` asks for, in schema order (None: all); unknown names are an
    InvalidArgumentError naming them."""
    if columns is None:
        return None
    unknown = [c for c in columns if snapshot.schema.find(c) is None]
    if unknown:
        raise InvalidArgumentError(f"unknown column(s) {unknown}; the table has {snapshot.schema.field_names}")
    wanted = {snapshot.schema.get(c).name for c in columns}
    return tuple(f.name for f in snapshot.schema.fields if f.name in wanted)


def plan_scan(snapshot: Snapshot, predicate: BoundPredicate | None, columns: Sequence[str] | None) -> ScanPlan:
    """The files and columns a read of ``snapshot`` matching ``predicate`` needs."""
    output = output_columns(snapshot, columns)
    files = tuple(snapshot.files) if predicate is None else plan_candidates(snapshot, predicate).candidates
    needed = None if output is None else frozenset(output) | (frozenset() if predicate is None else predicate.columns)
    return ScanPlan(files, output, needed)
