"""The statements ``dvengine.sql`` understands, as plain data: what the parser hands to the runner.

Expressions stay SQL text (Spark dialect), because the DeltaTable API takes SQL expression
strings and binds them itself; the parser only finds where each clause starts and ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TableRef:
    """``delta.`/path``` (``path`` set) or a catalog name such as ``db.t`` (``name`` set)."""

    path: str | None = None
    name: str | None = None

    def describe(self) -> str:
        return f"delta.`{self.path}`" if self.path is not None else str(self.name)


@dataclass(frozen=True)
class DeleteStatement:
    table: TableRef
    condition: str | None


@dataclass(frozen=True)
class UpdateStatement:
    table: TableRef
    assignments: dict[str, str]
    condition: str | None


@dataclass(frozen=True)
class MergeSource:
    """A table / view name, a Delta path, or a subquery (SQL text), with the alias the ON clause uses."""

    alias: str
    table: TableRef | None = None
    query: str | None = None


@dataclass(frozen=True)
class MergeWhen:
    """One WHEN clause. ``kind``: matched | not_matched | not_matched_by_source; ``action``:
    update | delete | insert; ``assignments`` None means ``*`` (UPDATE SET * / INSERT *)."""

    kind: str
    action: str
    condition: str | None
    assignments: dict[str, str] | None


@dataclass(frozen=True)
class MergeStatement:
    table: TableRef
    target_alias: str | None
    source: MergeSource
    condition: str
    clauses: tuple[MergeWhen, ...]


@dataclass(frozen=True)
class HistoryStatement:
    table: TableRef
    limit: int | None


@dataclass(frozen=True)
class VacuumStatement:
    table: TableRef
    retention_hours: float | None
    dry_run: bool
    vacuum_type: str | None = None  # "LITE" / "FULL" as written; None: Delta's default (a conf picks)


@dataclass(frozen=True)
class DetailStatement:
    table: TableRef


@dataclass(frozen=True)
class RestoreStatement:
    table: TableRef
    version: int | None
    timestamp: str | None


@dataclass(frozen=True)
class OptimizeStatement:
    table: TableRef
    condition: str | None
    zorder_by: tuple[str, ...] = ()  # ZORDER BY columns, as written
    full: bool = False  # OPTIMIZE t FULL (clustered tables: recluster everything clustered otherwise)


@dataclass(frozen=True)
class IdentityDefinition:
    """``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(START WITH n INCREMENT BY m)]``."""

    always: bool
    start: int = 1
    step: int = 1


@dataclass(frozen=True)
class ColumnDefinition:
    name: str
    data_type: str  # Spark SQL type text, e.g. "BIGINT", "DECIMAL(10, 2)"
    nullable: bool = True
    comment: str | None = None
    generated_as: str | None = None  # GENERATED ALWAYS AS (expr): the expression as written
    identity: IdentityDefinition | None = None
    default: str | None = None  # DEFAULT expr: the expression as written (Delta stores the text)


@dataclass(frozen=True)
class CreateTableStatement:
    table: TableRef
    if_not_exists: bool
    columns: tuple[ColumnDefinition, ...]
    partitioned_by: tuple[str, ...] = ()
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    cluster_by: tuple[str, ...] = ()  # CLUSTER BY (liquid clustering) columns
    or_replace: bool = False  # CREATE OR REPLACE TABLE
    replace_only: bool = False  # REPLACE TABLE (the table must exist)


@dataclass(frozen=True)
class InsertStatement:
    """``INSERT {INTO | OVERWRITE} [TABLE] t [(cols)] [BY NAME] [REPLACE WHERE cond] {VALUES ... | query}``.

    ``rows``: VALUES cells as Spark SQL text, None for the DEFAULT keyword; ``query`` the SELECT
    text otherwise. ``text`` is the statement as written, handed to Spark unchanged when ``t`` is a
    name dvengine's catalog does not hold (a Spark table or view).
    """

    table: TableRef
    overwrite: bool
    columns: tuple[str, ...] | None  # None: no column list (by position over every column)
    rows: tuple[tuple[str | None, ...], ...] | None
    query: str | None
    replace_where: str | None
    by_name: bool
    text: str


@dataclass(frozen=True)
class AlterPropertiesStatement:
    """``ALTER TABLE t SET TBLPROPERTIES (k = v, ...)`` or ``UNSET TBLPROPERTIES [IF EXISTS] (k, ...)``."""

    table: TableRef
    set_properties: dict[str, str] | None  # None: an UNSET
    unset_keys: tuple[str, ...] = ()
    if_exists: bool = False


@dataclass(frozen=True)
class AlterColumnTypeStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c TYPE type`` (type widening)."""

    table: TableRef
    column: str  # dotted for a nested struct field
    data_type: str  # Spark SQL type text


@dataclass(frozen=True)
class AlterClusterByStatement:
    """``ALTER TABLE t CLUSTER BY (c, ...)`` (each column as its name parts) or ``CLUSTER BY NONE``
    (``columns`` empty)."""

    table: TableRef
    columns: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class AlterConstraintStatement:
    """``ALTER TABLE t ADD CONSTRAINT name CHECK (expr)`` or ``DROP CONSTRAINT [IF EXISTS] name``."""

    table: TableRef
    name: str
    expression: str | None  # None: a DROP
    if_exists: bool = False


@dataclass(frozen=True)
class AddColumnDefinition:
    """One column of ``ALTER TABLE t ADD COLUMN[S]``: ``path`` is the parent struct's path plus the name."""

    path: tuple[str, ...]
    data_type: str  # Spark SQL type text
    nullable: bool = True
    comment: str | None = None
    default: str | None = None  # refused by Delta on ADD COLUMNS, kept to say so
    position: str | None = None  # "FIRST" or "AFTER <name>"


@dataclass(frozen=True)
class AddColumnsStatement:
    """``ALTER TABLE t ADD COLUMN[S] [(]col type [COMMENT c] [FIRST | AFTER x], ...[)]``."""

    table: TableRef
    columns: tuple[AddColumnDefinition, ...]


@dataclass(frozen=True)
class ReplaceColumnsStatement:
    """``ALTER TABLE t REPLACE COLUMNS (col type [COMMENT 'text'], ...)``: the table's new top-level
    column list (each an :class:`AddColumnDefinition` of one name, nullable, no DEFAULT or position,
    as Spark's parser takes them). ``text`` is the statement as written, handed to Spark unchanged
    when ``t`` is a name dvengine's catalog does not hold (a Spark table)."""

    table: TableRef
    columns: tuple[AddColumnDefinition, ...]
    text: str


@dataclass(frozen=True)
class RenameColumnStatement:
    """``ALTER TABLE t RENAME COLUMN a.b TO c`` (column mapping tables)."""

    table: TableRef
    column: tuple[str, ...]
    new_name: str


@dataclass(frozen=True)
class DropColumnsStatement:
    """``ALTER TABLE t DROP COLUMN[S] [IF EXISTS] [(]a, b.c[)]`` (column mapping tables)."""

    table: TableRef
    columns: tuple[tuple[str, ...], ...]
    if_exists: bool = False


@dataclass(frozen=True)
class AlterColumnDefaultStatement:
    """``ALTER TABLE t ALTER [COLUMN] c SET DEFAULT expr`` (``default`` as written) or ``DROP DEFAULT`` (None)."""

    table: TableRef
    column: tuple[str, ...]
    default: str | None


@dataclass(frozen=True)
class AlterColumnNullabilityStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {SET | DROP} NOT NULL`` (``nullable``: True for DROP)."""

    table: TableRef
    column: tuple[str, ...]
    nullable: bool


@dataclass(frozen=True)
class AlterColumnChangeStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {COMMENT 'text' | FIRST | AFTER x}`` or Hive-style
    ``ALTER TABLE t CHANGE [COLUMN] c c type [COMMENT 'text'] [FIRST | AFTER x]``."""

    table: TableRef
    column: tuple[str, ...]
    comment: str | None = None
    position: str | None = None  # "FIRST" or "AFTER <name>"
    data_type: str | None = None  # Hive-style: the type as written (the column's own type changes nothing)


@dataclass(frozen=True)
class AlterColumnSyncIdentityStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c SYNC IDENTITY`` (Delta's grammar, ``alterTableSyncIdentity``)."""

    table: TableRef
    column: tuple[str, ...]


@dataclass(frozen=True)
class CreateTableAsSelectStatement:
    """``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t USING delta [PARTITIONED BY ...] [CLUSTER BY ...]
    [LOCATION ...] [TBLPROPERTIES ...] [COMMENT ...] AS query`` (or ``REPLACE TABLE ... AS query``).

    ``query`` is the query's SQL text as written; Spark runs it (``delta.`path``` in it read by
    dvengine) and dvengine writes its rows."""

    table: TableRef
    query: str
    if_not_exists: bool = False
    or_replace: bool = False
    replace_only: bool = False
    partitioned_by: tuple[str, ...] = ()
    location: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    cluster_by: tuple[str, ...] = ()  # CLUSTER BY (liquid clustering) columns


@dataclass(frozen=True)
class PassThrough:
    """Anything else: handed to ``spark.sql`` unchanged."""

    text: str


@dataclass(frozen=True)
class OtherAlterTable:
    """An ``ALTER TABLE t <form>`` dvengine does not run (``RENAME TO``, ``SET LOCATION``, ...).
    On a Delta table (``delta.`path``` or a name in dvengine's catalog) it is refused with a typed
    error, not handed to ``spark.sql``, which cannot run it without Delta's jar and would answer
    with a misleading "table not found"; any other table's statement goes to Spark unchanged."""

    table: TableRef
    form: str  # the words after the table, as written (for the error)
    text: str


Statement = (
    DeleteStatement
    | UpdateStatement
    | MergeStatement
    | HistoryStatement
    | VacuumStatement
    | DetailStatement
    | RestoreStatement
    | OptimizeStatement
    | CreateTableStatement
    | InsertStatement
    | AlterPropertiesStatement
    | AlterConstraintStatement
    | AlterColumnTypeStatement
    | AddColumnsStatement
    | ReplaceColumnsStatement
    | RenameColumnStatement
    | DropColumnsStatement
    | AlterColumnDefaultStatement
    | AlterColumnNullabilityStatement
    | AlterColumnChangeStatement
    | AlterColumnSyncIdentityStatement
    | AlterClusterByStatement
    | CreateTableAsSelectStatement
    | OtherAlterTable
    | PassThrough
)
