"""Column defaults (the ``allowColumnDefaults`` writer feature): the value an insert writes into a column
it does not give.

Delta stores a column's default as Spark does, the SQL text in the field metadata key
``CURRENT_DEFAULT`` (set by ``CREATE TABLE ... DEFAULT`` or ``ALTER COLUMN ... SET DEFAULT``); the
feature must be on the table before any column has one. A writer appending rows that lack the
column writes the default instead of NULL; MERGE inserts likewise. Given values are written as
given. dvengine evaluates defaults like any value expression (literals and deterministic
expressions; Arrow in-process, Spark SQL on Spark).
"""

from __future__ import annotations

from dvengine.errors import InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import parse_value_expression
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
