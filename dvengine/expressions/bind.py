"""Binding: resolve every column of a parsed expression against table schemas.

Binding is where names get their meaning. Resolution is case-insensitive (Spark's default) and
the bound tree spells every column exactly as the schema does, back-quoted, so later stages
(normalized SQL, renaming to physical or temporary names, skipping) never re-resolve names.

MERGE conditions see two tables: ``aliases`` maps each alias to its schema (e.g. ``{"t":
target, "s": source}``). When ``aliases`` is given, names resolve *only* through it: ``s.id`` in
the source, an unqualified ``id`` in whichever single aliased schema has it (in both ->
ambiguous). Without ``aliases``, names resolve in ``schema`` and carry no qualifier.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from dvengine.errors import InvalidPredicateError, UnresolvedColumnError
from dvengine.expressions.parse import parse_sql, too_deep
from dvengine.expressions.refs import REF_KEY, ColumnRef, bound_refs, column_node, reference_nodes
from dvengine.expressions.typecheck import TypeChecker
from dvengine.protocol.schema import StructField, StructType


@dataclass(frozen=True, eq=False)
class BoundExpression:
    """An expression bound to one or more schemas. Immutable by contract: never mutate ``tree``.

    - ``sql``: normalized Spark SQL, columns back-quoted in the schema's logical spelling
      (qualified as ``alias``.``name`` for MERGE).
    - ``columns``: logical top-level names referenced, whatever their qualifier.
    - ``qualified_columns``: ``(alias or None, top-level logical name)`` pairs; the alias is
      spelled as the key given in ``aliases``. Use this for MERGE, where ``columns`` mixes tables.
    - ``tree``: the bound sqlglot tree; column nodes carry a :class:`ColumnRef` in ``meta``.
    """

    sql: str
    columns: frozenset[str]
    qualified_columns: frozenset[tuple[str | None, str]]
    tree: exp.Expr = field(repr=False)

    @property
    def refs(self) -> tuple[ColumnRef, ...]:
        return tuple(bound_refs(self.tree))

    def references_only(self, names: Collection[str]) -> bool:
        """True when every column referenced is in ``names`` (case-insensitive).

        An unqualified reference matches ``name``; a qualified one matches only ``alias.name``,
        so a MERGE source column is never mistaken for a target partition column.
        """
        allowed = {n.lower() for n in names}
        for qualifier, name in self.qualified_columns:
            key = name if qualifier is None else f"{qualifier}.{name}"
            if key.lower() not in allowed:
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, BoundExpression) and other.sql == self.sql

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.sql))


class BoundPredicate(BoundExpression):
    """A bound expression whose value is boolean (a DML condition)."""


def parse_predicate(text: str, schema: StructType, aliases: Mapping[str, StructType] | None = None) -> BoundPredicate:
    """Parse and bind a boolean condition; raises InvalidPredicateError with the reason."""
    try:
        tree = _bind(text, schema, aliases, require_boolean=True)
        return BoundPredicate(*_summarize(tree), tree=tree)
    except RecursionError as exc:  # binding and type checking recurse over the tree
        raise too_deep(text) from exc


def parse_value_expression(
    text: str, schema: StructType, aliases: Mapping[str, StructType] | None = None
) -> BoundExpression:
    """Parse and bind a value (UPDATE SET / MERGE assignment); same checks, any result type."""
    try:
        tree = _bind(text, schema, aliases, require_boolean=False)
        return BoundExpression(*_summarize(tree), tree=tree)
    except RecursionError as exc:
        raise too_deep(text) from exc


def _summarize(tree: exp.Expr) -> tuple[str, frozenset[str], frozenset[tuple[str | None, str]]]:
    refs = bound_refs(tree)
    return (
        str(tree.sql(dialect="spark", comments=False)),
        frozenset(r.top for r in refs),
        frozenset((r.qualifier, r.top) for r in refs),
    )


def _bind(text: str, schema: StructType, aliases: Mapping[str, StructType] | None, require_boolean: bool) -> exp.Expr:
    tree = parse_sql(text)
    resolver = _Resolver(text, schema, aliases)
    for node, parts in reference_nodes(tree):
        if _is_lambda_variable(node, parts[0]):
            continue
        ref = resolver.resolve(parts)
        bound = column_node(([ref.qualifier] if ref.qualifier else []) + list(ref.path))
        bound.meta[REF_KEY] = ref
        if node is tree:
            tree = bound
        else:
            node.replace(bound)
    checker = TypeChecker(text)
    if require_boolean:
        checker.require_boolean(tree, "a condition")
    else:
        checker.infer(tree)
    return tree


def _is_lambda_variable(node: exp.Expr, name: str) -> bool:
    lowered = name.lower()
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda) and any(str(p.name).lower() == lowered for p in parent.expressions):
            return True
        parent = parent.parent
    return False


class _Resolver:
    def __init__(self, text: str, schema: StructType, aliases: Mapping[str, StructType] | None) -> None:
        self._text = text
        self._scopes: dict[str | None, StructType] = {}
        if aliases:
            self._scopes.update(aliases.items())
        else:
            self._scopes[None] = schema
        for key in self._scopes:
            if key is not None and (not isinstance(key, str) or not key or "." in key):
                raise InvalidPredicateError(f"alias {key!r} must be a non-empty name without dots")

    def _error(self, reason: str) -> InvalidPredicateError:
        return InvalidPredicateError(f"invalid expression {self._text!r}: {reason}")

    def _unresolved(self, reason: str) -> UnresolvedColumnError:
        return UnresolvedColumnError(f"invalid expression {self._text!r}: {reason}")

    def _available(self) -> str:
        names = [f.name if q is None else f"{q}.{f.name}" for q, s in self._scopes.items() for f in s.fields]
        return ", ".join(names) if names else "(none)"

    def resolve(self, parts: list[str]) -> ColumnRef:
        if len(parts) >= 2:
            for qualifier, scope in self._scopes.items():
                if qualifier is not None and qualifier.lower() == parts[0].lower():
                    top = scope.find(parts[1])
                    if top is None:
                        raise self._unresolved(
                            f"column {parts[1]!r} does not exist in {qualifier!r}; "
                            f"its columns are: {', '.join(scope.field_names)}"
                        )
                    return self._nested(qualifier, top, parts[2:])
        matches = [(q, f) for q, s in self._scopes.items() if (f := s.find(parts[0])) is not None]
        if not matches:
            raise self._unresolved(f"column {'.'.join(parts)!r} does not exist; available columns: {self._available()}")
        if len(matches) > 1:
            options = " or ".join(f"{q}.{f.name}" for q, f in matches)
            raise self._unresolved(f"column {parts[0]!r} is ambiguous; qualify it as {options}")
        qualifier, top = matches[0]
        return self._nested(qualifier, top, parts[1:])

    def _nested(self, qualifier: str | None, top: StructField, rest: list[str]) -> ColumnRef:
        fields = [top]
        for part in rest:
            current = fields[-1]
            if not isinstance(current.type, StructType):
                raise self._unresolved(
                    f"{'.'.join(f.name for f in fields)!r} is {current.type.simple_string()}, "
                    f"not a struct, so it has no field {part!r}"
                )
            child = current.type.find(part)
            if child is None:
                raise self._unresolved(
                    f"struct column {'.'.join(f.name for f in fields)!r} has no field {part!r}; "
                    f"its fields are: {', '.join(current.type.field_names)}"
                )
            fields.append(child)
        return ColumnRef(qualifier, tuple(f.name for f in fields), tuple(fields))
