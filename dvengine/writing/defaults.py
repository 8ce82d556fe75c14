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

from dvengine.protocol.schema import StructField, StructType

ALLOW_COLUMN_DEFAULTS = "allowColumnDefaults"
CURRENT_DEFAULT = "CURRENT_DEFAULT"


def has_default(field: StructField) -> bool:
    return CURRENT_DEFAULT in field.metadata


def column_defaults(schema: StructType) -> dict[str, str]:
    """Top-level column name -> default SQL text."""
    return {f.name: str(f.metadata[CURRENT_DEFAULT]) for f in schema.fields if has_default(f)}
