"""Auto compaction: after a DML or write commits, compact the partitions small files piled up in.

Named and decided as Delta names them (AutoCompactBase / AutoCompactUtils in delta-spark):

- on/off: the Spark conf ``spark.databricks.delta.autoCompact.enabled`` wins when set; else the
  deprecated table property ``delta.autoOptimize=true`` turns it on; else the table property
  ``delta.autoOptimize.autoCompact``; else off. Values are ``true`` / ``false``; anything else
  raises InvalidArgumentError naming the key and value (Delta's invalidAutoCompactType).
- sizes: ``spark.databricks.delta.autoCompact.maxFileSize`` (128 MiB) bounds a bin and the files
  it writes; a file below ``...autoCompact.minFileSize`` (default maxFileSize / 2) is small.
- trigger: a partition is compacted when it holds at least ``...autoCompact.minNumFiles`` (50)
  small files, counted over the whole table as the snapshot lists them. Open-source Delta counts
  only the files the committing session added (delta-io/delta#4487, #4045), so a stream of
  MERGEs that each add one file never reaches the threshold; counting the table's files makes
  the bound hold whoever wrote them. A partition also qualifies when one of its files has more
  than OPTIMIZE's ``maxDeletedRowsRatio`` of its rows deleted by its DV (such a file is rewritten
  even alone in its bin: purging it is the point). dvengine adds one trigger of its own while
  Delta's minNumFiles is not set: ``dvengine.autoCompact.minNumTinyFiles`` (10) files under
  ``...tinyFileSize`` (1 MiB) have those tiny files compacted, since readers pay per file.
- the commit: one OPTIMIZE commit (``dataChange=false`` adds and removes) whose commitInfo
  operation is ``OPTIMIZE`` with ``operationParameters.auto = true``, the compacted partitions as
  ``predicate``, as Delta's ``DeltaOperations.Optimize(auto = true)`` records it.
- clustered tables: once the trigger fires, the files are chosen and rewritten as OPTIMIZE
  clusters them (Delta's AutoCompact hands a clustered table to the same ClusteringStrategy), so
  a stream into a clustered table stays clustered; ``clusterBy`` is recorded with ``auto``.
- failure: losing a race to a concurrent writer (any CommitConflictError) is logged and the
  user's command still succeeds: its own commit is already in the log. Other errors propagate
  with the committed version named, because hiding an I/O failure would hide a broken table.

Whether a table dvengine creates turns it on by default is decided in spec_notes/auto-compaction.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvengine.commands.options import ConfLookup, conf_number
from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.errors import CommitConflictError, InvalidArgumentError
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance.clustering import clustering_columns, clustering_parameters, cube_sizes, plan_clustering
from dvengine.maintenance.optimize import (
    DEFAULT_MAX_DELETED_ROWS_RATIO,
    OPERATION,
    Bin,
    BinRewriter,
    OptimizePlan,
    files_by_partition,
    max_deleted_rows_ratio,
    optimize_parameters,
    pack_bins,
    run_optimize,
    too_many_deleted_rows,
)
from dvengine.protocol.actions import AddFile

_LOG = logging.getLogger(__name__)

CONF_ENABLED = "spark.databricks.delta.autoCompact.enabled"
CONF_MIN_NUM_FILES = "spark.databricks.delta.autoCompact.minNumFiles"
CONF_MAX_FILE_SIZE = "spark.databricks.delta.autoCompact.maxFileSize"
CONF_MIN_FILE_SIZE = "spark.databricks.delta.autoCompact.minFileSize"
PROPERTY_AUTO_COMPACT = "delta.autoOptimize.autoCompact"
PROPERTY_AUTO_OPTIMIZE = "delta.autoOptimize"  # deprecated by Delta, still honoured first
DEFAULT_MIN_NUM_FILES = 50
DEFAULT_MAX_FILE_SIZE = 128 * 1024 * 1024
# dvengine's own: the share of a larger file's size the smaller picked files must reach before it
# joins a compaction (size tiers). 0.5 was chosen by simulating the soak's stream (see
# spec_notes/auto-compaction.md): 1.0 left tiers of equal size unmerged until the count fallback
# fired, lower values rewrote large files more often.
CONF_TIER_FRACTION = "dvengine.autoCompact.tierFraction"
TIER_FRACTION = 0.5
# dvengine's own second trigger, for tiny files, OFF unless ``minNumTinyFiles`` is set (e.g. 10): a
# partition with ``minNumTinyFiles`` files under ``tinyFileSize`` has those compacted (size-tiered)
# even before Delta's ``minNumFiles`` small files pile up. A reader pays ~0.1-0.3 ms per file
# whatever its size, so up to 49 tiny files made the soak's end table read 1.3-1.5x a fresh one
# over 2,000 rounds; but over 10,000 rounds the trigger cost more than it saved: 1,834 compaction
# rounds instead of 226, p50 41 vs 26 ms, total 514 vs 327 s, read 1.79x vs 1.37x, 2.9 vs 1.6 GB
# written (same code, one setting apart; results/soak/merged-46f3963-10000 and
# tiny-off-46f3963-10000). So Delta's thresholds alone are the default; 0 turns it off; setting
# Delta's minNumFiles leaves it off unless set too. spec_notes/auto-compaction.md ("Tiny files").
CONF_TINY_FILE_SIZE = "dvengine.autoCompact.tinyFileSize"
CONF_MIN_NUM_TINY_FILES = "dvengine.autoCompact.minNumTinyFiles"
DEFAULT_TINY_FILE_SIZE = 1024 * 1024
DEFAULT_MIN_NUM_TINY_FILES = 0  # off; see above

# a clustered table's clustering columns and autoCompact.maxFileSize -> the rewriter that writes a
# bin as a new ZCube (the engine's half, as BinRewriter is for plain compaction)
ClusteringRewriter = Callable[[Sequence[str], int], BinRewriter]


def _flag(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InvalidArgumentError(
            f"{key}={raw!r} is not a valid auto compaction setting: the allowed values are 'true' and 'false'"
        )
    return value == "true"


def auto_compact_enabled(conf: ConfLookup, configuration: Mapping[str, str]) -> bool:
    """Delta's getAutoCompactType order: session conf, then the deprecated property, then the property."""
    raw = conf(CONF_ENABLED)
    if raw is not None and raw != "":
        return _flag(CONF_ENABLED, raw)
    legacy = configuration.get(PROPERTY_AUTO_OPTIMIZE)
    if legacy is not None and _flag(PROPERTY_AUTO_OPTIMIZE, legacy):
        return True
    prop = configuration.get(PROPERTY_AUTO_COMPACT)
    return prop is not None and _flag(PROPERTY_AUTO_COMPACT, prop)


@dataclass(frozen=True)
class AutoCompactSettings:
    min_num_files: int = DEFAULT_MIN_NUM_FILES
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    min_file_size: int = DEFAULT_MAX_FILE_SIZE // 2
    max_deleted_rows_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO
    tier_fraction: float = TIER_FRACTION
    tiny_file_size: int = DEFAULT_TINY_FILE_SIZE
    min_num_tiny_files: int = DEFAULT_MIN_NUM_TINY_FILES  # 0: no tiny-file trigger

    @classmethod
    def from_conf(cls, conf: ConfLookup) -> AutoCompactSettings:
        max_size = int(conf_number(conf, CONF_MAX_FILE_SIZE, DEFAULT_MAX_FILE_SIZE, int))
        settings = cls(
            min_num_files=int(conf_number(conf, CONF_MIN_NUM_FILES, DEFAULT_MIN_NUM_FILES, int)),
            max_file_size=max_size,
            min_file_size=int(conf_number(conf, CONF_MIN_FILE_SIZE, max_size // 2, int)),
            max_deleted_rows_ratio=max_deleted_rows_ratio(conf),
            tier_fraction=float(conf_number(conf, CONF_TIER_FRACTION, TIER_FRACTION, float)),
            tiny_file_size=int(conf_number(conf, CONF_TINY_FILE_SIZE, DEFAULT_TINY_FILE_SIZE, int)),
            min_num_tiny_files=int(conf_number(conf, CONF_MIN_NUM_TINY_FILES, DEFAULT_MIN_NUM_TINY_FILES, int)),
        )
        if settings.min_num_files < 1:
            raise InvalidArgumentError(f"{CONF_MIN_NUM_FILES} must be at least 1, got {settings.min_num_files}")
        if settings.max_file_size <= 0:
            raise InvalidArgumentError(f"{CONF_MAX_FILE_SIZE} must be positive, got {settings.max_file_size}")
        if settings.min_file_size < 0:
            raise InvalidArgumentError(f"{CONF_MIN_FILE_SIZE} must not be negative, got {settings.min_file_size}")
        if not settings.tier_fraction > 0:
            raise InvalidArgumentError(f"{CONF_TIER_FRACTION} must be positive, got {settings.tier_fraction}")
        if settings.min_num_tiny_files < 0 or settings.min_num_tiny_files == 1:
            raise InvalidArgumentError(
                f"{CONF_MIN_NUM_TINY_FILES} must be 0 (off) or at least 2, got {settings.min_num_tiny_files}"
            )
        if settings.tiny_file_size < 0:
            raise InvalidArgumentError(f"{CONF_TINY_FILE_SIZE} must not be negative, got {settings.tiny_file_size}")
        return settings


def _partition_sql(snapshot: Snapshot, add: AddFile) -> str:
    """The compacted partition as recorded in commitInfo (text for people; nothing parses it back)."""
    parts = []
    for logical, key, _type in snapshot.partition_keys:
        raw = add.partition_values.get(key, add.partition_values.get(logical))
        quoted = "'" + raw.replace("'", "\\'") + "'" if raw is not None else None
        parts.append(f"({logical} IS NULL)" if quoted is None else f"({logical} = {quoted})")
    return " AND ".join(parts)


def _tier_prefix(small: list[AddFile], fraction: float) -> list[AddFile]:
    """Smallest first, while the files taken add up to ``fraction`` of the next one's size."""
    picked: list[AddFile] = []
    total = 0
    for f in sorted(small, key=lambda f: f.size):
        if picked and total < fraction * f.size:
            break
        picked.append(f)
        total += f.size
    return picked


def tiered_pick(small: list[AddFile], min_num_files: int, fraction: float = TIER_FRACTION) -> list[AddFile]:
    """The small files of one partition worth merging now, size-tiered as an LSM tree merges.

    Smallest first; a larger file joins only while the files already picked add up to at least
    ``fraction`` of its size, so a file is rewritten again only once the data merged into it has
    grown by a constant factor: each row is rewritten O(log(rows streamed)) times, and a
    compaction costs about what the new small files weigh, not what the table weighs (the old
    pick rewrote the 1M-row base file, "small" under 64 MiB, every ~50 rounds of a stream: the
    p99 of the soak). If the tiers alone would leave ``min_num_files`` or more small files (many
    files of similar size), the smallest are added until about half of ``min_num_files`` remain,
    which keeps the files-per-partition bound and spaces compactions out.
    """
    picked = _tier_prefix(small, fraction)
    floor = len(small) - min_num_files // 2 + 1
    if len(small) >= min_num_files and len(picked) < floor:
        picked = sorted(small, key=lambda f: f.size)[:floor]
    return picked


def plan_auto_compaction(snapshot: Snapshot, settings: AutoCompactSettings) -> OptimizePlan | None:
    """The bins to compact, or None when no partition reaches a trigger.

    A partition with ``min_num_files`` small files has its size-tiered pick compacted
    (``tiered_pick``); else one with ``min_num_tiny_files`` files under ``tiny_file_size`` has
    the size-tiered pick of those tiny files compacted (dvengine's own trigger). A file whose DV hides more than ``max_deleted_rows_ratio`` of its rows is
    purged as part of that pick, or, when no pick is due, alone (packed with other such files)
    unless it sits in the smallest tier, which the next count-triggered compaction merges anyway:
    rewriting a 100-row stream file alone because 5 of its rows were updated bought nothing (it
    stays a small file) and cost a commit every few rounds of the growing-key soak.
    """
    _predicate, candidates, groups = files_by_partition(snapshot, None)
    plan = OptimizePlan(snapshot, None, candidates)
    for files in groups:
        small = [f for f in files if f.size < settings.min_file_size]
        heavy = [f for f in files if too_many_deleted_rows(f, settings.max_deleted_rows_ratio)]
        due = len(small) >= settings.min_num_files
        tiny = [f for f in small if f.size < settings.tiny_file_size]
        tiny_due = not due and 0 < settings.min_num_tiny_files <= len(tiny)
        if not due and not tiny_due:
            tier = _tier_prefix(small, settings.tier_fraction)
            waiting = {f.key for f in tier} if len(tier) > 1 else set()
            heavy = [f for f in heavy if f.key not in waiting]
        if not due and not tiny_due and not heavy:
            continue
        if due:
            picked = tiered_pick(small, settings.min_num_files, settings.tier_fraction)
        elif tiny_due:
            picked = tiered_pick(tiny, settings.min_num_tiny_files, settings.tier_fraction)
        else:
            picked = []
        picked_keys = {f.key for f in picked}
        for packed in pack_bins(picked, settings.max_file_size):
            plan.bins.append(Bin(dict(packed[0].partition_values), tuple(packed)))
        binned = {f.key for b in plan.bins for f in b.files}
        rest = [f for f in heavy if f.key not in picked_keys]
        for packed in pack_bins(rest, settings.max_file_size):
            plan.bins.append(Bin(dict(packed[0].partition_values), tuple(packed)))
        binned |= {f.key for b in plan.bins for f in b.files}
        for f in heavy:  # a DV-heavy file alone in its bin is still rewritten: purging it is the point
            if f.key not in binned:
                plan.bins.append(Bin(dict(f.partition_values), (f,)))
    return plan if plan.bins else None


def auto_compaction_parameters(plan: OptimizePlan) -> dict[str, ParameterValue]:
    """operationParameters of DeltaOperations.Optimize(predicate, auto = true)."""
    predicates = sorted({_partition_sql(plan.snapshot, b.files[0]) for b in plan.bins} - {""})
    return optimize_parameters(delta_json(predicates), auto=True)


def clustering_plan(
    snapshot: Snapshot, columns: Sequence[str], conf: ConfLookup, settings: AutoCompactSettings,
    clustering_rewriter: ClusteringRewriter,
) -> tuple[OptimizePlan, BinRewriter, dict[str, ParameterValue]]:
    """Auto compaction of a clustered table clusters, as Delta's does (AutoCompact runs the same
    OptimizeExecutor, whose ClusteringStrategy a clustered table selects): unclustered files and
    ZCubes under ``minCubeSize`` are rewritten along the curve as new ZCubes, bounded by
    ``autoCompact.maxFileSize``; the commit records ``clusterBy`` and ``auto: true``."""
    min_cube, bin_size = cube_sizes(conf)
    plan = plan_clustering(snapshot, columns, min_cube, bin_size)
    return plan, clustering_rewriter(columns, settings.max_file_size), clustering_parameters(columns, auto=True)


def maybe_auto_compact(
    table_root: str,
    committed_version: int,
    conf: ConfLookup,
    rewrite_bin: BinRewriter,
    clustering_rewriter: ClusteringRewriter,
    load: Callable[[str], Snapshot] = load_snapshot,
    configuration: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Run auto compaction after ``committed_version`` when enabled and a partition qualifies.

    ``rewrite_bin`` compacts a bin; on a clustered table ``clustering_rewriter`` makes the rewriter
    that writes a bin as a new ZCube instead (:func:`clustering_plan`). Which files qualify is
    decided the same way for both: the trigger counts the table's small files per partition.
    ``configuration``: the table properties of the snapshot the committed command read, when that
    command cannot have changed them (DELETE, UPDATE). When they and the session leave auto
    compaction off, nothing is loaded: on an object store that load is a sequential round trip
    after every commit, for the common answer "off".

    Returns Delta's OptimizeMetrics plus ``version`` when a compaction committed, None otherwise
    (off, nothing to do, or a concurrent writer won the race: logged).
    """
    if configuration is not None and not auto_compact_enabled(conf, configuration):
        return None
    snapshot = load(table_root)
    if not auto_compact_enabled(conf, snapshot.configuration):
        return None
    settings = AutoCompactSettings.from_conf(conf)
    plan = plan_auto_compaction(snapshot, settings)
    if plan is None:
        return None
    columns = clustering_columns(snapshot)
    if columns:
        plan, rewrite, parameters = clustering_plan(snapshot, columns, conf, settings, clustering_rewriter)
        if not plan.bins:
            return None  # the small files sit in ZCubes already big enough (Delta leaves those alone)
    else:
        rewrite, parameters = rewrite_bin, auto_compaction_parameters(plan)
    try:
        metrics, version = run_optimize(plan, rewrite, OPERATION, parameters, conf)
    except CommitConflictError as exc:
        _LOG.warning(
            "auto compaction of %s after version %d lost to a concurrent writer and was dropped "
            "(the command's own commit stands): %s", table_root, committed_version, exc,
        )
        return None
    except Exception as exc:
        exc.add_note(f"raised by auto compaction after {table_root} version {committed_version} had committed")
        raise
    _LOG.info("auto compaction of %s after version %d committed version %s", table_root, committed_version, version)
    return {**metrics, "version": version}

