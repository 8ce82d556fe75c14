"""Column defaults (the ``allowColumnDefaults`` writer feature): the value an insert writes into a column
it does not give.

Delta stores a column's default as Spark does, the SQL text in the field metadata key
``CURRENT_DEFAULT`` (set by ``CREATE TABLE ... DEFAULT`` or ``ALTER COLUMN ... SET DEFAULT``); the
feature must be on the table before any column has one. A writer appending rows that lack the
column writes the default instead of NULL; MERGE inserts likewise. Given values are written as
given. dvengine evaluates defaults like any value expression (literals and deterministic
expressions; Arrow in-process, Spark SQL on Spark).

UPDATE's ``SET c = DEFAULT`` follows Spark's analyzer (``ResolveReferencesInUpdate`` then
``ResolveDefaultColumns.resolveColumnDefaultInAssignmentValue``), which resolves UPDATE assignments
for Delta tables too: the value is first resolved as a column of the table (so a table with a
column named ``default`` assigns that column); an unresolved bare ``DEFAULT`` assigned to a
top-level column becomes the column's ``CURRENT_DEFAULT``, else NULL for a nullable column, else
NO_DEFAULT_COLUMN_VALUE_AVAILABLE; a ``DEFAULT`` inside a larger expression is
DEFAULT_PLACEMENT_INVALID. Spark does not look at the ``allowColumnDefaults`` feature here (a table
without it has no defaults, so DEFAULT means NULL). MERGE is not resolved this way: Delta resolves
its clauses itself (``ResolveDeltaMergeInto``) and has no DEFAULT there, so ``DEFAULT`` in a MERGE
clause stays an unknown column, as in Delta.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from dvengine.errors import DefaultPlacementError, InvalidArgumentError, InvalidPredicateError, NoDefaultValueError
from dvengine.expressions import parse_value_expression
from dvengine.expressions.parse import parse_sql
from dvengine.protocol.schema import StructField, StructType

ALLOW_COLUMN_DEFAULTS = "allowColumnDefaults"
CURRENT_DEFAULT = "CURRENT_DEFAULT"


def has_default(field: StructField) -> bool:
    return CURRENT_DEFAULT in field.metadata


def column_defaults(schema: StructType) -> dict[str, str]:
    """Top-level column name -> default SQL text."""
    return {f.name: str(f.metadata[CURRENT_DEFAULT]) for f in schema.fields if has_default(f)}


def check_default_definitions(schema: StructType, allowed: bool, label: str) -> None:
    """Delta's rules for declaring defaults at CREATE / REPLACE TABLE: the table must support
    ``allowColumnDefaults`` (else Delta's WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED), and
    a default may read no column (Spark refuses column references in DEFAULT)."""
    defaults = column_defaults(schema)
    if not defaults:
        return
    if not allowed:
        raise InvalidArgumentError(
            f"CREATE TABLE {label}: column(s) {sorted(defaults)} have a DEFAULT value but the table feature "
            f"{ALLOW_COLUMN_DEFAULTS} is not enabled (Delta's WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED); "
            "add TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')"
        )
    for name, text in defaults.items():
        try:
            parse_value_expression(text, StructType(()))
        except InvalidPredicateError as exc:
            raise type(exc)(f"column {name!r} DEFAULT {text}: {exc} (a DEFAULT value may not read columns)") from exc


def _is_default_keyword(node: exp.Expr) -> bool:
    """A bare ``DEFAULT`` (quoted or not, any case): Spark's UnresolvedAttribute whose name is DEFAULT."""
    return isinstance(node, exp.Column) and not node.table and node.name.upper() == "DEFAULT"


def assigned_default(field: StructField, operation: str) -> str:
    """The SQL text ``SET field = DEFAULT`` assigns (Spark's getDefaultValueExprOrNullLit)."""
    if has_default(field):
        return f"({field.metadata[CURRENT_DEFAULT]})"
    if field.nullable:
        return "NULL"
    raise NoDefaultValueError(
        f"{operation}: cannot determine the default value for column {field.name!r}: it is NOT NULL and has no "
        "DEFAULT (Spark's NO_DEFAULT_COLUMN_VALUE_AVAILABLE); nothing was written"
    )


def mentions_default_keyword(text: str) -> bool:
    """Whether SQL text holds a bare ``DEFAULT`` (False for text that does not parse)."""
    try:
        tree = parse_sql(text)
    except InvalidPredicateError:
        return False  # not SQL (a pyspark Column's internal form): the caller keeps its own error
    return any(_is_default_keyword(node) for node in tree.find_all(exp.Column))


def resolve_default_assignments(schema: StructType, texts: Mapping[str, str], operation: str) -> dict[str, str]:
    """UPDATE assignments (column -> SQL text) with the DEFAULT keyword replaced by the value it
    stands for (see the module docstring). Keys naming no top-level column (nested fields, unknown
    names) keep their text: the binder reports them as it does without DEFAULT."""
    if schema.find("default") is not None:
        return dict(texts)  # DEFAULT resolves to the table's own column first, as in Spark
    resolved: dict[str, str] = {}
    for name, text in texts.items():
        resolved[name] = text
        if not isinstance(text, str) or "default" not in text.lower():
            continue  # no DEFAULT in it (the binder checks the type): skip parsing twice
        field = schema.find(name)
        if field is None:
            continue  # a nested field or no column: Spark leaves DEFAULT unresolved (an unknown column)
        tree = parse_sql(text)
        if _is_default_keyword(tree):
            resolved[name] = assigned_default(field, operation)
        elif any(_is_default_keyword(node) for node in tree.find_all(exp.Column)):
            raise DefaultPlacementError(
                f"{operation}: the DEFAULT keyword in the value {text!r} for column {name!r} is part of an expression; "
                "DEFAULT must be the whole value, as in SET c = DEFAULT (Spark's DEFAULT_PLACEMENT_INVALID); "
                "nothing was written"
            )
    return resolved
