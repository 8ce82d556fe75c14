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

from dvengine.errors import TableNotFoundError
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.read import read_snapshot_arrow
from dvengine.storage import normalize_table_path

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from dvengine.dml import EngineSession
    from dvengine.merge_builder import DeltaMergeBuilder
    from dvengine.optimize_builder import DeltaOptimizeBuilder

Timestamp = int | dt.datetime | str


class DeltaTable:
    # How to start a session when only Spark can do the work and none was given (the CLI sets it
    # to start a quiet one); None: dvengine's default local session.
    _spark_factory: Callable[[], SparkSession] | None = None

    def __init__(self, spark: SparkSession | None, path: str, alias: str | None = None) -> None:
        self._spark = spark
        self._path = path
        self._alias = alias

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def forPath(cls, spark: SparkSession | None, path: str | os.PathLike[str]) -> DeltaTable:
        """Open an existing table; ``spark`` may be None for Arrow-only use (no JVM)."""
        root = normalize_table_path(path)
        if not table_exists(root):
            raise TableNotFoundError(f"{root} is not a Delta table: it has no _delta_log with commit files")
        return cls(spark, root)

    @classmethod
    def isDeltaTable(cls, spark: SparkSession | None, path: str | os.PathLike[str]) -> bool:
        return table_exists(normalize_table_path(path))

    def alias(self, name: str) -> DeltaTable:
        return DeltaTable(self._spark, self._path, name)

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

    def toArrow(self, version: int | None = None, timestamp: Timestamp | None = None) -> pa.Table:
        """Rows of the table (at a version or timestamp) with deletion vectors applied, without Spark."""
        return read_snapshot_arrow(self.snapshot(version, timestamp))

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
        from dvengine.expressions import parse_predicate

        snapshot = self.snapshot(version, timestamp)
        predicate = None
        if condition is not None:
            predicate = parse_predicate(self._engines().condition_sql(condition, snapshot.schema), snapshot.schema)
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise TypeError(f"columns must be a list of column names, got {columns!r}")
        return scan_snapshot(self.spark, snapshot, predicate, columns)

    # --- DML ---------------------------------------------------------------------------------

    def _engines(self) -> EngineSession:
        from dvengine.dml import EngineSession

        def start_session() -> SparkSession:
            return self.spark

        return EngineSession(self._spark, start_session)

    def delete(
        self, condition: str | Column | None = None, mode: str | None = None, engine: str | None = None
    ) -> dict[str, Any]:
        """Delete the rows matching ``condition`` (all rows when None); returns Delta-named metrics.

        ``mode``: "dv" (deletion vectors), "rewrite" (copy-on-write) or "auto" (DV below the
        rewrite threshold, rewrite above); default from Spark conf ``dvengine.dml.mode``.
        ``engine``: "local" (in-process, no JVM), "spark", or "auto" (local for candidate files
        up to ``dvengine.execution.localMaxBytes``); default from ``dvengine.execution.engine``.
        """
        from dvengine.dml import delete

        return delete(self._engines(), self._path, condition, mode, engine)

    def update(
        self,
        condition: str | Column | None = None,
        set: Mapping[str, str | Column] | None = None,
        mode: str | None = None,
        engine: str | None = None,
    ) -> dict[str, Any]:
        """Set columns of the rows matching ``condition`` (all rows when None); returns metrics.

        ``set`` maps column names to SQL expressions or Columns, as in delta-spark; ``mode`` and
        ``engine`` as for :meth:`delete`.
        """
        from dvengine.dml import update

        return update(self._engines(), self._path, condition, {} if set is None else set, mode, engine)

    def merge(self, source: Any, condition: str | Column, source_alias: str | None = None) -> DeltaMergeBuilder:
        """Start a MERGE of ``source`` into this table, as in delta-spark.

        ``source``: a Spark DataFrame, pyarrow Table or pandas DataFrame. Refer to the target by
        this table's alias (``DeltaTable.alias("t")``) and to the source by ``source.alias("s")``
        (Spark) or ``source_alias="s"`` (Arrow/pandas); finish the builder with ``when...``
        clauses and ``execute()``.
        """
        from dvengine.merge_builder import DeltaMergeBuilder

        return DeltaMergeBuilder(self._engines(), self._path, self._alias, source, condition, source_alias)

    # --- maintenance -----------------------------------------------------------------------------

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Commit history, newest first: one dict per version with the commitInfo fields."""
        from dvengine.maintenance.history import history

        return history(self._path, limit)

    def vacuum(self, retentionHours: float = 168.0, dryRun: bool = False, enforceRetention: bool = True) -> dict[str, Any]:
        """Delete files no version inside the retention window references; see spec_notes/retention-vacuum-purge.md."""
        from dvengine.maintenance.vacuum import vacuum

        return vacuum(self._path, retention_hours=retentionHours, dry_run=dryRun, enforce_retention=enforceRetention)

    def purge(self, condition: str | None = None, minDeletedRatio: float = 0.0) -> dict[str, Any]:
        """REORG ... APPLY (PURGE): rewrite files carrying DVs so deleted rows are physically gone."""
        from dvengine.engine.spark.purge import purge

        return purge(self.spark, self._path, condition, minDeletedRatio)

    # --- maintenance: OPTIMIZE, CLONE, CONVERT, protocol, manifests (dvengine/maintenance_api.py) ---

    def optimize(self) -> DeltaOptimizeBuilder:
        """OPTIMIZE builder: ``.where(partitionFilter).executeCompaction()``; runs without a JVM."""
        from dvengine.optimize_builder import DeltaOptimizeBuilder

        return DeltaOptimizeBuilder(self._spark, self._path)

    def clone(
        self, target: str, isShallow: bool = False, replace: bool = False, properties: dict[str, str] | None = None
    ) -> DeltaTable:
        """Clone the latest version to ``target`` (shallow: files referenced by absolute path)."""
        from dvengine.maintenance_api import clone_table

        return DeltaTable(self._spark, clone_table(self.snapshot(), target, isShallow, replace, properties))

    def cloneAtVersion(
        self, version: int, target: str, isShallow: bool = False, replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        from dvengine.maintenance_api import check_int, clone_table

        snapshot = self.snapshot(version=check_int(version, "version"))
        return DeltaTable(self._spark, clone_table(snapshot, target, isShallow, replace, properties))

    def cloneAtTimestamp(
        self, timestamp: str, target: str, isShallow: bool = False, replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        from dvengine.maintenance_api import check_str, clone_table

        snapshot = self.snapshot(timestamp=check_str(timestamp, "timestamp"))
        return DeltaTable(self._spark, clone_table(snapshot, target, isShallow, replace, properties))

    @classmethod
    def convertToDelta(cls, sparkSession: SparkSession | None, identifier: str, partitionSchema: Any = None) -> DeltaTable:
        """Convert ``parquet.`/path``` in place; ``partitionSchema``: DDL string or StructType."""
        from dvengine.maintenance.convert import convert_to_delta

        return cls(sparkSession, convert_to_delta(identifier, partitionSchema))

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        from dvengine.maintenance_api import upgrade_table_protocol

        upgrade_table_protocol(self._path, readerVersion, writerVersion)

    def addFeatureSupport(self, featureName: str) -> None:
        from dvengine.maintenance_api import add_feature_support

        add_feature_support(self._path, featureName)

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        from dvengine.maintenance_api import drop_feature_support

        drop_feature_support(self._path, featureName, truncateHistory)

    def generate(self, mode: str) -> None:
        """GENERATE symlink_format_manifest (refused on versions with DVs, as in Delta)."""
        from dvengine.maintenance.manifest import generate

        generate(self._path, mode)

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r})"

