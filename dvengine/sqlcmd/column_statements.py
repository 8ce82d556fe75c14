"""Run the ALTER TABLE column statements (ADD / RENAME / DROP COLUMN, SET / DROP DEFAULT,
SET / DROP NOT NULL, COMMENT / FIRST / AFTER, Hive-style CHANGE COLUMN, SYNC IDENTITY and REPLACE
COLUMNS).

Each is one metadata-only commit by :mod:`dvengine.maintenance.column_changes` (REPLACE COLUMNS:
:mod:`dvengine.maintenance.column_replace`; SYNC IDENTITY: :mod:`dvengine.maintenance.identity_sync`,
which reads the column's live values in-process); none needs a
SparkSession, so ``dvengine.sql(None, ...)`` runs them in-process like CREATE TABLE.
"""

from __future__ import annotations

from dvengine.commands.options import ConfLookup
from dvengine.maintenance.column_changes import (
    NewColumn,
    add_columns,
    change_column,
    drop_columns,
    rename_column,
    set_column_default,
    set_column_nullability,
)
from dvengine.maintenance.column_replace import ReplacedColumn, replace_columns
from dvengine.maintenance.identity_sync import sync_identity
from dvengine.protocol.ddl import parse_ddl_type
from dvengine.sqlcmd.statements import (
    AddColumnsStatement,
    AlterColumnChangeStatement,
    AlterColumnDefaultStatement,
    AlterColumnNullabilityStatement,
    AlterColumnSyncIdentityStatement,
    DropColumnsStatement,
    RenameColumnStatement,
    ReplaceColumnsStatement,
)

ColumnStatement = (
    AddColumnsStatement
    | RenameColumnStatement
    | DropColumnsStatement
    | AlterColumnDefaultStatement
    | AlterColumnNullabilityStatement
    | AlterColumnChangeStatement
    | AlterColumnSyncIdentityStatement
    | ReplaceColumnsStatement
)
COLUMN_STATEMENTS = (
    AddColumnsStatement,
    ReplaceColumnsStatement,
    RenameColumnStatement,
    DropColumnsStatement,
    AlterColumnDefaultStatement,
    AlterColumnNullabilityStatement,
    AlterColumnChangeStatement,
    AlterColumnSyncIdentityStatement,
)


def run_column_statement(table_root: str, stmt: ColumnStatement, conf: ConfLookup) -> int | None:
    """The committed version (None when DROP COLUMNS IF EXISTS found nothing to drop, or a Hive-style
    CHANGE COLUMN asked for nothing). ``conf``: the session's conf (:func:`~dvengine.commands.options.
    no_conf` without one), which the commit reads."""
    if isinstance(stmt, AddColumnsStatement):
        columns = [
            NewColumn(c.path, parse_ddl_type(c.data_type), c.nullable, c.comment, c.default, c.position)
            for c in stmt.columns
        ]
        return add_columns(table_root, columns, conf=conf)
    if isinstance(stmt, ReplaceColumnsStatement):
        return replace_columns(
            table_root, [ReplacedColumn(c.path[-1], parse_ddl_type(c.data_type), c.comment) for c in stmt.columns], conf
        )
    if isinstance(stmt, RenameColumnStatement):
        return rename_column(table_root, stmt.column, stmt.new_name, conf=conf)
    if isinstance(stmt, DropColumnsStatement):
        return drop_columns(table_root, stmt.columns, stmt.if_exists, conf=conf)
    if isinstance(stmt, AlterColumnNullabilityStatement):
        return set_column_nullability(table_root, stmt.column, stmt.nullable, conf=conf)
    if isinstance(stmt, AlterColumnSyncIdentityStatement):
        return sync_identity(table_root, stmt.column, conf)
    if isinstance(stmt, AlterColumnChangeStatement):
        data_type = None if stmt.data_type is None else parse_ddl_type(stmt.data_type)
        return change_column(table_root, stmt.column, stmt.comment, stmt.position, data_type, conf=conf)
    return set_column_default(table_root, stmt.column, stmt.default, conf=conf)
