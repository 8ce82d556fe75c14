"""Row-level concurrency for DML: whether it applies, and the exact read predicate it needs.

Two commands that change different rows of one file both commit when row-level resolution is
on (the transaction rebases the later DV onto the earlier one, ``dvengine.commit.rebase``).
For that to stay WriteSerializable, the later command must also be sure that no row a winner
*added* satisfies its condition. Delta decides that from file stats (min/max), which a single
new file spanning the hot key range always "might" match; here the condition is evaluated on
the winner's added rows themselves, after stats skipping, and only a real match conflicts.

Opt out per table with ``delta.enableRowLevelConcurrency=false`` or per session with
``spark.databricks.delta.rowLevelConcurrency.enabled=false``: conflicts are then judged per
file, as open-source Delta does.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from dvengine.errors import InvalidPredicateError
from dvengine.expressions import BoundPredicate, to_pyarrow_expression
from dvengine.log import Snapshot
from dvengine.planning.candidates import might_match_function
from dvengine.protocol.actions import AddFile
from dvengine.read.arrow_reader import deleted_row_mask, read_physical_rows

TABLE_PROPERTY = "delta.enableRowLevelConcurrency"


def row_level_enabled(snapshot: Snapshot, session_enabled: bool, dv_supported: bool) -> bool:
    """On unless the session or the table turns it off; only tables that can take DVs have it."""
    table = snapshot.configuration.get(TABLE_PROPERTY, "true").strip().lower() != "false"
    return dv_supported and session_enabled and table


def exact_might_match(snapshot: Snapshot, predicate: BoundPredicate | None) -> Callable[[AddFile], bool]:
    """A read predicate for conflict checks: stats first, then the condition on the file's live
    rows when the local evaluator computes it exactly as Spark SQL does (else stats decide)."""
    by_stats = might_match_function(snapshot, predicate)
    if predicate is None:
        return by_stats
    try:
        expression = to_pyarrow_expression(predicate)
    except InvalidPredicateError:
        return by_stats
    columns = sorted(predicate.columns)

    def might_match(add: AddFile) -> bool:
        if not by_stats(add):
            return False
        table = read_physical_rows(snapshot, add, columns)
        keep = deleted_row_mask(snapshot.table_root, add, table.num_rows)
        if keep is not None:
            table = table.filter(pa.array(keep))
        try:
            hits: int = table.filter(expression).num_rows
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError):
            return True  # an evaluation error (e.g. overflow) is no proof that nothing matches
        return hits > 0

    return might_match
