"""Turn condition text into one sqlglot expression tree and reject what can never be a row predicate.

This step knows nothing about the table: it enforces the *shape* of the input (one expression,
no statements, subqueries, aggregates, windows, parameters or non-deterministic calls). Binding
to a schema happens in :mod:`dvengine.expressions.bind`.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dvengine.errors import InvalidPredicateError
from dvengine.expressions.dialect import DvSpark
from dvengine.expressions.functions import function_name, is_aggregate, is_non_deterministic

_ANSI_ESCAPES = re.compile(r"\x1b\[[0-9;]*m")

_STATEMENT_TYPES: tuple[type[exp.Expr], ...] = tuple(
    t
    for t in (
        getattr(exp, name, None)
        for name in (
            "Query",
            "Subquery",
            "Insert",
            "Update",
            "Delete",
            "Merge",
            "Create",
            "Drop",
            "Command",
            "Set",
            "Use",
            "Describe",
            "Show",
            "Alter",
            "Transaction",
            "Commit",
            "Rollback",
            "Values",
        )
    )
    if isinstance(t, type)
)


def _fail(text: str, reason: str) -> InvalidPredicateError:
    return InvalidPredicateError(f"invalid expression {text!r}: {reason}")


def too_deep(text: str) -> InvalidPredicateError:
    """The error for an expression whose tree is deeper than Python's recursion limit lets us walk.

    sqlglot parses, and dvengine binds and type-checks, recursively; a few dozen nested
    parentheses or a few hundred chained ORs exhaust the stack. That is a property of the
    input, so it is reported as an invalid predicate (callers chain the RecursionError), not
    as a crash. The text is shortened: it is long by construction.
    """
    shown = text if len(text) <= 80 else f"{text[:60]}...{text[-15:]}"
    return InvalidPredicateError(
        f"invalid expression {shown!r} ({len(text)} characters): condition nested too deeply to parse; "
        "remove redundant parentheses or replace long OR chains with IN (...)"
    )


def parse_sql(text: object) -> exp.Expr:
    """Parse one Spark SQL expression and check its shape; raises InvalidPredicateError."""
    if not isinstance(text, str):
        raise InvalidPredicateError(f"an expression must be SQL text (str), got {type(text).__name__}")
    if not text.strip():
        raise InvalidPredicateError('an expression must not be empty; write e.g. "id < 10"')
    try:
        statements = [s for s in sqlglot.parse(text, read=DvSpark) if s is not None]
    except (ParseError, TokenError) as exc:
        message = _ANSI_ESCAPES.sub("", str(exc)).strip()
        raise _fail(text, f"syntax error: {message}") from None
    except RecursionError as exc:
        raise too_deep(text) from exc
    if not statements:
        raise InvalidPredicateError(f"invalid expression {text!r}: it contains no expression")
    if len(statements) > 1:
        raise _fail(text, f"expected one expression, found {len(statements)} statements separated by ';'")
    tree = statements[0]
    try:
        check_shape(tree, text)
    except RecursionError as exc:
        raise too_deep(text) from exc
    return tree


def check_shape(tree: exp.Expr, text: str) -> None:
    """Reject node types that make no sense (or are unsafe) in a per-row, repeatable condition."""
    for node in tree.walk():
        if isinstance(node, _STATEMENT_TYPES):
            kind = "subqueries" if isinstance(node, (exp.Query, exp.Subquery)) else "statements"
            raise _fail(text, f"{kind} are not allowed in a row condition (found {node.sql('spark')[:60]!r})")
        if isinstance(node, exp.Alias):
            raise _fail(text, f"aliases ('AS') are not allowed in a row condition (found {node.sql('spark')!r})")
        if isinstance(node, exp.Star):
            raise _fail(text, "'*' is not allowed in a row condition; name the columns")
        if isinstance(node, (exp.Placeholder, exp.Parameter)):
            raise _fail(text, f"parameters are not supported; inline the value (found {node.sql('spark')!r})")
        if isinstance(node, exp.Window):
            raise _fail(text, f"window functions are not allowed in a row condition (found {node.sql('spark')!r})")
        if is_aggregate(node):
            raise _fail(
                text,
                f"aggregate function {function_name(node)}() is not allowed in a row condition "
                "(it has no value for a single row)",
            )
        if is_non_deterministic(node):
            raise _fail(
                text,
                f"function {function_name(node)}() is non-deterministic; a DML condition must give the "
                "same answer every time a row is evaluated",
            )
        if isinstance(node, exp.In) and not node.expressions and node.args.get("query") is None:
            raise _fail(text, "IN needs at least one value, e.g. x IN (1, 2)")
