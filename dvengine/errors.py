"""Typed errors raised by dvengine.

Every failure a user can cause or observe maps to one class here, so callers can
``except`` precisely (retry a conflict, fix a predicate, give up on a corrupt table)
instead of parsing messages. All share :class:`DvengineError` as a base.
"""

from __future__ import annotations

try:  # pyspark.errors is pure Python (no JVM, no py4j gateway); see AnalysisError for why it is here
    from pyspark.errors import AnalysisException as _SparkAnalysisException

    _HAVE_PYSPARK = True
except ImportError:  # pragma: no cover - dvengine without pyspark installed
    _HAVE_PYSPARK = False

    class _SparkAnalysisException(Exception):  # type: ignore[no-redef]
        """Stand-in base when pyspark is not installed: AnalysisError is then a plain DvengineError."""


class DvengineError(Exception):
    """Base class of every error dvengine raises on purpose."""


class AnalysisError(DvengineError, _SparkAnalysisException):
    """An error delta-spark reports as pyspark's ``AnalysisException`` (no table at a path, table exists,
    schema mismatch, version not found), so ``except AnalysisException`` in a delta-spark script still
    catches dvengine's typed error, which keeps its own class and message.

    When pyspark is importable this class subclasses ``pyspark.errors.AnalysisException`` (the class
    ``pyspark.sql.utils.AnalysisException`` also names). This is the one pyspark import outside
    ``dvengine/engine/spark``: an exception's bases are fixed when its class is made, so the base
    must be known here, at the bottom floor (spec_notes/writer-features.md says why no other
    design keeps both ``except`` forms working).
    """

    delta_error_class: str | None = None  # Delta's error class, what getCondition() returns

    def __init__(self, *args: object) -> None:
        Exception.__init__(self, *args)  # args kept: pickling (Spark workers) rebuilds cls(*args)
        if _HAVE_PYSPARK:  # PySparkException keeps its own message field, which getMessage() reads
            _SparkAnalysisException.__init__(
                self, message=str(args[0]) if args else "", errorClass=self.delta_error_class
            )

    def __str__(self) -> str:
        return Exception.__str__(self)


# --- table and log ---------------------------------------------------------------------------


class TableNotFoundError(AnalysisError):
    """The path holds no Delta table (no ``_delta_log`` with commits)."""

    delta_error_class = "DELTA_MISSING_DELTA_TABLE"


class TableAlreadyExistsError(AnalysisError):
    """A create in ``error`` mode found a table already at the path."""

    delta_error_class = "DELTA_TABLE_ALREADY_EXISTS"


class CatalogError(DvengineError):
    """The name -> location catalog (``dvengine.storage.catalog``) is unreadable or locked."""


class VersionNotFoundError(AnalysisError):
    """A requested version or timestamp is outside what the log can reconstruct."""


class ProtocolError(DvengineError):
    """The log violates the Delta protocol (malformed action, gap in versions, bad checkpoint)."""


class LogCorruptedError(ProtocolError):
    """A commit or checkpoint file cannot be parsed (truncated, not JSON, not Parquet)."""


class UnsupportedFeatureError(DvengineError):
    """The table needs a reader or writer feature dvengine does not implement."""


class UnsupportedStorageError(UnsupportedFeatureError):
    """The table path names a storage system dvengine has no LogStore for (``s3a://``, ``abfss://``, ...).

    Refused up front: treating ``s3a://b/t`` as a local path would silently create ``./s3a:/b/t``.
    """


class ConditionalPutUnsupportedError(UnsupportedStorageError):
    """The object store ignores or rejects create-if-absent writes, so two writers could both "win" one version.

    Raised before anything is written. ``AWS_S3_ALLOW_UNSAFE_RENAME=true`` (delta-rs's name) in
    ``storage_options`` allows a single writer at the user's own risk.
    """


class StorageError(DvengineError):
    """An object store failed a request (missing bucket, refused credentials, timeout, unreachable
    endpoint) or a local file could not be made durable (:class:`StorageWriteError`).

    The message names the URI. Raised before a commit (nothing committed) or instead of it.
    """


class StorageAccessError(StorageError):
    """The object store refused the credentials (403 / 401) or they are missing."""


class StorageUnreachableError(StorageError):
    """The object store did not answer: connection refused, timeout, DNS failure."""


class StorageWriteError(StorageError):
    """A local file a commit (or ``_last_checkpoint``) would name could not be written, fsynced or
    renamed into place (EIO, ENOSPC, ...): its data may not be on disk, so it must not be named.

    The message names the file; the ``OSError`` is the cause (``raise ... from``). Raised before
    the commit is linked, so nothing is committed and the command removes what it wrote
    (spec_notes/crash-safety.md, "A failed fsync"). A checkpoint that fails this way after its
    commit only warns, as Delta's post-commit checkpoint does.
    """


class DataFileError(DvengineError):
    """A data (Parquet) file listed in the log exists but cannot be read: not Parquet, truncated, unreadable.

    Distinct from :class:`LogCorruptedError`: the log is fine, one of the files it points to is not.
    """


class DeletionVectorError(DvengineError):
    """A deletion vector is malformed, missing, or inconsistent with its descriptor or file."""


# --- schema and expressions ------------------------------------------------------------------


class SchemaError(DvengineError):
    """A schema cannot be parsed or converted."""


class SchemaMismatchError(SchemaError, AnalysisError):
    """Data written to a table does not match its schema."""

    delta_error_class = "DELTA_METADATA_MISMATCH"


class NestedNotNullConstraintError(SchemaError, AnalysisError):
    """A schema change would leave a NOT NULL inside an array element or a map key / value, where
    no writer can enforce it (Delta's DELTA_NESTED_NOT_NULL_CONSTRAINT). The message names the
    column path and the conf that makes Delta drop such flags instead. Nothing is committed."""

    delta_error_class = "DELTA_NESTED_NOT_NULL_CONSTRAINT"


class DataChangeFalseError(AnalysisError):
    """A write with the ``dataChange=false`` option (Delta's ``rearrangeOnly``) would change more than
    the arrangement of rows already in the table: create the table, change its schema or
    partitioning. Delta's DELTA_DATA_CHANGE_FALSE (an AnalysisException); nothing is written."""

    delta_error_class = "DELTA_DATA_CHANGE_FALSE"


class ReplaceWhereDataChangeFalseError(DataChangeFalseError):
    """``replaceWhere`` with a condition on data (non-partition) columns and ``dataChange=false``:
    such a replace deletes rows inside files, which is a data change. Delta's
    DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET; nothing is written."""

    delta_error_class = "DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET"


class SchemaViolationError(SchemaError):
    """A write would store a value the schema forbids (null in NOT NULL, uncastable type)."""


class ConstraintViolationError(SchemaViolationError):
    """A row written by a write, UPDATE or MERGE breaks a CHECK constraint or a column invariant of the
    table (NULL counts as broken).

    Delta's DELTA_VIOLATE_CONSTRAINT_WITH_VALUES (an InvariantViolationException, not an AnalysisException):
    the message names the constraint, its expression and the values of the row's columns it reads.
    Nothing is committed.
    """


class ConstraintError(AnalysisError):
    """ALTER TABLE ADD/DROP CONSTRAINT cannot be done: the name exists or is missing, or existing rows break
    the new constraint (Delta's DELTA_CONSTRAINT_ALREADY_EXISTS, DELTA_CONSTRAINT_DOES_NOT_EXIST,
    DELTA_NEW_CHECK_CONSTRAINT_VIOLATION, all AnalysisExceptions)."""


class InvalidPredicateError(DvengineError):
    """A condition or expression cannot be parsed, bound to the schema, or is not deterministic."""


class UnresolvedColumnError(InvalidPredicateError, AnalysisError):
    """An expression names a column the table (or MERGE source) does not have, or names it ambiguously.

    Spark reports this as an ``AnalysisException`` (UNRESOLVED_COLUMN / AMBIGUOUS_REFERENCE), so it is one here too.
    """

    delta_error_class = "UNRESOLVED_COLUMN"


class DefaultPlacementError(InvalidPredicateError, AnalysisError):
    """The DEFAULT keyword of an UPDATE assignment is part of a larger expression (``SET c = DEFAULT + 1``).

    Spark's DEFAULT_PLACEMENT_INVALID (an AnalysisException): DEFAULT must be the whole value.
    """

    delta_error_class = "DEFAULT_PLACEMENT_INVALID"


class NoDefaultValueError(InvalidPredicateError, AnalysisError):
    """``SET c = DEFAULT`` on a NOT NULL column that has no default: no value can be assigned.

    Spark's NO_DEFAULT_COLUMN_VALUE_AVAILABLE (an AnalysisException); a nullable column without a
    default gets NULL instead.
    """

    delta_error_class = "NO_DEFAULT_COLUMN_VALUE_AVAILABLE"


class EvaluationError(InvalidPredicateError):
    """A condition or value failed while rows were evaluated (overflow, division by zero, bad cast).

    Raised the same way by every executor; the engine's own exception is kept as ``__cause__``.
    """


class NotLocallyEvaluableError(InvalidPredicateError):
    """The embedded (local) executor cannot evaluate an expression exactly as Spark SQL would.

    With ``engine="auto"`` the command then runs on Spark; with ``engine="local"`` this is raised.
    """


class InvalidArgumentError(DvengineError, ValueError):
    """An API argument has a value outside what the operation accepts."""


class NestedAssignmentError(InvalidArgumentError, AnalysisError):
    """An UPDATE / MERGE assignment names a nested field that cannot be assigned: one reached through
    an array or a map, or below a column that is not a struct (Delta's DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE:
    only struct fields are rebuilt), or any nested field in a MERGE INSERT clause."""

    delta_error_class = "DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE"


class NestedInsertAssignmentError(NestedAssignmentError):
    """A MERGE INSERT clause names a nested field (``INSERT (s.x) VALUES ...``): an inserted row has no
    struct to rebuild (Delta's DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION)."""

    delta_error_class = "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION"


class ConflictingAssignmentError(InvalidArgumentError, AnalysisError):
    """One UPDATE / MERGE clause assigns the same target twice, or a struct and one of its fields
    (``SET s = ..., s.x = ...``): Delta's DELTA_CONFLICT_SET_COLUMN."""

    delta_error_class = "DELTA_CONFLICT_SET_COLUMN"


# --- environment -----------------------------------------------------------------------------


class SparkEnvironmentError(DvengineError):
    """Spark's Python workers cannot run dvengine (wrong interpreter: ``PYSPARK_PYTHON`` unset or
    pointing at a Python without dvengine/pyarrow), so every job that ships Python code would fail."""


# --- DML -------------------------------------------------------------------------------------


class OperationNotAllowedError(DvengineError):
    """The table's properties forbid the operation (e.g. DELETE/UPDATE/MERGE on ``delta.appendOnly`` tables)."""


class ReservedChangeDataColumnsError(OperationNotAllowedError):
    """Change data feed enabled on a table whose columns include the names the feed adds to every
    row (``_change_type``, ``_commit_version``, ``_commit_timestamp``): change files and feed rows
    would hold two columns of one name. Delta's DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS (enabling
    the feed on such a table; REPLACE COLUMNS raises its own OperationNotAllowedError first); nothing
    is committed."""

    delta_error_class = "DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"


class ReservedChangeDataColumnsOnWriteError(ReservedChangeDataColumnsError):
    """A schema change adds a column with a name the change data feed reserves to a table that has
    the feed on (Delta's RESERVED_CDC_COLUMNS_ON_WRITE); nothing is committed."""

    delta_error_class = "RESERVED_CDC_COLUMNS_ON_WRITE"


class CannotVacuumLiteError(DvengineError):
    """VACUUM LITE cannot see every file it would have to delete: the log no longer holds every commit
    since where the last VACUUM stopped (log cleanup removed them). Delta's DELTA_CANNOT_VACUUM_LITE
    (a DeltaIllegalStateException, SQLSTATE 55000, not an AnalysisException); VACUUM FULL, which
    lists the table instead of reading the log, still works."""

    delta_error_class = "DELTA_CANNOT_VACUUM_LITE"


class MergeCardinalityError(DvengineError):
    """A target row matched more than one source row in MERGE (Delta's DELTA_MULTIPLE_SOURCE_ROW_MATCHING)."""


# --- commits ---------------------------------------------------------------------------------


class CommitError(DvengineError):
    """A commit could not be written for a reason other than a logical conflict."""


class CommitConflictError(DvengineError):
    """A concurrent commit changed the table in a way this transaction cannot be reconciled with."""


class ConcurrentAppendError(CommitConflictError):
    """A concurrent commit added files that match what this transaction read."""


class ConcurrentDeleteReadError(CommitConflictError):
    """A concurrent commit removed or re-DV'd a file this transaction read."""


class ConcurrentDeleteDeleteError(CommitConflictError):
    """A concurrent commit removed or re-DV'd a file this transaction also removes."""


class MetadataChangedError(CommitConflictError):
    """A concurrent commit changed the table metadata (schema, partitioning, properties)."""


class ProtocolChangedError(CommitConflictError):
    """A concurrent commit changed the table protocol."""


class ConcurrentTransactionError(CommitConflictError):
    """A concurrent commit used the same application transaction id (txn action)."""


class MaxCommitAttemptsExceededError(CommitConflictError):
    """Non-conflicting races kept winning until the retry budget ran out."""


class SqlParseError(InvalidArgumentError):
    """SQL text dvengine.sql() cannot parse; the message names the statement and the part that failed.

    It is an InvalidArgumentError (hence a ValueError): the fault is in the text the caller passed.
    Clauses that parse but dvengine does not implement raise UnsupportedFeatureError instead."""
