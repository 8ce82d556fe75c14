"""DeltaOptimizeBuilder: ``DeltaTable.optimize().where(...).executeCompaction()`` / ``.executeZOrderBy(...)`` as in delta-spark.

The builder only binds the call: the planning and commit rules are in
:mod:`dvengine.maintenance.optimize`, the file rewriting on the embedded executor. With a
SparkSession the result is the DataFrame delta-spark returns (one row: ``path``, ``metrics``);
without one, the same row as a dict, so scripts need no JVM to compact a small table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dvengine.commands.options import session_conf
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance import clustering, zorder
from dvengine.maintenance.optimize import OptimizeSettings, plan_optimize, run_optimize

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class DeltaOptimizeBuilder:
    """Collects the partition filter; ``executeCompaction`` / ``executeZOrderBy`` run OPTIMIZE."""

    def __init__(self, spark: SparkSession | None, table_root: str) -> None:
        self._spark = spark
        self._root = table_root
        self._filters: list[str] = []

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        """Limit OPTIMIZE to the partitions matching a SQL condition on partition columns."""
        if not isinstance(partitionFilter, str):
            raise TypeError(f"partitionFilter must be a SQL string, got {type(partitionFilter).__name__}")
        self._filters.append(partitionFilter)
        return self

    def _condition(self) -> str | None:
        if not self._filters:
            return None
        if len(self._filters) == 1:
            return self._filters[0]
        return " AND ".join(f"({f})" for f in self._filters)

    def _conf(self) -> Callable[[str], str | None]:
        return session_conf(self._spark)

    def _settings(self) -> OptimizeSettings:
        return OptimizeSettings.from_conf(self._conf())

    def _result(self, metrics: dict[str, Any]) -> Any:
        if self._spark is None:
            return {"path": self._root, "metrics": metrics}
        from dvengine.engine.spark.maintenance_frames import optimize_result_frame

        return optimize_result_frame(self._spark, self._root, metrics)

    def executeCompaction(self, *, full: bool = False) -> Any:
        """Compact small files (and files with many DV-deleted rows) per partition.

        Returns a Spark DataFrame ``(path, metrics)`` when the table handle has a session, else
        ``{"path": ..., "metrics": {...}}`` with Delta's OptimizeMetrics field names.

        ``full=True`` is SQL's ``OPTIMIZE t FULL`` (a dvengine keyword: delta-spark's builder has
        no FULL): on a clustered table, files clustered by columns the table no longer has, or by
        another clustering provider, are reclustered too; any other table raises
        :class:`~dvengine.errors.OperationNotAllowedError` (DELTA_OPTIMIZE_FULL_NOT_SUPPORTED).
        """
        from dvengine.engine.local.optimize import rewrite_files

        if type(full) is not bool:
            raise TypeError(f"full must be a bool, got {type(full).__name__}")
        settings = self._settings()
        snapshot = load_snapshot(self._root)
        columns = clustering.clustering_columns(snapshot)
        if full:
            clustering.check_optimize_full(snapshot, columns, self._condition(), ())
        if columns:  # a clustered table is clustered by OPTIMIZE, as in Delta
            return self._result(self._cluster(snapshot, columns, settings, full))
        plan = plan_optimize(snapshot, self._condition(), settings)
        metrics, _version = run_optimize(plan, rewrite_files, conf=self._conf())
        return self._result(metrics)

    def _cluster(self, snapshot: Snapshot, columns: list[str], settings: OptimizeSettings, full: bool) -> dict[str, Any]:
        """Liquid clustering of what is not yet clustered (Delta's ClusteringStrategy)."""
        from dvengine.engine.local.cluster_rewrite import clustering_rewriter

        conf = self._conf()
        clustering.check_optimize_arguments(snapshot, self._condition())
        min_cube, bin_size = clustering.cube_sizes(conf)
        plan = clustering.plan_clustering(snapshot, columns, min_cube, bin_size, full)
        rewriter = clustering_rewriter(columns, conf, settings.max_file_size)
        metrics, _version = clustering.run_clustering(plan, columns, rewriter, conf, full)
        return metrics


    def executeZOrderBy(self, *cols: str | list[str] | tuple[str, ...]) -> Any:
        """Rewrite every file of the selected partitions in Z-order over ``cols`` (Delta's rules:
        :mod:`dvengine.maintenance.zorder`), so that min/max stats skip files on each of them.

        Returns what :meth:`executeCompaction` returns, with ``zOrderStats`` filled.
        """
        from dvengine.engine.local.cluster_rewrite import curve_rewriter
        from dvengine.engine.local.curves import ZORDER

        flat: list[object] = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else list(cols)
        for c in flat:
            if type(c) is not str:
                raise TypeError(f"Z-order column must be str. Found {c} with type {type(c)}")
        if not flat:  # Delta: an empty ZORDER BY list is an ordinary OPTIMIZE
            return self.executeCompaction()
        conf = self._conf()
        settings = self._settings()
        snapshot = load_snapshot(self._root)
        columns = zorder.resolve_zorder_columns(snapshot, [str(c) for c in flat], zorder.check_stats_enabled(conf))
        plan = zorder.plan_zorder(snapshot, self._condition())
        rewriter = curve_rewriter(
            columns, ZORDER, zorder.num_ranges(conf), lambda files: zorder.target_file_count(files, settings.max_file_size)
        )
        metrics, _version = zorder.run_zorder(plan, columns, rewriter, conf)
        return self._result(metrics)
