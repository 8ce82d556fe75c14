"""Liquid clustering: the table's clustering columns, how a table becomes clustered, and OPTIMIZE on it.

What PROTOCOL.md ("Clustered Table") requires of a writer, and how dvengine meets it:

- a clustered table lists ``clustering`` and ``domainMetadata`` in ``writerFeatures`` (writer 7);
- its clustering columns are in a ``domainMetadata`` action of domain ``delta.clustering`` whose
  configuration is ``{"clusteringColumns": [...]}``, physical names under column mapping. Delta
  Spark (``ClusteringMetadataDomain``) writes each column as a list of name parts
  (``[["a"], ["b"]]``); dvengine writes the same and reads both that and plain strings;
- stats must be collected for every clustering column (checked when the table is created);
- a table is never clustered and partitioned at once;
- files a clustering run writes carry ``clusteringProvider`` (Delta's implementation is named
  ``liquid``, and so is dvengine's, since it follows the same ZCube tagging), and a run may only
  recluster files with that provider or none.

``ALTER TABLE t CLUSTER BY (cols)`` / ``CLUSTER BY NONE`` (:func:`alter_clustering`) is Delta's
``AlterTableClusterByDeltaCommand``: a commit of the new domain only (plus the features, if the
table was not clustered yet), no file rewritten.

OPTIMIZE on a clustered table is Delta's ``ClusteringStrategy``: files of another provider or
clustered by other columns are left alone; files are grouped into ZCubes by their ``ZCUBE_ID``
tag (unclustered files first); ZCubes already at least
``optimize.clustering.mergeStrategy.minCubeSize.threshold`` big are done and skipped; when what is
left is one single ZCube, there is nothing to do; the rest is packed into bins of
``...minCubeSize.targetCubeSize`` bytes, each rewritten along a Hilbert curve (Z-order for one
column, as Delta) into ``max(1, bin bytes / optimize.maxFileSize)`` files tagged as a new ZCube.
A partition predicate and ZORDER BY are refused, as Delta refuses them.

``OPTIMIZE t FULL`` (Delta 3.3's ``isFull``) also reclusters the files left alone above (another
provider's, or clustered by columns the table no longer has, e.g. after ``ALTER TABLE ... CLUSTER
BY``), with the unclustered files and small ZCubes; it needs a clustered table with clustering columns.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dvengine.commands.options import ConfLookup, conf_number, no_conf
from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, ProtocolError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance.optimize import (
    DEFAULT_MAX_FILE_SIZE,
    Bin,
    BinRewriter,
    OptimizePlan,
    optimize_parameters,
    run_optimize,
)
from dvengine.maintenance.zorder import is_clustered, resolve_zorder_columns
from dvengine.protocol.actions import AddFile, DomainMetadata, Protocol
from dvengine.protocol.feature_catalog import with_feature
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import DataType, DecimalType, PrimitiveType, StructType
from dvengine.writing.stats import indexed_leaves, num_indexed_cols

DOMAIN = "delta.clustering"
PROVIDER = "liquid"
ZCUBE_ID = "ZCUBE_ID"
ZCUBE_ZORDER_BY = "ZCUBE_ZORDER_BY"
CONF_MAX_COLUMNS = "spark.databricks.delta.clusteredTable.numClusteringColumnsLimit"
CONF_MIN_CUBE_SIZE = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.threshold"
CONF_TARGET_CUBE_SIZE = "spark.databricks.delta.optimize.clustering.mergeStrategy.minCubeSize.targetCubeSize"
DEFAULT_MAX_COLUMNS = 4
_SKIPPING_ELIGIBLE = frozenset(
    {"byte", "short", "integer", "long", "float", "double", "date", "timestamp", "timestamp_ntz", "string"}
)
DEFAULT_MIN_CUBE_SIZE = 100 * DEFAULT_MAX_FILE_SIZE
DEFAULT_TARGET_CUBE_SIZE = DEFAULT_MIN_CUBE_SIZE * 3 // 2

Conf = Callable[[str], str | None]


# --- the domain -------------------------------------------------------------------------------


def domain_action(physical_columns: Sequence[str]) -> DomainMetadata:
    """The ``delta.clustering`` domain as Delta Spark writes it (each column a list of name parts)."""
    config = {"clusteringColumns": [[c] for c in physical_columns]}
    return DomainMetadata(DOMAIN, json.dumps(config, separators=(",", ":")))


def clustering_columns(snapshot: Snapshot) -> list[str]:
    """Logical names of the table's clustering columns ([] when it is not clustered or has none)."""
    if not is_clustered(snapshot):
        return []
    domain = snapshot.domain_metadata.get(DOMAIN)
    if domain is None or domain.removed:
        return []
    try:
        raw = json.loads(domain.configuration or "{}").get("clusteringColumns") or []
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ProtocolError(f"domainMetadata {DOMAIN} of {snapshot.table_root} is not a JSON object: {exc}") from None
    by_physical = {f.physical_name: f.name for f in snapshot.schema.fields}
    names = []
    for entry in raw:
        parts = [str(p) for p in entry] if isinstance(entry, list) else [str(entry)]
        if len(parts) != 1 or parts[0] not in by_physical:
            raise ProtocolError(
                f"clustering column {'.'.join(parts)!r} of {snapshot.table_root} is not a top-level column of its schema"
            )
        names.append(by_physical[parts[0]])
    return names


def clustered_protocol(protocol: Protocol) -> Protocol:
    """``protocol`` with the ``clustering`` and ``domainMetadata`` writer features (writer 7)."""
    return with_feature(with_feature(protocol, "domainMetadata"), "clustering")


def max_columns(conf: Conf) -> int:
    return int(conf_number(conf, CONF_MAX_COLUMNS, DEFAULT_MAX_COLUMNS, int))


def skipping_eligible(data_type: DataType) -> bool:
    """Delta's ``SkippingEligibleDataType``: numbers, decimals, dates, timestamps and strings (not
    booleans, binary or complex types), the only types a clustering column may have."""
    if isinstance(data_type, DecimalType):
        return True
    return isinstance(data_type, PrimitiveType) and data_type.name in _SKIPPING_ELIGIBLE


def resolve_clustering_columns(
    schema: StructType,
    partition_columns: Sequence[str],
    columns: Sequence[str],
    configuration: Mapping[str, str],
    limit: int = DEFAULT_MAX_COLUMNS,
) -> list[str]:
    """Delta's checks on ``CLUSTER BY`` columns at CREATE; returns the schema's spelling of each."""
    if partition_columns:
        raise InvalidArgumentError(
            "Clustering and partitioning cannot both be specified. Please remove partitionedBy if you want to create "
            f"a Delta table with clustering (partitionedBy {list(partition_columns)}, clusterBy {list(columns)})"
        )
    if len(columns) > limit:
        raise InvalidArgumentError(
            f"CLUSTER BY supports up to {limit} clustering columns, but the table has {len(columns)} clustering "
            f"columns ({', '.join(columns)}). Please remove the extra clustering columns."
        )
    by_lower = {f.name.lower(): f for f in schema.fields}
    resolved: list[str] = []
    for name in columns:
        field = by_lower.get(name.lower())
        if field is None:
            raise InvalidArgumentError(
                f"clustering column {name!r} is not a top-level column of the table (columns: {schema.field_names})"
            )
        if not skipping_eligible(field.type):
            # Delta (DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED): only SkippingEligibleDataType
            # columns have min/max in the stats schema
            raise InvalidArgumentError(
                f"CLUSTER BY is not supported because the following column(s): {field.name} : "
                f"{field.type.simple_string()} don't support data skipping (clustering column {name!r})"
            )
        if field.name in resolved:
            raise InvalidArgumentError(f"clustering column {name!r} is given twice")
        resolved.append(field.name)
    leaves = indexed_leaves(schema, {f.physical_name for f in schema.fields}, num_indexed_cols(configuration))
    with_stats = {leaf.path[0] for leaf in leaves}
    missing = [c for c in resolved if schema.get(c).physical_name not in with_stats]
    if missing:
        raise InvalidArgumentError(
            f"Clustering requires clustering columns to have stats. Couldn't find clustering column(s) "
            f"'{', '.join(missing)}' in stats schema (delta.dataSkippingNumIndexedCols = {num_indexed_cols(configuration)})"
        )
    return resolved


# --- ALTER TABLE ... CLUSTER BY -------------------------------------------------------------------

OPERATION_CLUSTER_BY = "CLUSTER BY"


def quote_if_needed(part: str) -> str:
    """Spark's ``quoteIfNeeded``: a name part back-quoted unless it is a plain word (how Delta's
    ``FieldReference.toString`` writes column names into operation parameters)."""
    if re.fullmatch(r"[A-Za-z0-9_]+", part) and not part.isdigit():
        return part
    return "`" + part.replace("`", "``") + "`"


def _reference(parts: Sequence[str]) -> str:
    return ".".join(quote_if_needed(p) for p in parts)


def _top_level_names(snapshot: Snapshot, columns: Sequence[Sequence[str]]) -> list[str]:
    """Each column as one top-level name; a nested path is refused (dvengine clusters by top-level
    columns only, where Delta also takes struct fields), a path into a non-struct is unknown."""
    by_lower = {f.name.lower(): f for f in snapshot.schema.fields}
    names = []
    for parts in columns:
        if len(parts) != 1:
            top = by_lower.get(parts[0].lower())
            if top is not None and isinstance(top.type, StructType):
                raise UnsupportedFeatureError(
                    f"ALTER TABLE CLUSTER BY: clustering by the nested field {_reference(parts)} is not supported by "
                    f"dvengine (top-level columns only); table {snapshot.table_root} was not changed"
                )
            raise InvalidArgumentError(
                f"clustering column {_reference(parts)!r} is not a column of the table (columns: "
                f"{snapshot.schema.field_names}); table {snapshot.table_root} was not changed"
            )
        names.append(parts[0])
    return names


def alter_clustering(table_root: str, columns: Sequence[Sequence[str]], conf: Conf = no_conf) -> int | None:
    """``ALTER TABLE t CLUSTER BY (c, ...)`` (each column as its name parts) or, with no columns,
    ``CLUSTER BY NONE``, as Delta's ``AlterTableClusterByDeltaCommand``.

    One commit of a new ``delta.clustering`` domain (physical names), operation ``CLUSTER BY``
    with ``oldClusteringColumns`` / ``newClusteringColumns`` (comma-joined, the old ones as the
    schema spells them, the new ones as written); no file is touched, so files clustered by the
    old columns keep their ZCube tags and OPTIMIZE leaves them alone. A table without the
    ``clustering`` feature becomes clustered (the same metaData again, the protocol with
    ``clustering`` and ``domainMetadata``); ``CLUSTER BY NONE`` on it does nothing (None). Refused
    with nothing written: a partitioned table (also for NONE), more columns than
    ``clusteredTable.numClusteringColumnsLimit``, unknown, repeated, non-skipping-eligible or
    stats-less columns (:func:`resolve_clustering_columns`, the checks of CREATE ... CLUSTER BY).
    """
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    if snapshot.metadata.partition_columns:
        raise OperationNotAllowedError(
            "ALTER TABLE CLUSTER BY cannot be applied to a partitioned table. (table "
            f"{snapshot.table_root} is partitioned by {list(snapshot.metadata.partition_columns)}; nothing was written)"
        )
    names = _top_level_names(snapshot, columns)
    if not names and not is_clustered(snapshot):
        return None  # Delta: CLUSTER BY NONE does not make an unclustered table clustered
    resolved = resolve_clustering_columns(
        snapshot.schema, (), names, snapshot.metadata.configuration, max_columns(conf)
    )
    parameters = {
        "oldClusteringColumns": ",".join(quote_if_needed(c) for c in clustering_columns(snapshot)),
        "newClusteringColumns": ",".join(_reference(parts) for parts in columns),
    }
    txn = Transaction(snapshot.table_root, snapshot, OPERATION_CLUSTER_BY, parameters, conf=conf)
    if not is_clustered(snapshot):
        # Delta sets delta.feature.clustering=supported, which becomes the protocol and is dropped
        # from the configuration: an unchanged metaData action plus the upgraded protocol.
        txn.update_metadata(snapshot.metadata)
        txn.update_protocol(clustered_protocol(snapshot.protocol))
    txn.add_actions([domain_action([snapshot.schema.get(n).physical_name for n in resolved])])
    return txn.commit({})


# --- OPTIMIZE on a clustered table --------------------------------------------------------------


def check_optimize_arguments(snapshot: Snapshot, condition: str | None) -> None:
    if condition is not None:
        raise OperationNotAllowedError(
            "OPTIMIZE command for Delta table with clustering doesn't support partition predicates. "
            f"Please remove the predicates: {condition}. (table {snapshot.table_root}; nothing was written)"
        )


def cube_sizes(conf: Conf) -> tuple[int, int]:
    """(minCubeSize threshold, bin size): Delta packs into max(targetCubeSize, minCubeSize)."""
    low = int(conf_number(conf, CONF_MIN_CUBE_SIZE, DEFAULT_MIN_CUBE_SIZE, int))
    target = int(conf_number(conf, CONF_TARGET_CUBE_SIZE, DEFAULT_TARGET_CUBE_SIZE, int))
    if low < 0 or target < 0:
        raise InvalidArgumentError(f"{CONF_MIN_CUBE_SIZE} and {CONF_TARGET_CUBE_SIZE} must be >= 0, got {low} and {target}")
    return low, max(low, target)


def _zcube(add: AddFile) -> tuple[str, list[str]] | None:
    tags = add.tags or {}
    cube, order = tags.get(ZCUBE_ID), tags.get(ZCUBE_ZORDER_BY)
    if cube is None or order is None:
        return None
    try:
        columns = [str(c) for c in json.loads(order)]
    except (json.JSONDecodeError, TypeError):
        return None
    return cube, columns


def check_optimize_full(snapshot: Snapshot, columns: Sequence[str], condition: str | None, zorder_by: Sequence[str]) -> None:
    """Delta's checks for ``OPTIMIZE t FULL``, in OptimizeTableCommand's order: a clustered table
    refuses a partition predicate, then ZORDER BY; then FULL needs a clustered table with clustering
    columns (DELTA_OPTIMIZE_FULL_NOT_SUPPORTED, also after ``CLUSTER BY NONE``)."""
    if is_clustered(snapshot):
        check_optimize_arguments(snapshot, condition)
        if zorder_by:
            resolve_zorder_columns(snapshot, zorder_by, check_stats=False)  # raises: clustered table
    if not is_clustered(snapshot) or not columns:
        raise OperationNotAllowedError(
            "[DELTA_OPTIMIZE_FULL_NOT_SUPPORTED] OPTIMIZE FULL is only supported for clustered tables with non-empty "
            f"clustering columns. (table {snapshot.table_root}; nothing was written)"
        )


def _zcube_order(f: AddFile) -> tuple[bool, str]:
    """Delta sorts OPTIMIZE's input by the ``ZCUBE_ID`` tag, files without one first."""
    cube = (f.tags or {}).get(ZCUBE_ID)
    return (cube is not None, cube or "")


def plan_clustering(
    snapshot: Snapshot, columns: Sequence[str], min_cube_size: int, bin_size: int, full: bool = False
) -> OptimizePlan:
    """Delta's ClusteringStrategy file selection (see the module docstring).

    ``full`` (``OPTIMIZE t FULL``, Delta's ``applyMinZCube`` with ``isFull``): files of another
    clustering provider and files clustered by other columns are reclustered too, after the
    unclustered files and small ZCubes; ZCubes of the current columns that are big enough stay.
    With such files present, even a single small ZCube is rewritten along with them."""
    check_writable(snapshot.protocol, snapshot.metadata)
    unclustered: list[AddFile] = []
    cubes: dict[str, list[AddFile]] = {}
    skipped: list[AddFile] = []  # another provider's, or clustered by other columns
    for f in snapshot.files:
        info = _zcube(f)
        if f.clustering_provider not in (None, PROVIDER) or (info is not None and info[1] != list(columns)):
            skipped.append(f)  # left alone without FULL
        elif info is None:
            unclustered.append(f)
        else:
            cubes.setdefault(info[0], []).append(f)
    small = {cube: files for cube, files in cubes.items() if sum(f.size for f in files) < min_cube_size}
    plan = OptimizePlan(snapshot, None, list(snapshot.files))
    recluster = sorted(skipped, key=_zcube_order) if full else []
    if not recluster and not unclustered and len(small) <= 1:
        return plan  # nothing, or one ZCube that would only be rewritten into itself
    ordered = unclustered + [f for cube in sorted(small) for f in small[cube]] + recluster
    current: list[AddFile] = []
    size = 0
    groups: list[list[AddFile]] = []
    for f in ordered:  # Delta's groupFilesIntoBins, in ZCube order, single-file bins kept
        if current and size + f.size > bin_size:
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.size
    if current:
        groups.append(current)
    plan.bins = [Bin({}, tuple(g)) for g in groups]
    return plan


def zcube_tagger(columns: Sequence[str]) -> Callable[[list[AddFile]], list[AddFile]]:
    """Tags one bin's new files as one new ZCube of this provider (Delta's ZCubeInfo.setForFile)."""
    order = json.dumps(list(columns), separators=(",", ":"))

    def tag(adds: list[AddFile]) -> list[AddFile]:
        cube = str(uuid.uuid4())
        return [
            replace(a, tags={**dict(a.tags or {}), ZCUBE_ID: cube, ZCUBE_ZORDER_BY: order}, clustering_provider=PROVIDER)
            for a in adds
        ]

    return tag


def clustering_parameters(columns: Sequence[str], auto: bool = False, full: bool = False) -> dict[str, ParameterValue]:
    """DeltaOperations.Optimize with clusterBy: zOrderBy empty, isFull recorded (OPTIMIZE of a
    clustered table takes no condition, so ``predicate`` is ``[]``)."""
    return optimize_parameters(delta_json([]), cluster_by=columns, auto=auto, full=full)


def run_clustering(
    plan: OptimizePlan, columns: Sequence[str], rewrite_bin: BinRewriter, conf: ConfLookup | None = None, full: bool = False
) -> tuple[dict[str, Any], int | None]:
    """Rewrite each bin along the curve as a new ZCube and commit once (see :func:`run_optimize`)."""
    return run_optimize(plan, rewrite_bin, parameters=clustering_parameters(columns, full=full), conf=conf)


__all__ = [
    "DOMAIN",
    "OPERATION_CLUSTER_BY",
    "PROVIDER",
    "alter_clustering",
    "check_optimize_full",
    "clustered_protocol",
    "clustering_columns",
    "clustering_parameters",
    "cube_sizes",
    "domain_action",
    "plan_clustering",
    "resolve_clustering_columns",
    "run_clustering",
    "zcube_tagger",
]
