"""CHECK constraints (the ``checkConstraints`` writer feature): what the table declares, and the rules
every engine applies when it writes rows.

PROTOCOL.md: a constraint is the table property ``delta.constraints.<name>`` whose value is a SQL
boolean expression over the table's columns; a writer must check every row it writes, and a row
for which the expression is FALSE **or NULL** violates it (Delta's ``CheckDeltaInvariant``). The
name is stored lower case (names are case-insensitive). Column invariants (``delta.invariants`` in
a field's metadata, the older legacy form, ``writing.invariants``) are row rules of the same kind:
Delta checks them as ``Constraints.Check`` too, so they join the table's constraints here
(:func:`row_rule_texts`) and every check below applies to them unchanged.

The engines evaluate the bound expressions: ``engine/local/constraints.py`` on Arrow,
``engine/spark/constraints.py`` inside the Spark job that writes the rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvengine.errors import ConstraintError, InvalidArgumentError, InvalidPredicateError, UnsupportedFeatureError
from dvengine.expressions import BoundPredicate, parse_predicate, to_pyarrow_expression
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.feature_catalog import with_feature
from dvengine.protocol.schema import StructType
from dvengine.writing.generated import generation_constraint_texts
from dvengine.writing.invariants import invariant_texts

CONSTRAINT_PREFIX = "delta.constraints."
CHECK_CONSTRAINTS = "checkConstraints"


@dataclass(frozen=True)
class CheckConstraint:
    """One row rule of a table bound to its schema: a ``delta.constraints.<name>``, a column
    invariant or the constraint a generated column implies (all checked the same way)."""

    name: str
    sql: str  # as stored in the table property
    predicate: BoundPredicate

    def violation(self, values: Mapping[str, Any]) -> str:
        """Delta's DELTA_VIOLATE_CONSTRAINT_WITH_VALUES message for a row whose columns hold ``values``."""
        shown = ", ".join(f"{k} = {v!r}" for k, v in values.items())
        return f"CHECK constraint {self.name} ({self.sql}) violated by row with values: {shown}; nothing was committed"


def constraint_key(name: str) -> str:
    return CONSTRAINT_PREFIX + name.lower()


def bind_constraint(name: str, sql: str, schema: StructType) -> CheckConstraint:
    """``sql`` bound as a boolean, deterministic condition on ``schema``; a typed error naming the constraint."""
    try:
        return CheckConstraint(name, sql, parse_predicate(sql, schema))
    except InvalidPredicateError as exc:
        raise type(exc)(f"CHECK constraint {name} ({sql}): {exc}") from exc


def _declared_texts(configuration: Mapping[str, str]) -> list[tuple[str, str]]:
    return sorted((k[len(CONSTRAINT_PREFIX):], v) for k, v in configuration.items() if k.startswith(CONSTRAINT_PREFIX))


def constraint_texts(configuration: Mapping[str, str], schema: StructType) -> tuple[tuple[str, str], ...]:
    """(name, expression) of each ``delta.constraints.<name>`` property, sorted by name, then the
    constraint each generated column implies (``writing.generated``): the constraints a column
    change must not break (Delta's ALTER COLUMN looks at these, not at invariants)."""
    return (*_declared_texts(configuration), *generation_constraint_texts(schema))


def row_rule_texts(configuration: Mapping[str, str], schema: StructType) -> tuple[tuple[str, str], ...]:
    """(name, expression) of every rule each new row must satisfy, in Delta's order
    (``TransactionalWrite``: ``Constraints.getAll``, i.e. CHECK constraints then column invariants,
    then generated columns); an unrecognized invariant raises UnsupportedFeatureError."""
    return (*_declared_texts(configuration), *invariant_texts(schema), *generation_constraint_texts(schema))


def table_constraints(configuration: Mapping[str, str], schema: StructType) -> tuple[CheckConstraint, ...]:
    """Every row rule of the table, bound to ``schema``: CHECK constraints, column invariants and
    generated columns."""
    return tuple(bind_constraint(name, sql, schema) for name, sql in row_rule_texts(configuration, schema))


def local_constraint_reason(constraints: Sequence[CheckConstraint]) -> str | None:
    """Why the Arrow evaluator cannot check ``constraints`` exactly as Spark SQL would (None: it can)."""
    for c in constraints:
        try:
            to_pyarrow_expression(c.predicate)
        except InvalidPredicateError as exc:
            return f"CHECK constraint {c.name} ({c.sql}): {exc}"
    return None


def check_dml_constraints(configuration: Mapping[str, str], schema: StructType, writes_new_rows: bool) -> None:
    """Before a DELETE/UPDATE/MERGE: constraints and invariants bound. UPDATE and MERGE
    (``writes_new_rows``) also need them evaluable by the Arrow evaluator, which checks the new rows
    in every executor (in-process, Spark file tasks and the Spark row plan's writer tasks): a
    constraint it cannot evaluate refuses the command up front. DELETE writes only rows that were
    already in the table (a rewrite's survivors), which satisfy the constraints already."""
    constraints = table_constraints(configuration, schema)
    reason = local_constraint_reason(constraints) if writes_new_rows else None
    if reason is not None:
        raise UnsupportedFeatureError(
            f"row-level changes to this table need its constraints checked on every new row, and {reason}; "
            "nothing was changed"
        )


def protocol_with_check_constraints(protocol: Protocol) -> Protocol:
    """``protocol`` supporting CHECK constraints: writer 3 on a legacy protocol, the feature on writer 7."""
    if protocol.min_writer_version >= 7:
        return with_feature(protocol, CHECK_CONSTRAINTS)
    if protocol.min_writer_version < 3:
        return Protocol(protocol.min_reader_version, 3)
    return protocol


def with_constraint(metadata: Metadata, schema: StructType, name: str, sql: str) -> tuple[Metadata, CheckConstraint]:
    """``metadata`` with constraint ``name`` added (ConstraintError if the name exists), and the bound constraint."""
    if not isinstance(name, str) or not name.strip() or "." in name or "`" in name:
        raise InvalidArgumentError(f"a constraint name must be a non-empty name without dots or backquotes, got {name!r}")
    key = constraint_key(name)
    if key in metadata.configuration:
        raise ConstraintError(
            f"constraint '{name.lower()}' already exists on the table: {metadata.configuration[key]} "
            "(DELTA_CONSTRAINT_ALREADY_EXISTS); drop it first"
        )
    constraint = bind_constraint(name.lower(), sql, schema)
    configuration = {**metadata.configuration, key: sql}
    return dataclasses.replace(metadata, configuration=configuration), constraint


def without_constraint(metadata: Metadata, name: str, if_exists: bool) -> tuple[Metadata, str] | None:
    """``metadata`` without constraint ``name`` and the dropped expression; None when absent and ``if_exists``."""
    key = constraint_key(name)
    if key not in metadata.configuration:
        if if_exists:
            return None
        raise ConstraintError(
            f"cannot drop nonexistent constraint '{name.lower()}' (DELTA_CONSTRAINT_DOES_NOT_EXIST); "
            "use DROP CONSTRAINT IF EXISTS to ignore a missing one"
        )
    configuration = {k: v for k, v in metadata.configuration.items() if k != key}
    return dataclasses.replace(metadata, configuration=configuration), metadata.configuration[key]
