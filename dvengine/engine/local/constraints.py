"""CHECK constraints evaluated on Arrow rows before they are written (local executor, Spark file tasks
and the Spark row plan's writer tasks, which all hand their new rows to Arrow).

A row violates a constraint when the expression is FALSE or NULL (Delta's rule), so the mask of
good rows is the expression with NULL filled as FALSE. The first bad row is reported with the
values of the columns the constraint reads, as Delta's DELTA_VIOLATE_CONSTRAINT_WITH_VALUES does.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.engine.local.failures import failing_part
from dvengine.errors import ConstraintViolationError, EvaluationError, InvalidPredicateError, NotLocallyEvaluableError
from dvengine.expressions import to_pyarrow_expression
from dvengine.expressions.arrow_plans import project_table
from dvengine.writing.constraints import CheckConstraint


def _holds(rows: pa.Table, constraint: CheckConstraint) -> pa.ChunkedArray:
    return pc.fill_null(project_table(rows, [to_pyarrow_expression(constraint.predicate)], ["ok"]).column(0), False)


def check_constraints(rows: pa.Table, constraints: Sequence[CheckConstraint]) -> None:
    """ConstraintViolationError for the first row of ``rows`` (logical columns) that breaks a constraint."""
    if rows.num_rows == 0:
        return
    for c in constraints:
        try:
            ok = _holds(rows, c)
        except InvalidPredicateError as exc:
            raise NotLocallyEvaluableError(f"CHECK constraint {c.name} ({c.sql}) cannot be evaluated in Arrow: {exc}") from exc
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError) as exc:
            where = failing_part(rows, c.predicate)  # the part and its columns, as Spark's query context
            raise EvaluationError(f"CHECK constraint {c.name} ({c.sql}) failed while evaluating rows{where}: {exc}") from exc
        if pc.all(ok).as_py():
            continue
        first = pc.index(ok, False).as_py()
        names = sorted(c.predicate.columns)
        row = rows.select(names).slice(first, 1).to_pylist()[0]
        raise ConstraintViolationError(c.violation(row))
