"""Where a condition failed on the local executor: the part of the expression and its columns.

Arrow reports an overflow or a division by zero for the whole expression. Spark names the failing
part (its query context); to say as much locally, the failing expression's arithmetic and cast
parts are evaluated alone, innermost first, on the same rows, and the first that fails is named
with the columns it reads. This runs only after a failure, so the common path pays nothing.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from dvengine.errors import EvaluationError, InvalidPredicateError
from dvengine.expressions import BoundPredicate, to_pyarrow_expression
from dvengine.expressions.arrow_plans import filter_table
from dvengine.expressions.refs import bound_refs

# Parts of an expression that can fail on a value (Spark ANSI: overflow, division by zero, bad cast;
# upper/lower on letters Arrow cannot case-map as Java does; pmod and the like parse as Anonymous).
_FALLIBLE = (
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Cast, exp.TryCast, exp.Abs, exp.Floor,
    exp.Ceil, exp.Round, exp.TsOrDsAdd, exp.DateDiff, exp.Upper, exp.Lower, exp.Anonymous,
)


def _fails_alone(table: pa.Table, node: exp.Expr) -> bool:
    probe = exp.Is(this=node.copy(), expression=exp.Null())
    refs = bound_refs(probe)
    bound = BoundPredicate(
        str(probe.sql(dialect="spark")), frozenset(r.top for r in refs), frozenset((r.qualifier, r.top) for r in refs),
        tree=probe,
    )
    try:
        filter_table(table, to_pyarrow_expression(bound))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError):
        return True
    except InvalidPredicateError:
        return False  # the part alone is not translatable: it cannot be told apart, say nothing
    return False


def failing_part(table: pa.Table, predicate: BoundPredicate) -> str:
    """`` at part `p` (column(s) 'c')`` for the innermost fallible part of ``predicate`` that fails
    alone on ``table``; the columns the predicate reads when no single part does."""
    nodes = [n for n in predicate.tree.walk(bfs=False) if isinstance(n, _FALLIBLE)]
    for node in reversed(nodes):  # reversed pre-order: every part before the parts that contain it
        if _fails_alone(table, node):
            columns = sorted({r.top for r in bound_refs(node)})
            named = f" (column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)})" if columns else ""
            return f" at part {node.sql(dialect='spark')!r}{named}"
    columns = sorted(predicate.columns)
    return f" (reading column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)})" if columns else ""


def evaluation_error(table: pa.Table, predicate: BoundPredicate, exc: Exception) -> EvaluationError:
    """The EvaluationError for ``predicate`` failing on ``table``: the expression and the failing part."""
    return EvaluationError(
        f"the condition {predicate.sql!r} failed while evaluating rows{failing_part(table, predicate)}: {exc}"
    )
