"""VACUUM START / VACUUM END: the two commits Delta logs around the deletions of a VACUUM.

Deleting files leaves no trace in a table's log, so Delta Spark records a VACUUM in the table
history (``VacuumCommandImpl.logVacuumStart`` / ``logVacuumEnd``, ``VacuumCommand.scala``): once
the files to delete are known, a ``VACUUM START`` commit; after the deletion, a ``VACUUM END``
commit, with status ``FAILED`` (and no metrics) when the deletion raised, before the error goes on.
Each is an empty transaction (``txn.commit(actions = Seq(), ...)``): its commit file holds one
``commitInfo`` and nothing else, so it changes no file, no schema and no property. A dry run
commits neither (it returns before ``logVacuumStart``).

Whether to log is Delta's ``shouldLogVacuum``: ``spark.databricks.delta.vacuum.logging.enabled``
(``DeltaSQLConf.DELTA_VACUUM_LOGGING_ENABLED``, an optional conf) when set, else whether the
table's file system is one Delta trusts with concurrent commits (``supportedFsForLogging``:
``wasbs, wasbss, abfs, abfss, adl, gs, file, hdfs``). So it is on for local folders, Google Cloud
Storage and Azure, and off for S3, whose single-driver LogStore cannot stop two writers taking one
version. dvengine's S3 commits are conditional PUTs, but the default stays Delta's.

The commits as Delta writes them (``DeltaOperations.VacuumStart`` / ``VacuumEnd``):

- ``VACUUM START``: parameters ``retentionCheckEnabled`` (boolean), ``defaultRetentionMillis``
  (number: the table's ``delta.deletedFileRetentionDuration``) and, only when the caller gave a
  retention, ``specifiedRetentionMillis`` (number); metrics ``numFilesToDelete`` and
  ``sizeOfDataToDelete`` (bytes);
- ``VACUUM END``: parameter ``status`` (``"COMPLETED"`` / ``"FAILED"``); metrics, only when
  completed, ``numDeletedFiles`` and ``numVacuumedDirectories`` (Delta's ``dirCounts``: the folders
  the listing found plus the table root, not the folders removed).

Both log ``isolationLevel: SnapshotIsolation`` (Delta downgrades a commit that changes no data,
``TransactionHelper.canDowngradeToSnapshotIsolation``) and ``isBlindAppend: true`` (nothing read,
no file removed). Concurrent writers never conflict with them, nor they with a writer, except
that, as in Delta, a concurrent protocol or metadata change fails the commit that loses the race.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.commands.options import CONF_MAX_COMMIT_ATTEMPTS, conf_number
from dvengine.commit.commit_info import ParameterValue
from dvengine.commit.conf import ConfLookup, conf_bool
from dvengine.commit.conflicts import SNAPSHOT_ISOLATION
from dvengine.commit.transaction import Transaction
from dvengine.log import Snapshot, load_snapshot
from dvengine.planning.decisions import DEFAULT_DML_COMMIT_ATTEMPTS
from dvengine.storage import is_object_uri
from dvengine.storage.uris import scheme_of

CONF_VACUUM_LOGGING = "spark.databricks.delta.vacuum.logging.enabled"

OPERATION_VACUUM_START = "VACUUM START"
OPERATION_VACUUM_END = "VACUUM END"
STATUS_COMPLETED = "COMPLETED"
STATUS_FAILED = "FAILED"

# Delta's VacuumCommandImpl.supportedFsForLogging: the file systems whose LogStore keeps two
# writers from taking one version. dvengine's canonical "az" is Azure Blob Storage (delta-rs and
# object_store's name for what Hadoop reaches as wasbs:// or abfss://), so it counts as Azure.
LOGGED_SCHEMES = frozenset({"wasbs", "wasbss", "abfs", "abfss", "adl", "gs", "file", "hdfs", "az"})


def storage_scheme(table_root: str) -> str:
    """The file system kind of a (normalized) table root: ``file`` for a local folder, else the
    object store's canonical scheme (``s3``, ``gs``, ``az``, ``abfss`` ...)."""
    if not is_object_uri(table_root):
        return "file"
    scheme = scheme_of(table_root)
    assert scheme is not None  # an object URI has one
    return scheme


def logging_enabled(table_root: str, conf: ConfLookup) -> bool:
    """Delta's ``shouldLogVacuum``: the conf when set (``true``/``false``, anything else refused
    naming the key), else whether the table's file system is one Delta logs VACUUM on."""
    default = storage_scheme(table_root) in LOGGED_SCHEMES
    return conf_bool(conf, CONF_VACUUM_LOGGING, default)


def start_parameters(
    retention_check_enabled: bool, specified_retention_ms: int | None, default_retention_ms: int
) -> dict[str, ParameterValue]:
    """``VacuumStart.parameters`` in Delta's order; ``specifiedRetentionMillis`` only when given."""
    params: dict[str, ParameterValue] = {
        "retentionCheckEnabled": retention_check_enabled,
        "defaultRetentionMillis": default_retention_ms,
    }
    if specified_retention_ms is not None:
        params["specifiedRetentionMillis"] = specified_retention_ms
    return params


def commit_vacuum_event(
    snapshot: Snapshot,
    operation: str,
    parameters: Mapping[str, ParameterValue],
    metrics: Mapping[str, int],
    conf: ConfLookup,
) -> int:
    """Commit one commitInfo-only version on top of ``snapshot`` (retried past any number of
    non-conflicting winners, up to ``spark.databricks.delta.maxCommitAttempts``); its version."""
    attempts = int(conf_number(conf, CONF_MAX_COMMIT_ATTEMPTS, DEFAULT_DML_COMMIT_ATTEMPTS, int))
    txn = Transaction(
        snapshot.table_root,
        snapshot,
        operation,
        parameters,
        isolation_level=SNAPSHOT_ISOLATION,
        max_attempts=attempts,
        conf=conf,
    )
    return txn.commit(dict(metrics))


def log_vacuum_start(
    table_root: str,
    conf: ConfLookup,
    *,
    retention_check_enabled: bool,
    specified_retention_ms: int | None,
    default_retention_ms: int,
    num_files_to_delete: int,
    size_of_data_to_delete: int,
) -> int:
    """The ``VACUUM START`` commit on the table's latest version (Delta starts a fresh transaction)."""
    params = start_parameters(retention_check_enabled, specified_retention_ms, default_retention_ms)
    metrics = {"numFilesToDelete": num_files_to_delete, "sizeOfDataToDelete": size_of_data_to_delete}
    return commit_vacuum_event(load_snapshot(table_root), OPERATION_VACUUM_START, params, metrics, conf)


def log_vacuum_end(
    table_root: str,
    conf: ConfLookup,
    *,
    files_deleted: int | None,
    directories: int | None,
) -> int:
    """The ``VACUUM END`` commit: ``COMPLETED`` with its two metrics, or ``FAILED`` with none when
    the deletion did not finish (``files_deleted`` and ``directories`` None, as Delta's)."""
    failed = files_deleted is None or directories is None
    metrics: dict[str, int] = {}
    if not failed:
        assert files_deleted is not None and directories is not None
        metrics = {"numDeletedFiles": files_deleted, "numVacuumedDirectories": directories}
    status = STATUS_FAILED if failed else STATUS_COMPLETED
    return commit_vacuum_event(load_snapshot(table_root), OPERATION_VACUUM_END, {"status": status}, metrics, conf)
