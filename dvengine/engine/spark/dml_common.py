"""Shared machinery of DELETE, UPDATE and MERGE on Spark.

Every DML command reduces to: some rows of some files must disappear from those files (and,
for UPDATE/MERGE, new rows appear in new files). ``retire_rows`` does the first half for all
of them: it runs the executor DV job over the matched (file, row index) pairs and turns each
touched file into commit actions - a re-add with a DV, a plain remove, or a rewrite request
that the command fulfils with its own row transformation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, SparkSession

from dvengine.commit.transaction import Transaction
from dvengine.engine.spark.columns import predicate_column_to_sql

from dvengine.engine.spark.dv_job import RESULT_DDL, DvJobContext, build_deletion_vectors
from dvengine.engine.spark.paths import spark_file_uri
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, spark_schema
from dvengine.expressions import BoundPredicate, parse_predicate
from dvengine.planning.candidates import CandidatePlan, might_match_function, plan_candidates
from dvengine.faults import DML_DV_FILES_WRITTEN, fault_point
from dvengine.errors import OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.planning.decisions import (
    DEFAULT_INLINE_MAX_BYTES,
    DEFAULT_MODE,
    DEFAULT_REWRITE_THRESHOLD,
    MODE_DV,
    DmlOptions,
    FileAction,
)
from dvengine.protocol.actions import Action, AddFile, DeletionVectorDescriptor
from dvengine.protocol.features import check_writable, supports_deletion_vectors
from dvengine.protocol.stats import stats_for_dv_file
from dvengine.storage import resolve_data_path
from dvengine.writing.schema_checks import check_no_constraints

CONF_MODE = "dvengine.dml.mode"
CONF_REWRITE_THRESHOLD = "dvengine.dml.rewriteThreshold"
CONF_INLINE_MAX_BYTES = "dvengine.dv.inlineMaxBytes"
CONF_RANDOM_PREFIX_LEN = "dvengine.dv.randomPrefixLength"


def resolve_options(spark: SparkSession, mode: str | None) -> DmlOptions:
    """Options from the call, else the Spark conf keys documented in the README, else defaults."""
    conf = spark.conf
    return DmlOptions(
        mode=(mode or conf.get(CONF_MODE, None) or DEFAULT_MODE).lower(),
        rewrite_threshold=float(conf.get(CONF_REWRITE_THRESHOLD, None) or DEFAULT_REWRITE_THRESHOLD),
        inline_max_bytes=int(conf.get(CONF_INLINE_MAX_BYTES, None) or DEFAULT_INLINE_MAX_BYTES),
        dv_random_prefix_len=int(conf.get(CONF_RANDOM_PREFIX_LEN, None) or 0),
    )


def check_dml_allowed(snapshot: Snapshot, operation: str) -> None:
    """Refuse row-level changes the table forbids or that dvengine cannot enforce correctly."""
    check_writable(snapshot.protocol, snapshot.metadata)
    check_no_constraints(snapshot.metadata, snapshot.schema)
    if snapshot.configuration.get("delta.appendOnly", "false").lower() == "true":
        raise OperationNotAllowedError(
            f"{operation} is not allowed: table {snapshot.table_root} is append-only (delta.appendOnly=true)"
        )


def check_dv_mode_allowed(snapshot: Snapshot, options: DmlOptions) -> bool:
    """Whether DVs may be written; an explicit ``mode="dv"`` on a table without them is an error."""
    supported = supports_deletion_vectors(snapshot.protocol, snapshot.metadata)
    if options.mode == MODE_DV and not supported:
        raise UnsupportedFeatureError(
            "mode='dv' needs deletion vectors, but this table does not enable them: it needs the deletionVectors "
            "reader/writer feature and the property delta.enableDeletionVectors=true (or use mode='rewrite'/'auto')"
        )
    return supported


@dataclass
class RowRetirement:
    """Outcome of retiring matched rows: actions to commit and the files left to rewrite."""

    actions: list[Action] = field(default_factory=list)
    files_to_rewrite: list[AddFile] = field(default_factory=list)
    rows_retired: int = 0
    rows_retired_in_rewritten_files: int = 0
    dvs_added: int = 0
    dvs_updated: int = 0
    dvs_removed: int = 0
    files_removed: int = 0
    removed_bytes: int = 0
    touched_files: int = 0
    elapsed_ms: int = 0

    def delta_metrics(self) -> dict[str, int]:
        """The file and DV counts DELETE and UPDATE report under Delta's metric names."""
        return {
            "numRemovedFiles": self.files_removed,
            "numRemovedBytes": self.removed_bytes,
            "numDeletionVectorsAdded": self.dvs_added,
            "numDeletionVectorsUpdated": self.dvs_updated,
            "numDeletionVectorsRemoved": self.dvs_removed,
            "scanTimeMs": self.elapsed_ms,
        }


def retire_rows(
    spark: SparkSession,
    snapshot: Snapshot,
    candidates: Sequence[AddFile],
    matched_row_ids: DataFrame,
    options: DmlOptions,
    dv_supported: bool,
    now_ms: int,
) -> RowRetirement:
    """Make the matched rows (columns FILE_PATH_COL, ROW_INDEX_COL) disappear from their files."""
    started = time.monotonic()
    targets = {spark_file_uri(resolve_data_path(snapshot.table_root, add.path)): add for add in candidates}
    ctx = DvJobContext(
        table_root=snapshot.table_root,
        targets=targets,
        options=options,
        dv_supported=dv_supported,
        file_path_col=FILE_PATH_COL,
        row_index_col=ROW_INDEX_COL,
    )
    partitions = max(1, min(len(candidates), spark.sparkContext.defaultParallelism))
    results = (
        matched_row_ids.select(FILE_PATH_COL, ROW_INDEX_COL)
        .repartition(partitions, FILE_PATH_COL)
        .mapInArrow(build_deletion_vectors(ctx), RESULT_DDL)
        .collect()
    )
    fault_point(DML_DV_FILES_WRITTEN)
    out = RowRetirement()
    for row in results:
        add = targets[row["file_uri"]]
        action = FileAction(row["action"])
        out.touched_files += 1
        out.rows_retired += int(row["newly_deleted"])
        remove = add.to_remove(now_ms)
        if action is FileAction.DELETION_VECTOR:
            dv = DeletionVectorDescriptor.from_json(json.loads(row["dv_json"]))
            out.actions += [remove, replace(add, deletion_vector=dv, stats=stats_for_dv_file(add.stats), data_change=True)]
            if add.deletion_vector is None:
                out.dvs_added += 1
            else:
                out.dvs_updated += 1
            continue
        if add.deletion_vector is not None:
            out.dvs_removed += 1
        out.files_removed += 1
        out.removed_bytes += add.size
        out.actions.append(remove)
        if action is FileAction.REWRITE:
            out.files_to_rewrite.append(add)
            out.rows_retired_in_rewritten_files += int(row["newly_deleted"])
    out.elapsed_ms = int((time.monotonic() - started) * 1000)
    return out


@dataclass(frozen=True, slots=True)
class WrittenRows:
    """New data files produced by a DML command, not yet committed."""

    files: list[AddFile]
    rows: int
    bytes: int
    elapsed_ms: int


def write_rows(df: DataFrame, snapshot: Snapshot) -> WrittenRows:
    """Write ``df`` (logical columns of the table) as new data files with stats."""
    from dvengine.engine.spark.writer import write_parquet_files
    from dvengine.protocol.stats import FileStats

    started = time.monotonic()
    files = write_parquet_files(df, snapshot.table_root, snapshot.schema, snapshot.partition_columns)
    rows = 0
    for add in files:
        stats = FileStats.parse(add.stats)
        rows += 0 if stats is None or stats.num_records is None else stats.num_records
    return WrittenRows(files, rows, sum(a.size for a in files), int((time.monotonic() - started) * 1000))


def spark_error_class(exc: BaseException) -> str | None:
    """Spark's error class of a failed job (e.g. CAST_INVALID_INPUT), to map it to a typed error."""
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    if getter is None:
        return None
    value = getter()
    return None if value is None else str(value)


@dataclass(frozen=True)
class DmlSetup:
    """What every predicate-driven DML command resolves before touching data."""

    options: DmlOptions
    snapshot: Snapshot
    dv_supported: bool
    predicate: BoundPredicate | None
    plan: CandidatePlan
    transaction: Transaction
    now_ms: int


def bind_dml_condition(spark: SparkSession, snapshot: Snapshot, condition: str | Column | None) -> BoundPredicate | None:
    """Bind a condition given as SQL text or a pyspark Column (resolved on the table schema)."""
    if condition is None:
        return None
    if isinstance(condition, str):
        text = condition
    else:
        text = predicate_column_to_sql(condition, spark.createDataFrame([], spark_schema(snapshot.schema)))
    return parse_predicate(text, snapshot.schema)


def prepare_dml(
    spark: SparkSession, table_root: str, operation: str, condition: str | Column | None, mode: str | None
) -> DmlSetup:
    """Load the snapshot, refuse what the table forbids, bind the condition, plan candidates, open
    the transaction with its read set (candidate files and the skipping predicate)."""
    options = resolve_options(spark, mode)
    snapshot = load_snapshot(table_root)
    check_dml_allowed(snapshot, operation)
    dv_supported = check_dv_mode_allowed(snapshot, options)
    predicate = bind_dml_condition(spark, snapshot, condition)
    plan = plan_candidates(snapshot, predicate)
    params = {"predicate": json.dumps([] if predicate is None else [predicate.sql])}
    txn = Transaction(table_root, snapshot, operation, params)
    txn.record_read(plan.candidates, might_match_function(snapshot, predicate))
    return DmlSetup(options, snapshot, dv_supported, predicate, plan, txn, int(time.time() * 1000))
