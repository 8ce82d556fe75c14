"""OPTIMIZE ... ZORDER BY: which columns are accepted, which files are rewritten, what is recorded.

Delta's rules (``OptimizeTableCommand.validateZorderByColumns``, ``ZOrderStrategy``):

- a Z-order column must be a data column: a partition column is refused
  (DELTA_ZORDERING_ON_PARTITION_COLUMN), an unknown one too (DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST),
  names resolve case-insensitively;
- every Z-order column must be one stats are collected for, since clustering a column that data
  skipping cannot see buys nothing (DELTA_ZORDERING_ON_COLUMN_WITHOUT_STATS; the check is off
  with ``spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled=false``);
- a clustered table (``clustering`` writer feature) refuses ZORDER BY: its layout is the
  clustering columns' (DELTA_CLUSTERING_WITH_ZORDER_BY);
- every live file of each selected partition is rewritten, as one bin per partition (no size or
  DV filter, and a partition of a single file is rewritten too); the rows are cut into
  ``max(1, partition bytes / optimize.maxFileSize)`` files along the curve;
- the commit is an ordinary OPTIMIZE (``dataChange=false``) whose ``zOrderBy`` parameter lists
  the columns, and the result's ``zOrderStats`` reports strategy ``all``.

The row work (range ids, bit interleaving, writing) is the executor's: it is handed in as a
:data:`~dvengine.maintenance.optimize.BinRewriter`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dvengine.commands.options import ConfLookup, conf_number
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import Snapshot
from dvengine.maintenance.optimize import (
    Bin,
    BinRewriter,
    OptimizePlan,
    files_by_partition,
    operation_parameters,
    run_optimize,
)
from dvengine.protocol.actions import AddFile
from dvengine.protocol.features import writer_features
from dvengine.writing.stats import indexed_leaves, num_indexed_cols

CONF_CHECK_STATS = "spark.databricks.delta.optimize.zorder.checkStatsCollection.enabled"
CONF_NUM_RANGES = "spark.databricks.io.skipping.mdc.rangeId.max"
DEFAULT_NUM_RANGES = 1000
CLUSTERING_FEATURE = "clustering"


def is_clustered(snapshot: Snapshot) -> bool:
    """Delta's ``ClusteredTableUtils.isSupported``: the ``clustering`` writer feature is listed."""
    return CLUSTERING_FEATURE in writer_features(snapshot.protocol)


def num_ranges(conf: Callable[[str], str | None]) -> int:
    """``spark.databricks.io.skipping.mdc.rangeId.max`` (Delta: must be greater than 1)."""
    value = int(conf_number(conf, CONF_NUM_RANGES, DEFAULT_NUM_RANGES, int))
    if value <= 1:
        raise InvalidArgumentError(f"'{CONF_NUM_RANGES}' must be greater than 1, got {value}")
    return value


def check_stats_enabled(conf: Callable[[str], str | None]) -> bool:
    raw = conf(CONF_CHECK_STATS)
    if raw is None:
        return True
    if raw.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(f"{CONF_CHECK_STATS} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def columns_with_stats(snapshot: Snapshot) -> set[str]:
    """Logical names (lower case) of the top-level data columns writers collect stats for."""
    parts = {p.lower() for p in snapshot.partition_columns}
    data = [f for f in snapshot.schema.fields if f.name.lower() not in parts]
    leaves = indexed_leaves(snapshot.schema, {f.physical_name for f in data}, num_indexed_cols(snapshot.configuration))
    by_physical = {f.physical_name: f.name for f in data}
    return {by_physical[leaf.path[0]].lower() for leaf in leaves if leaf.path[0] in by_physical}


def resolve_zorder_columns(snapshot: Snapshot, columns: Sequence[str], check_stats: bool) -> list[str]:
    """The schema's spelling of each Z-order column, after Delta's checks (see the module docstring)."""
    if is_clustered(snapshot):
        raise OperationNotAllowedError(
            "OPTIMIZE command for Delta table with clustering cannot specify ZORDER BY. "
            f"Please remove ZORDER BY ({', '.join(columns)}). (table {snapshot.table_root}; nothing was written)"
        )
    if not columns:
        raise InvalidArgumentError("ZORDER BY needs at least one column")
    by_lower = {f.name.lower(): f for f in snapshot.schema.fields}
    partitions = {p.lower() for p in snapshot.partition_columns}
    with_stats = columns_with_stats(snapshot) if check_stats else set()
    resolved: list[str] = []
    without_stats: list[str] = []
    for name in columns:
        key = name.lower()
        if key in partitions:
            raise InvalidArgumentError(
                f"{name} is a partition column. Z-Ordering can only be performed on data columns "
                f"(table {snapshot.table_root}; nothing was written)"
            )
        field = by_lower.get(key)
        if field is None:
            if "." in name and name.split(".", 1)[0].lower() in by_lower:
                raise UnsupportedFeatureError(f"ZORDER BY a nested field ({name}) is not supported by dvengine")
            raise InvalidArgumentError(
                f"Z-Ordering column {name} does not exist in data schema "
                f"(columns: {', '.join(f.name for f in snapshot.schema.fields if f.name.lower() not in partitions)})"
            )
        if check_stats and key not in with_stats:
            without_stats.append(name)
        if field.name not in resolved:
            resolved.append(field.name)
    if without_stats:
        raise InvalidArgumentError(
            f"Z-Ordering on [{', '.join(without_stats)}] will be ineffective, because we currently do not collect "
            f"stats for these columns (delta.dataSkippingNumIndexedCols = {num_indexed_cols(snapshot.configuration)}). "
            f"You can disable this check by setting SET {CONF_CHECK_STATS} = false"
        )
    return resolved


def plan_zorder(snapshot: Snapshot, condition: str | None) -> OptimizePlan:
    """Every live file of each partition the partition-only ``condition`` selects, one bin per partition."""
    predicate, candidates, groups = files_by_partition(snapshot, condition)
    plan = OptimizePlan(snapshot, predicate, candidates)
    plan.bins = [Bin(dict(files[0].partition_values), tuple(sorted(files, key=lambda a: a.size))) for files in groups]
    return plan


def zorder_stats(plan: OptimizePlan) -> dict[str, Any] | None:
    """Delta's ZOrderStats for strategy ``all``: every input file counts as an 'other' (non-cube) file."""
    if not plan.bins:
        return None
    removed = plan.files
    inputs = {"num": len(removed), "size": sum(f.size for f in removed)}
    return {
        "strategyName": "all",
        "inputCubeFiles": {"num": 0, "size": 0},
        "inputOtherFiles": inputs,
        "inputNumCubes": 0,
        "mergedFiles": inputs,
        "numOutputCubes": len(plan.bins),
        "mergedNumCubes": None,
    }


def target_file_count(files: Sequence[AddFile], max_file_size: int) -> int:
    """Delta's ``approxNumFiles``: ``max(1, bin bytes / maxFileSize)`` (OPTIMIZE's
    ``optimize.maxFileSize``, or auto compaction's ``autoCompact.maxFileSize``)."""
    total = sum(f.size for f in files)
    return max(1, total // max_file_size) if max_file_size > 0 else 1


def run_zorder(
    plan: OptimizePlan, columns: Sequence[str], rewrite_bin: BinRewriter, conf: ConfLookup | None = None
) -> tuple[dict[str, Any], int | None]:
    """Rewrite each partition along the Z-order curve and commit once (see :func:`run_optimize`)."""
    metrics, version = run_optimize(plan, rewrite_bin, parameters=operation_parameters(plan.predicate, columns), conf=conf)
    metrics["zOrderStats"] = zorder_stats(plan)
    return metrics, version
