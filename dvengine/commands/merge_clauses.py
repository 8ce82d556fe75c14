"""MERGE clauses: what the user asked for, and the same bound to the target and source schemas.

Binding happens before any data is read, so a clause naming an unknown column, a NOT MATCHED
clause reading the target, or an UpdateAll on a source missing a target column fails with a
typed error while the table is untouched. Scoping follows Delta: MATCHED clauses see both
aliases; NOT MATCHED (insert) clauses see only the source, since there is no target row;
NOT MATCHED BY SOURCE clauses see only the target, since there is no source row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from dvengine.commit.commit_info import ParameterValue, delta_json, predicate_parameter
from dvengine.errors import InvalidArgumentError, NestedInsertAssignmentError, SchemaMismatchError
from dvengine.expressions import BoundExpression, BoundPredicate, parse_predicate, parse_value_expression
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.refs import ColumnRef
from dvengine.expressions.substitute import substitute_paths
from dvengine.protocol.schema import StructType
from dvengine.writing.defaults import column_defaults
from dvengine.writing.generated import generation_expressions, stored_value_text
from dvengine.writing.identity import check_explicit_values, check_identity_update, identity_columns, is_identity
from dvengine.writing.nested_assignments import FoldedAssignments, column_path_sql, fold_assignments, resolve_target

# A condition or value as the user gave it: SQL text, or an engine object (a pyspark Column)
# that the executor's ``to_sql`` turns into SQL text.
Expr = object


class ClauseKind(Enum):
    MATCHED = "matched"
    NOT_MATCHED = "notMatched"
    NOT_MATCHED_BY_SOURCE = "notMatchedBySource"


class ClauseAction(Enum):
    UPDATE = "update"
    DELETE = "delete"
    INSERT = "insert"


# Clause ids in the joined frame: kind base + position, so one integer says kind and clause.
KIND_BASE = {ClauseKind.MATCHED: 0, ClauseKind.NOT_MATCHED: 1000, ClauseKind.NOT_MATCHED_BY_SOURCE: 2000}


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause as given. ``assignments`` None on update/insert means UpdateAll/InsertAll."""

    kind: ClauseKind
    action: ClauseAction
    condition: Expr | None = None
    assignments: Mapping[str, Expr] | None = None


@dataclass(frozen=True)
class BoundClause:
    """A clause bound to the schemas; ``assignments`` maps every assigned target column (logical
    name) to its value. Unassigned columns keep the target value (update) or get NULL (insert)."""

    clause_id: int
    kind: ClauseKind
    action: ClauseAction
    condition: BoundPredicate | None
    assignments: Mapping[str, BoundExpression]
    star: bool

    @property
    def retires_target_row(self) -> bool:
        return self.action in (ClauseAction.UPDATE, ClauseAction.DELETE)

    @property
    def writes_row(self) -> bool:
        return self.action in (ClauseAction.UPDATE, ClauseAction.INSERT)


def text_only(value: object, is_predicate: bool) -> str:
    """The ``to_sql`` of a MERGE without a SparkSession: only SQL text is accepted."""
    if isinstance(value, str):
        return value
    what = "condition" if is_predicate else "value"
    raise TypeError(f"a MERGE {what} must be a SQL string (or a pyspark Column with a SparkSession), got {type(value).__name__}")


@dataclass(frozen=True)
class MergeScope:
    """The two tables a MERGE sees under their aliases, and how to turn Columns into SQL."""

    target_alias: str
    source_alias: str
    target_schema: StructType
    source_schema: StructType
    to_sql: Callable[[object, bool], str] = text_only
    # withSchemaEvolution(): star clauses write only the source's columns (see merge_evolution)
    schema_evolution: bool = False

    def aliases(self, kind: ClauseKind | None) -> dict[str, StructType]:
        if kind is ClauseKind.NOT_MATCHED:
            return {self.source_alias: self.source_schema}
        if kind is ClauseKind.NOT_MATCHED_BY_SOURCE:
            return {self.target_alias: self.target_schema}
        return {self.target_alias: self.target_schema, self.source_alias: self.source_schema}


def bind_condition(scope: MergeScope, condition: Expr, kind: ClauseKind | None) -> BoundPredicate:
    return parse_predicate(scope.to_sql(condition, True), scope.target_schema, aliases=scope.aliases(kind))


def _bind_value(scope: MergeScope, value: Expr, kind: ClauseKind) -> BoundExpression:
    return parse_value_expression(scope.to_sql(value, False), scope.target_schema, aliases=scope.aliases(kind))


def _unknown_target(scope: MergeScope) -> Callable[[str], Exception]:
    def error(message: str) -> Exception:
        return SchemaMismatchError(f"{message} (target table columns: {', '.join(scope.target_schema.field_names)})")

    return error


def _explicit_assignments(scope: MergeScope, clause: MergeClause) -> tuple[dict[str, BoundExpression], FoldedAssignments]:
    """``set`` / ``values`` keys resolved as target columns (``col`` or ``<target alias>.col``, any
    case) or, in update clauses, nested struct fields (``t.s.x``), folded into one assignment of the
    rebuilt struct per column (``writing.nested_assignments``); each value bound in the clause's scope.
    The fold is returned too: generated columns read the new values per path."""
    assert clause.assignments is not None
    resolved = [
        (resolve_target(scope.target_schema, key, _unknown_target(scope), scope.target_alias), value)
        for key, value in clause.assignments.items()
    ]
    nested = [t.key for t, _ in resolved if t.nested]
    if nested and clause.action is ClauseAction.INSERT:
        raise NestedInsertAssignmentError(
            f"cannot assign {nested[0]!r}: nested fields cannot be assigned in the INSERT clause of MERGE (Delta's "
            "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION); give the whole struct column a value instead"
        )
    texts = [(t, scope.to_sql(value, False)) for t, value in resolved]
    folded = fold_assignments(texts, column_path_sql(scope.target_alias))
    return {name: _bind_value(scope, text, clause.kind) for name, text in folded.columns.items()}, folded


def _star_assignments(scope: MergeScope, kind: ClauseKind) -> dict[str, BoundExpression]:
    """UpdateAll / InsertAll: every target column from the source column of the same name.

    With schema evolution, target columns the source lacks are left out: an update keeps their
    value and an insert writes NULL (Delta's behaviour); without it they are an error.
    """
    generated = {**generation_expressions(scope.target_schema), **identity_columns(scope.target_schema),
                 **column_defaults(scope.target_schema)}
    missing = [f.name for f in scope.target_schema.fields if scope.source_schema.find(f.name) is None]
    if [m for m in missing if m not in generated] and not scope.schema_evolution:
        raise SchemaMismatchError(
            f"{'updateAll' if kind is ClauseKind.MATCHED else 'insertAll'} needs every target column in the "
            f"source, but the source lacks {missing} (source columns: {', '.join(scope.source_schema.field_names)}); "
            f"enable schema evolution (withSchemaEvolution()) to keep/NULL them"
        )
    out: dict[str, BoundExpression] = {}
    for f in scope.target_schema.fields:
        if f.name in missing or (kind is not ClauseKind.NOT_MATCHED and is_identity(f)):
            continue  # updateAll keeps identity values: they cannot change
        source_name = scope.source_schema.get(f.name).name
        out[f.name] = _bind_value(scope, f"{quote_identifier(scope.source_alias)}.{quote_identifier(source_name)}", kind)
    return out


def bind_clauses(scope: MergeScope, clauses: Sequence[MergeClause]) -> list[BoundClause]:
    """Bind every clause; check Delta's rule that only the last clause of a kind may be unconditional."""
    bound: list[BoundClause] = []
    for kind in ClauseKind:
        of_kind = [c for c in clauses if c.kind is kind]
        for position, clause in enumerate(of_kind):
            if clause.condition is None and position < len(of_kind) - 1:
                raise InvalidArgumentError(
                    f"only the last {kind.value} clause of a MERGE may omit its condition "
                    f"(clause {position + 1} of {len(of_kind)} has none)"
                )
            condition = None if clause.condition is None else bind_condition(scope, clause.condition, kind)
            assignments: dict[str, BoundExpression] = {}
            folded: FoldedAssignments | None = None
            star = clause.action is not ClauseAction.DELETE and clause.assignments is None
            if star:
                assignments = _star_assignments(scope, kind)
            elif clause.assignments is not None:
                assignments, folded = _explicit_assignments(scope, clause)
            if clause.action is ClauseAction.UPDATE:
                check_identity_update(scope.target_schema, list(assignments), "MERGE")
            if clause.action is ClauseAction.INSERT:
                _check_identity_insert(scope.target_schema, assignments)
            if clause.action is not ClauseAction.DELETE:
                assignments = _with_generated(scope, kind, clause.action, assignments, folded)
            bound.append(BoundClause(KIND_BASE[kind] + position, kind, clause.action, condition, assignments, star))
    return bound


def _check_identity_insert(schema: StructType, assignments: Mapping[str, BoundExpression]) -> None:
    """A MERGE insert may give a value only to GENERATED BY DEFAULT identity columns; those it does
    not give get new values from the executor (``identity_to_assign``)."""
    check_explicit_values(schema, list(assignments), "MERGE")


def identity_to_assign(schema: StructType, clause: BoundClause) -> list[str]:
    """The identity columns whose values an insert clause leaves to the table: every GENERATED
    ALWAYS one, and the BY DEFAULT ones it gives no value (Delta assigns both). Empty for other actions."""
    if clause.action is not ClauseAction.INSERT:
        return []
    return [name for name in identity_columns(schema) if name not in clause.assignments]


def _with_generated(
    scope: MergeScope,
    kind: ClauseKind,
    action: ClauseAction,
    assignments: dict[str, BoundExpression],
    folded: FoldedAssignments | None = None,
) -> dict[str, BoundExpression]:
    """``assignments`` plus the generated columns Delta computes: on insert every generated column
    not given (from the inserted values; inputs not given are NULL), on update those whose inputs
    are assigned (over the new values; other inputs are the target row's). Given values are checked
    against the expression like any written row (``writing.generated``). ``folded`` gives nested
    assignments per path, so ``g = s.x + 1`` under ``t.s.x = v`` reads ``(v)``."""
    out = dict(assignments)
    if action is ClauseAction.INSERT:  # columns with a DEFAULT get it instead of NULL (allowColumnDefaults)
        for name, default in column_defaults(scope.target_schema).items():
            if name not in out:
                out[name] = _bind_value(scope, default, kind)
    paths: dict[tuple[str, ...], str] = {(name.lower(),): value.sql for name, value in assignments.items()}
    if folded is not None:
        paths.update({path: text for path, text in folded.values.items() if len(path) > 1})
    paths = {path: stored_value_text(scope.target_schema, path, text) for path, text in paths.items()}  # Delta: over the cast values
    target = quote_identifier(scope.target_alias)

    def unassigned(ref: ColumnRef) -> str:
        if action is ClauseAction.INSERT:
            return f"CAST(NULL AS {ref.leaf.type.simple_string()})"
        return ".".join([target, *(quote_identifier(p) for p in ref.path)])

    for name, text in generation_expressions(scope.target_schema).items():
        if name in assignments:
            continue
        generation = parse_value_expression(text, scope.target_schema)
        if action is ClauseAction.UPDATE and not any(c in assignments for c in generation.columns):
            continue
        value = substitute_paths(generation, paths, None if folded is None else folded.rebuilt, unassigned)
        out[name] = _bind_value(scope, value, kind)
    return out


def operation_parameters(condition: BoundPredicate, clauses: Sequence[BoundClause]) -> dict[str, ParameterValue]:
    """``operationParameters`` as Delta Spark writes them for MERGE (``DeltaOperations.Merge``):
    ``predicate`` and the three clause lists are JSON text, each clause a ``MergePredicate``
    (``predicate`` only when the clause has a condition, then ``actionType``)."""

    def describe(kind: ClauseKind) -> str:
        items: list[dict[str, str]] = []
        for c in clauses:
            if c.kind is not kind:
                continue
            item = {"actionType": c.action.value}
            if c.condition is not None:
                item = {"predicate": c.condition.sql, **item}
            items.append(item)
        return delta_json(items)

    return {
        "predicate": predicate_parameter(condition),
        "matchedPredicates": describe(ClauseKind.MATCHED),
        "notMatchedPredicates": describe(ClauseKind.NOT_MATCHED),
        "notMatchedBySourcePredicates": describe(ClauseKind.NOT_MATCHED_BY_SOURCE),
    }


def row_level_safe(clauses: Sequence[BoundClause]) -> bool:
    """Whether this MERGE's outcome depends on no target row except those it retires, which is
    what row-level conflict resolution needs (commands/concurrency.py): every matched row takes
    a clause that retires it (the last MATCHED clause is unconditional and all of them update or
    delete), and no NOT MATCHED BY SOURCE clause looks at the unmatched rows. An insert-only
    MERGE depends on matched rows it does not retire, so it keeps file-level conflicts where the
    runner cannot report those rows (Spark's row plan); the embedded executor and Spark's file
    tasks report them (``TargetResult.kept_rows``) and need no such restriction."""
    matched = [c for c in clauses if c.kind is ClauseKind.MATCHED]
    if not matched or any(c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE for c in clauses):
        return False
    return matched[-1].condition is None and all(c.retires_target_row for c in matched)
