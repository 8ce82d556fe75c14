"""UPDATE with deletion vectors: retire the matched rows in place, write only their new versions.

In DV mode the matched rows of each touched file get a DV and their updated copies go to new
files, so nothing unchanged is copied (``numCopiedRows`` = 0). Files the rewrite threshold
sends to copy-on-write are rewritten whole with ``CASE WHEN condition THEN new ELSE old``.
Every assigned value of every matched row is evaluated and checked (fits its column, no NULL
into NOT NULL) before any file is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dvengine.commands.change_data import change_file_metrics, register_change_files, writes_change_data
from dvengine.commands.context import DmlContext
from dvengine.commands.executor import Executor
from dvengine.errors import InvalidArgumentError, UnresolvedColumnError
from dvengine.expressions import BoundExpression, parse_value_expression
from dvengine.protocol.schema import StructType
from dvengine.writing.nested_assignments import FoldedAssignments, fold_mapping


def fold_update_assignments(schema: StructType, assignments: Mapping[str, str]) -> FoldedAssignments:
    """``set`` (column or nested field -> SQL text) as one assignment per top-level column: nested
    fields fold into their rebuilt struct (``writing.nested_assignments``); an unknown name is an
    UnresolvedColumnError, as Spark's analyzer reports it."""
    if not isinstance(assignments, Mapping):
        raise TypeError(f"set must be a dict of column name -> SQL expression or Column, got {type(assignments).__name__}")
    if not assignments:
        raise InvalidArgumentError("update needs at least one assignment in set={column: expression}")
    for name in assignments:
        if not isinstance(name, str):
            raise TypeError(f"set keys must be column names (str), got {type(name).__name__}: {name!r}")
    return fold_mapping(schema, assignments, _unknown_column(schema))


def _unknown_column(schema: StructType) -> Callable[[str], Exception]:
    def error(message: str) -> Exception:
        return UnresolvedColumnError(f"{message}; the table's columns are {schema.field_names}")

    return error


def bind_assignments(schema: StructType, assignments: Mapping[str, str]) -> dict[str, BoundExpression]:
    """Validate ``set`` (column -> SQL text) and bind each value; keys resolve case-insensitively,
    nested fields (``s.x``) fold into their top-level struct first."""
    folded = fold_update_assignments(schema, assignments)
    return {schema.get(name).name: parse_value_expression(text, schema) for name, text in folded.columns.items()}


def update_metrics(ctx: DmlContext, executor_name: str) -> dict[str, Any]:
    return {
        "numUpdatedRows": 0,
        "numCopiedRows": 0,
        "numAddedFiles": 0,
        "numRemovedFiles": 0,
        "numDeletionVectorsAdded": 0,
        "numDeletionVectorsRemoved": 0,
        "numDeletionVectorsUpdated": 0,
        "numAddedBytes": 0,
        "numRemovedBytes": 0,
        "numAddedChangeFiles": 0,
        "changeFileBytes": 0,
        "scanTimeMs": 0,
        "rewriteTimeMs": 0,
        **ctx.plan.metrics(),
        "numFilesVerified": len(ctx.plan.candidates),
        "executionEngine": executor_name,
    }


def run_update(ctx: DmlContext, executor: Executor, assignments: Mapping[str, BoundExpression]) -> dict[str, Any]:
    """Execute a planned UPDATE; returns Delta's UPDATE metrics plus ``version`` (None: nothing matched)."""
    txn, metrics = ctx.transaction, update_metrics(ctx, executor.name)
    with ctx.cleaning_up_on_failure():
        executor.check_assignments(ctx, assignments)
        if ctx.plan.candidates:
            executor.check_new_values(ctx, ctx.predicate, assignments)
            retired = executor.retire_rows(ctx, ctx.plan.candidates, ctx.predicate)
            if retired.rows_retired:
                written = executor.write_updated_rows(ctx, ctx.predicate, assignments, retired.files_to_rewrite)
                txn.add_actions(written.files)
                txn.add_actions(retired.actions)
                metrics.update(
                    retired.delta_metrics(),
                    numUpdatedRows=retired.rows_retired,
                    numAddedFiles=len(written.files),
                    numAddedBytes=written.bytes,
                    numCopiedRows=written.rows - retired.rows_retired,
                    rewriteTimeMs=written.elapsed_ms,
                )
                if writes_change_data(ctx.snapshot):
                    changes = register_change_files(ctx, executor.write_change_data(ctx, ctx.predicate, assignments))
                    metrics.update(change_file_metrics(changes, "UPDATE"))
        return ctx.finish(metrics)
