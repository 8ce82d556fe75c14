"""DeltaTable: the user-facing API, named as in delta-spark so PySpark users feel at home.

A DeltaTable is a handle on a path, not a cached state: every operation loads the snapshot it
needs, so a long-lived handle never acts on stale state, and concurrent writers are handled by
the commit protocol rather than by the handle.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dvengine.api.merge_builder import DeltaMergeBuilder
from dvengine.api.table_builder import CREATE, CREATE_IF_NOT_EXISTS, CREATE_OR_REPLACE, REPLACE, new_builder
from dvengine.commands.arguments import check_column_mapping, check_condition, check_int, check_str
from dvengine.commands.options import session_conf
from dvengine.errors import TableNotFoundError
from dvengine.log import Snapshot, find_table_root, load_snapshot, table_exists
from dvengine.read import scan_snapshot_arrow
from dvengine.storage import is_object_uri, normalize_table_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from dvengine.api.dml import EngineSession
    from dvengine.api.optimize_builder import DeltaOptimizeBuilder
    from dvengine.api.table_builder import DeltaTableBuilder
    from dvengine.expressions import BoundPredicate

Timestamp = int | dt.datetime | str


class DeltaTable:
    """A Delta table, with delta-spark's ``DeltaTable`` API.

    Results follow how the table was opened. With a SparkSession (``forPath(spark, p)``,
    ``forName``, a builder's ``execute()`` under a session) they are delta-spark's: ``history``,
    ``detail``, ``vacuum``, ``restoreTo*`` and ``merge(...).execute()`` return DataFrames,
    ``delete``/``update`` return None. Opened without one (``forPath(None, p)``) they are plain
    Python data (lists/dicts), and no JVM starts unless the work needs Spark. The
    dvengine-native forms are also available whatever the table was opened with:
    :meth:`deleteMetrics`, :meth:`updateMetrics`, :meth:`historyRecords`, :meth:`detailRecord`,
    :meth:`vacuumReport`, :meth:`restoreMetrics` and ``DeltaMergeBuilder.executeMetrics()``.
    """

    # How to start a session when only Spark can do the work and none was given (the CLI sets it
    # to start a quiet one); None: dvengine's default local session.
    _spark_factory: Callable[[], SparkSession] | None = None

    def __init__(
        self,
        spark: SparkSession | None,
        path: str,
        alias: str | None = None,
        *,
        name: str | None = None,
        delta_spark_results: bool | None = None,
    ) -> None:
        self._spark = spark
        self._path = path
        self._alias = alias
        self._name = name
        # Fixed at construction: a session started later for Spark-only work must not change
        # what the methods return.
        self._delta_spark_results = spark is not None if delta_spark_results is None else delta_spark_results

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def forPath(
        cls,
        spark: SparkSession | None,
        path: str | os.PathLike[str],
        hadoopConf: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        """Open an existing table; ``spark`` may be None for Arrow-only use (no JVM).

        ``path``: a folder, ``file:`` URI or object-store URI (``s3://``, ``s3a://``, ``gs://``,
        ``az://``, ``abfss://``). ``hadoopConf`` is checked as delta-spark checks it (only
        ``fs.``/``dfs.`` keys); its ``fs.s3a.*`` settings, and the session's, configure the store,
        as do ``storage_options`` (delta-rs names, which win) and the ``AWS_*`` environment variables.
        """
        from dvengine.api.table_support import check_hadoop_conf, object_store_options

        check_hadoop_conf(hadoopConf)
        root = normalize_table_path(path, object_store_options(spark, path, hadoopConf, storage_options))
        # On a store a snapshot this process has cached answers without a request: every operation
        # loads the snapshot first, which raises TableNotFoundError if the table went away since.
        if not table_exists(root, cached=is_object_uri(root)):
            raise TableNotFoundError(f"{root} is not a Delta table: it has no _delta_log with commit files")
        return cls(spark, root)

    @classmethod
    def forName(cls, spark: SparkSession | None, tableOrViewName: str) -> DeltaTable:
        """Open a table by catalog name (``t``, ``db.t``) or as ``delta.`/path```; see dvengine.storage.catalog."""
        from dvengine.api.table_support import resolve_table_name

        root, name = resolve_table_name(spark, tableOrViewName)
        return cls(spark, root, name=name)

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE TABLE (error if the table exists)."""
        return new_builder(sparkSession, CREATE, _open_table)

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE TABLE IF NOT EXISTS (an existing table is returned untouched)."""
        return new_builder(sparkSession, CREATE_IF_NOT_EXISTS, _open_table)

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for REPLACE TABLE (error if the table does not exist)."""
        return new_builder(sparkSession, REPLACE, _open_table)

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """Builder for CREATE OR REPLACE TABLE."""
        return new_builder(sparkSession, CREATE_OR_REPLACE, _open_table)

    @classmethod
    def isDeltaTable(cls, spark: SparkSession | None, path: str | os.PathLike[str]) -> bool:
        """delta-spark's semantics (``isDeltaTable.strictCheck``, on by default): True when ``path`` is a
        table root or lies inside one (a partition folder, a data file) and that table has commits;
        False for a missing path, plain Parquet, a ``_delta_log`` without commits, or a path inside
        ``_delta_log``."""
        text = os.fspath(path)
        if isinstance(text, str) and os.path.isfile(text):  # a data file: its table is above it
            text = os.path.dirname(os.path.abspath(text))
        root = find_table_root(normalize_table_path(text))
        return root is not None and table_exists(root)

    def alias(self, name: str) -> DeltaTable:
        return DeltaTable(self._spark, self._path, name, name=self._name, delta_spark_results=self._delta_spark_results)

    # --- state -------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def spark(self) -> SparkSession:
        """The SparkSession to run jobs on: the one given, else the active one, else a local one."""
        if self._spark is None:
            if self._spark_factory is not None:
                self._spark = self._spark_factory()
            else:
                from dvengine.engine.spark.session import get_or_create_session

                self._spark = get_or_create_session()
        return self._spark

    def snapshot(self, version: int | None = None, timestamp: Timestamp | None = None) -> Snapshot:
        return load_snapshot(self._path, version=version, timestamp=timestamp)

    def version(self) -> int:
        return self.snapshot().version

    # --- reads -------------------------------------------------------------------------------

    def toArrow(
        self,
        version: int | None = None,
        timestamp: Timestamp | None = None,
        *,
        condition: str | Column | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Rows of the table (at a version or timestamp) with deletion vectors applied, without Spark.

        ``condition`` and ``columns`` work as in :meth:`scan`: the log prunes and skips files
        before any is opened, only the needed columns are read, and the condition is evaluated on
        the live rows with pyarrow (InvalidPredicateError for what it cannot evaluate exactly).
        """
        snapshot = self.snapshot(version, timestamp)
        predicate, wanted = self._scan_arguments(snapshot, condition, columns)
        return scan_snapshot_arrow(snapshot, predicate, wanted)

    def _scan_arguments(
        self, snapshot: Snapshot, condition: str | Column | None, columns: list[str] | None
    ) -> tuple[BoundPredicate | None, list[str] | None]:
        """``condition`` bound to the snapshot's schema and ``columns`` type-checked, for the reads
        that take them (:meth:`scan`, :meth:`toArrow`)."""
        from dvengine.expressions import parse_predicate

        predicate = None
        if condition is not None:
            predicate = parse_predicate(self._engines().condition_sql(condition, snapshot.schema), snapshot.schema)
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise TypeError(f"columns must be a list of column names, got {columns!r}")
        return predicate, columns

    def toDF(self, version: int | None = None, timestamp: Timestamp | None = None) -> DataFrame:
        """Rows of the table as a Spark DataFrame; deletion vectors are applied inside Spark."""
        from dvengine.engine.spark.reader import read_snapshot_df

        return read_snapshot_df(self.spark, self.snapshot(version, timestamp))

    def changes(
        self,
        startingVersion: int | None = None,
        endingVersion: int | None = None,
        startingTimestamp: Timestamp | None = None,
        endingTimestamp: Timestamp | None = None,
    ) -> Any:
        """The change data feed between two versions (inclusive), with ``_change_type``,
        ``_commit_version`` and ``_commit_timestamp``: a pyarrow.Table without a SparkSession, a
        Spark DataFrame with one (see spec_notes/change-data-feed.md)."""
        from dvengine.changes import read_changes

        rows = read_changes(self._path, startingVersion, endingVersion, startingTimestamp, endingTimestamp)
        if self._spark is None:
            return rows
        from dvengine.engine.spark.changes import changes_frame

        return changes_frame(self._spark, rows)

    def scan(
        self,
        condition: str | Column | None = None,
        columns: list[str] | None = None,
        version: int | None = None,
        timestamp: Timestamp | None = None,
    ) -> DataFrame:
        """Rows matching ``condition`` as a Spark DataFrame; partition pruning and stats skipping
        from the log choose the files before Spark sees any, and DVs are applied inside Spark."""
        from dvengine.engine.spark.reader import scan_snapshot

        snapshot = self.snapshot(version, timestamp)
        predicate, wanted = self._scan_arguments(snapshot, condition, columns)
        return scan_snapshot(self.spark, snapshot, predicate, wanted)

    # --- DML ---------------------------------------------------------------------------------

    def _engines(self) -> EngineSession:
        from dvengine.api.dml import EngineSession

        def start_session() -> SparkSession:
            return self.spark

        return EngineSession(self._spark, start_session)

    def delete(
        self, condition: str | Column | None = None, mode: str | None = None, engine: str | None = None
    ) -> dict[str, Any] | None:
        """Delete the rows matching ``condition`` (all rows when None).

        Returns None when the table was opened with a SparkSession (as delta-spark does), else the
        metrics of :meth:`deleteMetrics`. ``mode`` and ``engine`` are dvengine extensions, see there.
        """
        metrics = self.deleteMetrics(condition, mode, engine)
        return None if self._delta_spark_results else metrics

    def deleteMetrics(
        self, condition: str | Column | None = None, mode: str | None = None, engine: str | None = None
    ) -> dict[str, Any]:
        """dvengine-native DELETE: returns Delta-named metrics plus ``version`` and ``executionEngine``.

        ``mode``: "dv" (deletion vectors), "rewrite" (copy-on-write) or "auto" (DV below the
        rewrite threshold, rewrite above); default from Spark conf ``dvengine.dml.mode``.
        ``engine``: "local" (in-process, no JVM), "spark", or "auto" (local for candidate files
        up to ``dvengine.execution.localMaxBytes``); default from ``dvengine.execution.engine``.
        """
        from dvengine.api.dml import delete

        check_condition(condition)
        return delete(self._engines(), self._path, condition, mode, engine)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
        mode: str | None = None,
        engine: str | None = None,
    ) -> dict[str, Any] | None:
        """Set columns of the rows matching ``condition`` (all rows when None).

        ``set`` maps column names to SQL expressions or Columns, as in delta-spark. Returns None
        with a SparkSession (as delta-spark does), else the metrics of :meth:`updateMetrics`.
        """
        metrics = self.updateMetrics(condition, set, mode, engine)
        return None if self._delta_spark_results else metrics

    def updateMetrics(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
        mode: str | None = None,
        engine: str | None = None,
    ) -> dict[str, Any]:
        """dvengine-native UPDATE: metrics plus ``version``; ``mode`` and ``engine`` as for :meth:`deleteMetrics`."""
        from dvengine.api.dml import update

        assignments = check_column_mapping(set, "'set'")
        check_condition(condition)
        return update(self._engines(), self._path, condition, assignments, mode, engine)

    def merge(self, source: Any, condition: str | Column, source_alias: str | None = None) -> DeltaMergeBuilder:
        """Start a MERGE of ``source`` into this table, as in delta-spark.

        ``source``: a Spark DataFrame, pyarrow Table or pandas DataFrame. Refer to the target by
        this table's alias (``DeltaTable.alias("t")``) and to the source by ``source.alias("s")``
        (Spark) or ``source_alias="s"`` (Arrow/pandas); finish the builder with ``when...``
        clauses and ``execute()``.
        """
        return DeltaMergeBuilder(
            self._engines(), self._path, self._alias, source, condition, source_alias,
            delta_spark_results=self._delta_spark_results,
        )

    # --- maintenance -----------------------------------------------------------------------------

    def history(self, limit: int | None = None) -> DataFrame | list[dict[str, Any]]:
        """Commit history, newest first: a DataFrame with a SparkSession, else :meth:`historyRecords`."""
        records = self.historyRecords(limit)
        if not self._delta_spark_results:
            return records
        from dvengine.engine.spark.results import history_dataframe

        return history_dataframe(self.spark, records)

    def historyRecords(self, limit: int | None = None) -> list[dict[str, Any]]:
        """dvengine-native history: one dict per version with the commitInfo fields (timestamp in epoch ms)."""
        from dvengine.maintenance.history import history

        return history(self._path, limit)

    def detail(self) -> DataFrame | dict[str, Any]:
        """DESCRIBE DETAIL: a one-row DataFrame with a SparkSession, else :meth:`detailRecord`."""
        record = self.detailRecord()
        if not self._delta_spark_results:
            return record
        from dvengine.engine.spark.results import detail_dataframe

        return detail_dataframe(self.spark, record)

    def detailRecord(self) -> dict[str, Any]:
        """dvengine-native DESCRIBE DETAIL: a dict with delta-spark's columns."""
        from dvengine.maintenance.detail import detail
        from dvengine.storage.catalog import qualified_name

        return detail(self._path, None if self._name is None else qualified_name(self._name))

    def vacuum(
        self,
        retentionHours: float | None = None,
        dryRun: bool = False,
        enforceRetention: bool | None = None,
        vacuumType: str | None = None,
    ) -> DataFrame | dict[str, Any]:
        """VACUUM; with a SparkSession returns delta-spark's one-row DataFrame (``path``), else :meth:`vacuumReport`.

        delta-spark's ``vacuum(retentionHours)`` has no type argument (SQL has ``VACUUM t LITE``);
        ``vacuumType`` is dvengine's keyword for it, see :meth:`vacuumReport`."""
        report = self.vacuumReport(retentionHours, dryRun, enforceRetention, vacuumType)
        if not self._delta_spark_results:
            return report
        from dvengine.engine.spark.results import vacuum_dataframe

        return vacuum_dataframe(self.spark, self._path)

    def vacuumReport(
        self,
        retentionHours: float | None = None,
        dryRun: bool = False,
        enforceRetention: bool | None = None,
        vacuumType: str | None = None,
    ) -> dict[str, Any]:
        """dvengine-native VACUUM: delete files no version inside the retention window references.

        ``retentionHours`` None: the table's ``delta.deletedFileRetentionDuration`` (default 7 days).
        ``enforceRetention`` None: refuse a retention below that property unless Spark conf
        ``spark.databricks.delta.retentionDurationCheck.enabled`` is ``false`` (without a session:
        environment variable ``SPARK_DATABRICKS_DELTA_RETENTIONDURATIONCHECK_ENABLED``).
        ``vacuumType`` (dvengine's keyword; Delta's SQL ``VACUUM t LITE|FULL``): ``"FULL"`` lists the
        table, ``"LITE"`` takes the candidates from the log's removes and raises
        :class:`~dvengine.errors.CannotVacuumLiteError` when the log lost a commit it needs. None:
        LITE when ``spark.databricks.delta.vacuum.lite.enabled`` is true (without a session: env
        ``SPARK_DATABRICKS_DELTA_VACUUM_LITE_ENABLED``), else FULL, as Delta does.
        See spec_notes/retention-vacuum-purge.md.
        """
        from dvengine.api.table_support import retention_check_enabled, vacuum_type
        from dvengine.maintenance.vacuum import vacuum

        conf = self._engines().conf()
        kind = vacuum_type(conf, vacuumType)
        hours = retentionHours  # None: the table's retention (VACUUM START logs no specifiedRetentionMillis)
        if isinstance(hours, int) and not isinstance(hours, bool):
            hours = float(hours)
        enforce = retention_check_enabled(conf) if enforceRetention is None else enforceRetention
        return vacuum(
            self._path, retention_hours=hours, dry_run=dryRun, enforce_retention=enforce, vacuum_type=kind, conf=conf
        )

    def restoreToVersion(self, version: int) -> DataFrame | dict[str, Any]:
        """RESTORE to ``version``: delta-spark's metrics DataFrame with a SparkSession, else :meth:`restoreMetrics`."""
        check_int(version, "version")
        return self._restore_result(self.restoreMetrics(version=version))

    def restoreToTimestamp(self, timestamp: str) -> DataFrame | dict[str, Any]:
        """RESTORE as of ``timestamp`` (``yyyy-MM-dd[ HH:mm:ss[.ffffff]]``, UTC unless an offset is given)."""
        check_str(timestamp, "timestamp")
        return self._restore_result(self.restoreMetrics(timestamp=timestamp))

    def restoreMetrics(self, version: int | None = None, timestamp: Timestamp | None = None) -> dict[str, Any]:
        """dvengine-native RESTORE: Delta's restore metrics (snake_case, as in its DataFrame) plus ``version``."""
        from dvengine.maintenance.restore import restore

        return restore(self._path, version=version, timestamp=timestamp, conf=session_conf(self._spark))

    def _restore_result(self, metrics: dict[str, Any]) -> DataFrame | dict[str, Any]:
        if not self._delta_spark_results:
            return metrics
        from dvengine.engine.spark.results import metrics_dataframe
        from dvengine.maintenance.restore import RESTORE_METRIC_COLUMNS

        return metrics_dataframe(self.spark, metrics, RESTORE_METRIC_COLUMNS, nullable=True)

    def purge(self, condition: str | None = None, minDeletedRatio: float = 0.0) -> dict[str, Any]:
        """REORG ... APPLY (PURGE): rewrite files carrying DVs so deleted rows are physically gone."""
        from dvengine.engine.spark.purge import purge

        return purge(self.spark, self._path, condition, minDeletedRatio)

    # --- maintenance: OPTIMIZE, CLONE, CONVERT, protocol, manifests (dvengine/api/maintenance.py) ---

    def optimize(self) -> DeltaOptimizeBuilder:
        """OPTIMIZE builder: ``.where(partitionFilter).executeCompaction()``; runs without a JVM."""
        from dvengine.api.optimize_builder import DeltaOptimizeBuilder

        return DeltaOptimizeBuilder(self._spark, self._path)

    def clone(
        self, target: str, isShallow: bool = False, replace: bool = False, properties: dict[str, str] | None = None
    ) -> DeltaTable:
        """Clone the latest version to ``target`` (shallow: files referenced by absolute path)."""
        from dvengine.api.maintenance import clone_table

        return DeltaTable(self._spark, clone_table(self.snapshot(), target, isShallow, replace, properties, self._spark))

    def cloneAtVersion(
        self, version: int, target: str, isShallow: bool = False, replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        from dvengine.api.maintenance import check_int, clone_table

        snapshot = self.snapshot(version=check_int(version, "version"))
        return DeltaTable(self._spark, clone_table(snapshot, target, isShallow, replace, properties, self._spark))

    def cloneAtTimestamp(
        self, timestamp: str, target: str, isShallow: bool = False, replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        from dvengine.api.maintenance import check_str, clone_table

        snapshot = self.snapshot(timestamp=check_str(timestamp, "timestamp"))
        return DeltaTable(self._spark, clone_table(snapshot, target, isShallow, replace, properties, self._spark))

    @classmethod
    def convertToDelta(cls, sparkSession: SparkSession | None, identifier: str, partitionSchema: Any = None) -> DeltaTable:
        """Convert ``parquet.`/path``` in place; ``partitionSchema``: DDL string or StructType."""
        from dvengine.maintenance.convert import convert_to_delta

        return cls(sparkSession, convert_to_delta(identifier, partitionSchema, session_conf(sparkSession)))

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        from dvengine.api.maintenance import upgrade_table_protocol

        upgrade_table_protocol(self._path, readerVersion, writerVersion, session_conf(self._spark))

    def addFeatureSupport(self, featureName: str) -> None:
        from dvengine.api.maintenance import add_feature_support

        add_feature_support(self._path, featureName, session_conf(self._spark))

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        from dvengine.api.maintenance import drop_feature_support

        drop_feature_support(self._path, featureName, truncateHistory, session_conf(self._spark))

    def generate(self, mode: str) -> None:
        """GENERATE symlink_format_manifest (refused on versions with DVs, as in Delta)."""
        from dvengine.maintenance.manifest import generate

        generate(self._path, mode)

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r})"


def _open_table(spark: SparkSession | None, root: str, name: str | None) -> DeltaTable:
    """How a table builder hands back the table it created (see ``table_builder.TableOpener``)."""
    return DeltaTable(spark, root, name=name)
