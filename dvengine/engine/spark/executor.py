"""The Spark executor: DML work as Spark jobs, for any master URL and any size.

Verification scans read only the predicate's columns with ``_metadata.row_index``; matched
(file, row index) pairs are repartitioned by file and turned into bitmaps and packed DV files on
the executors, so row indexes never travel to the driver. Each task writes at most one DV file
whose identity the driver assigned in advance: if the job fails, the command knows every path
a task may have written and removes them. Spark failures leave here as dvengine's typed errors
(``engine.spark.errors``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from dvengine.commands.change_data import DELETE, UPDATE_POSTIMAGE, UPDATE_PREIMAGE, writes_change_data
from dvengine.commands.context import DmlContext
from dvengine.commands.options import session_conf
from dvengine.commands.retirement import FileRetirement, RowRetirement, build_retirement
from dvengine.commands.struct_cast import Alignment, update_alignment
from dvengine.commands.written import WrittenRows
from dvengine.dv import load_deletion_vector, new_dv_file_id
from dvengine.engine.local import LocalExecutor
from dvengine.engine.local.change_data import MergeChanges
from dvengine.engine.local.merge import TargetJob, TargetResult, TargetRunner
from dvengine.engine.spark import errors as spark_errors
from dvengine.engine.spark.change_data import table_columns, tagged, write_change_frames
from dvengine.engine.spark.dv_job import KIND_FILE as DV_KIND_FILE
from dvengine.engine.spark.dv_job import RESULT_DDL, DvJobContext, build_deletion_vectors
from dvengine.engine.spark.empty_frames import empty_frame
from dvengine.engine.spark.file_tasks import (
    FileTasksContext,
    MergeTasksContext,
    balanced_groups,
    run_file_tasks,
    run_merge_tasks,
)
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.jvm_files import new_write_id, require_jvm_files, write_blobs
from dvengine.engine.spark.paths import hadoop_names
from dvengine.engine.spark.reader import (
    FILE_PATH_COL,
    ROW_INDEX_COL,
    castable_spark_type,
    scan_logical,
    spark_schema,
)
from dvengine.engine.spark.row_ids import carried, scan_with_row_ids
from dvengine.engine.spark.rows_job import (
    KIND_ADD,
    KIND_COUNT,
    KIND_FILE,
    KIND_KEPT,
    KIND_SOURCES,
    RowsJobContext,
    RowsLayout,
    retire_and_write,
)
from dvengine.engine.spark.rows_job import RESULT_DDL as RESULT_DDL_ROWS
from dvengine.engine.spark.struct_align import align_column
from dvengine.engine.spark.workers import check_python_workers, default_parallelism
from dvengine.engine.spark.writer import write_parquet_files
from dvengine.errors import (
    InvalidArgumentError,
    NotLocallyEvaluableError,
    SchemaViolationError,
)
from dvengine.expressions import BoundExpression, BoundPredicate
from dvengine.faults import DML_DATA_FILES_WRITTEN, DML_DV_FILES_WRITTEN, fault_point
from dvengine.log import Snapshot
from dvengine.planning.decisions import FileAction
from dvengine.protocol.actions import AddFile, DeletionVectorDescriptor
from dvengine.protocol.ddl import from_spark_type
from dvengine.protocol.schema import DataType, StructField, StructType, holds_struct
from dvengine.read.row_ids import tracked_columns
from dvengine.storage import join, resolve_data_path
from dvengine.storage.durable import rename_into_place
from dvengine.writing.constraints import row_rule_texts
from dvengine.writing.files import SPARK_STAGING_PREFIX
from dvengine.writing.stats import num_indexed_cols

_MATCHED = "spark.matched"
_FUSED = "spark.fused"
_FILE_TASKS = "spark.file_tasks"
_ALIGNMENTS = "spark.update_alignments"

# How the Spark executor runs DELETE, UPDATE and MERGE: "files" = one job of file tasks (the embedded
# evaluator's work per file, in the Python workers: ``file_tasks``), "rows" = Spark evaluates
# and the rows travel to the tasks (``rows_job``), "auto" = files wherever the embedded
# evaluator is exact for the condition and values and the table writes no change data.
STRATEGY_CONF = "dvengine.spark.dmlStrategy"
STRATEGIES = ("auto", "files", "rows")
R = TypeVar("R")


@dataclass(frozen=True)
class RetiredAndWritten:
    """What one retire-and-write job did: DVs/decisions per file, new data files, rows per clause."""

    retirement: RowRetirement
    written: WrittenRows
    clause_counts: dict[int, int]
    matched_sources: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))  # MERGE file tasks
    # MERGE file tasks: per data file (the add's path), the rows that joined a source row and stayed
    kept_rows: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)



def spark_job(what: str, run: Callable[[], R], value_error: bool = False) -> R:
    """Run a Spark action; its failures come out as dvengine's typed errors."""
    try:
        return run()
    except PySparkException as exc:
        translated = spark_errors.translate(exc, what, value_error)
        if translated is exc:
            raise
        raise translated from exc
    except Exception as exc:
        if type(exc).__name__ != "Py4JJavaError":
            raise
        translated = spark_errors.translate(exc, what, value_error)
        if translated is exc:
            raise
        raise translated from exc


def write_frame(df: DataFrame, snapshot: Snapshot) -> WrittenRows:
    """Write ``df`` (logical columns of the table, and the stable row id columns of ``row_ids``
    when the table keeps them) as new data files with stats."""
    started = time.monotonic()
    files = write_parquet_files(
        df, snapshot.table_root, snapshot.schema, snapshot.partition_columns, num_indexed_cols(snapshot.configuration),
        materialized=tracked_columns(snapshot),
    )
    return WrittenRows.of(files, started)


def updated_projection(
    snapshot: Snapshot, assignments: Mapping[str, str], matched: Column | None, alignments: Mapping[str, Alignment]
) -> list[Column]:
    """Columns of the new row: assigned values where ``matched`` holds (always when None), else the
    old value; struct values rebuilt by field name first (``alignments``, see :func:`plan_alignments`)."""
    out = []
    for field in snapshot.schema.fields:
        old = F.col(quote(field.name))
        if field.name not in assignments:
            out.append(old)
            continue
        new = stored_value(assignments[field.name], field, alignments.get(field.name))
        out.append((new if matched is None else F.when(matched, new).otherwise(old)).alias(field.name))
    return out


def stored_value(value_sql: str, field: StructField, alignment: Alignment | None) -> Column:
    """The value as its column stores it: rebuilt by ``alignment`` (struct fields matched by name,
    as Delta's UPDATE; Spark's CAST alone goes by position), then cast to the column's type."""
    return align_column(F.expr(value_sql), alignment).cast(castable_spark_type(field))


def plan_alignments(empty: DataFrame, schema: StructType, assignments: Mapping[str, str]) -> dict[str, Alignment]:
    """For each value assigned to a struct-holding column, how it is rebuilt into the column's type
    (``commands.struct_cast.update_alignment``) from its type as Spark's analyzer gives it over
    ``empty`` (an empty frame of the table's columns), so any expression (a nested
    ``named_struct``, ``IF`` / ``CASE``, ``array``, ``map``, another column) goes by field name at
    every depth. SchemaMismatchError naming the column when its struct fields differ from the
    column's by more than order; SchemaViolationError when the value does not analyze."""
    out: dict[str, Alignment] = {}
    for name, text in assignments.items():
        field = schema.get(name)
        if not holds_struct(field.type):
            continue
        try:
            value_type = analyzed_type(empty, text)
        except PySparkException as exc:
            raise SchemaViolationError(
                f"value {text!r} cannot be stored in column {field.name!r} of type {field.type.simple_string()}: "
                f"{spark_errors.first_line(exc)}"
            ) from exc
        alignment = update_alignment(value_type, field)
        if alignment is not None:
            out[name] = alignment
    return out


def analyzed_type(frame: DataFrame, text: str) -> DataType:
    """The type Spark's analyzer gives the SQL value ``text`` over ``frame``'s columns (an empty
    frame will do: analysis runs no job), as a Delta type; PySparkException when it does not
    analyze. UPDATE's and MERGE's struct alignments are planned from it."""
    return from_spark_type(frame.select(F.expr(text)).schema.fields[0].dataType)


def _alignments(ctx: DmlContext) -> Mapping[str, Alignment]:
    """The struct alignments ``check_assignments`` planned for this UPDATE (none before it ran)."""
    found: Mapping[str, Alignment] = ctx.engine_state.get(_ALIGNMENTS, {})
    return found


def _dv_paths(job: DvJobContext) -> list[str]:
    return [join(job.table_root, relative) for _, relative in job.dv_file_ids]


def _file_retirement(job: DvJobContext, row: Row) -> FileRetirement:
    """A task's result row for one file: its decision and, if it keeps a DV, the descriptor."""
    dv = None if row["dv_json"] is None else DeletionVectorDescriptor.from_json(json.loads(row["dv_json"]))
    return FileRetirement(job.targets[row["file_uri"]], FileAction(row["action"]), dv, int(row["newly_deleted"]))


def _publish(ctx: DmlContext, staging: str, adds: Sequence[AddFile]) -> None:
    """Move the files a job wrote into the staging folder to their place in the table.

    Only the files of successful task attempts (those whose adds came back) move; the folder,
    with anything a failed or speculative attempt left, is removed afterwards. Tables reached
    through Hadoop have no staging folder (``staging`` is the root): the files are in place.
    The tasks wrote these files with the in-process writer, which fsynced each before naming it
    (engine/local/writer.py), so they are durable already; Spark's own writer's files are
    fsynced by the driver in ``write_parquet_files``.
    """
    root = ctx.snapshot.table_root
    if staging == root:
        ctx.written.add_data_files(adds)
        return
    for add in adds:
        target = resolve_data_path(root, add.path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        rename_into_place(resolve_data_path(staging, add.path), target)
        ctx.written.add_paths([target])
    ctx.written.remove_staging(staging)


def _old_dvs(table_root: str, targets: Mapping[str, AddFile]) -> dict[str, bytes]:
    """The candidate files' current DVs (file uri -> portable roaring bytes), read on the driver
    through the storage layer for tasks that cannot read the table themselves."""
    out: dict[str, bytes] = {}
    for uri, add in targets.items():
        if add.deletion_vector is not None:
            bitmap = load_deletion_vector(table_root, add.deletion_vector, num_records=add.num_records)
            out[uri] = bitmap.serialize()
    return out


def dml_strategy(spark: SparkSession) -> str:
    """``dvengine.spark.dmlStrategy`` of the session (auto, files or rows), validated."""
    raw = session_conf(spark)(STRATEGY_CONF) or "auto"
    strategy = raw.strip().lower()
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"{STRATEGY_CONF} must be one of {STRATEGIES}, got {raw!r}")
    return strategy


class SparkExecutor:
    """Executor of the command layer on a SparkSession (see the module docstring)."""

    name = "spark"

    def __init__(self, spark: SparkSession) -> None:
        check_python_workers(spark)  # a worker without dvengine fails every job: say so up front
        self.spark = spark
        self._persisted: list[DataFrame] = []

    def unsupported_reason(
        self, schema: StructType, predicate: BoundPredicate | None, values: Sequence[tuple[str, DataType, BoundExpression]]
    ) -> str | None:
        return None  # Spark is the reference semantics: it evaluates whatever binds

    def check_assignments(self, ctx: DmlContext, assignments: Mapping[str, BoundExpression]) -> None:
        """Analysis-time check that every value can be stored in its column: its struct fields
        planned by name (:func:`plan_alignments`, kept for the row plan; SchemaMismatchError when
        Delta refuses them), then one ``select`` of all the stored values (Spark analyzes it when
        the DataFrame is made); only when it fails is each value checked alone, to name the column."""
        if not assignments:
            return
        schema = ctx.snapshot.schema
        empty = empty_frame(self.spark, spark_schema(schema))
        alignments = plan_alignments(empty, schema, {name: value.sql for name, value in assignments.items()})
        ctx.engine_state[_ALIGNMENTS] = alignments
        casts = {
            name: stored_value(value.sql, schema.get(name), alignments.get(name)) for name, value in assignments.items()
        }
        try:
            empty.select(*(cast.alias(f"__v{i}") for i, cast in enumerate(casts.values())))
            return
        except PySparkException as exc:
            combined = exc
        for name, cast in casts.items():
            field = schema.get(name)
            try:
                empty.select(cast.alias("__v"))
            except PySparkException as exc:
                raise SchemaViolationError(
                    f"value {assignments[name].sql!r} cannot be stored in column {field.name!r} of type "
                    f"{field.type.simple_string()}: {spark_errors.first_line(exc)}"
                ) from exc
        raise SchemaViolationError(
            f"the values {[v.sql for v in assignments.values()]} cannot be stored in their columns: "
            f"{spark_errors.first_line(combined)}"
        ) from combined

    # --- matching ---------------------------------------------------------------------------------

    def _condition(self, predicate: BoundPredicate | None) -> Column:
        return F.lit(True) if predicate is None else F.coalesce(F.expr(predicate.sql), F.lit(False))

    def _matched_rows(self, ctx: DmlContext, predicate: BoundPredicate | None) -> DataFrame:
        """All columns of the matched rows with their row ids, persisted for the command's jobs."""
        cached: DataFrame | None = ctx.engine_state.get(_MATCHED)
        if cached is None:
            cached = scan_logical(self.spark, ctx.snapshot, ctx.plan.candidates, keep_row_ids=True).where(
                self._condition(predicate)
            )
            cached = cached.persist(StorageLevel.MEMORY_AND_DISK)
            self._persisted.append(cached)
            ctx.engine_state[_MATCHED] = cached
        return cached

    def file_tasks_reason(
        self, ctx: DmlContext, predicate: BoundPredicate | None, assignments: Mapping[str, BoundExpression] | None
    ) -> str | None:
        """Why this command runs on the row plan rather than as file tasks (None: file tasks);
        ``dvengine.spark.dmlStrategy`` = files makes any reason an error instead."""
        strategy = dml_strategy(self.spark)
        schema = ctx.snapshot.schema
        values = [(name, schema.get(name).type, value) for name, value in (assignments or {}).items()]
        reason = f"{STRATEGY_CONF}=rows" if strategy == "rows" else LocalExecutor().unsupported_reason(schema, predicate, values)
        if reason is None and writes_change_data(ctx.snapshot):
            reason = "the table writes change data, which the row plan produces"
        if reason is None and hadoop_names(self.spark).jvm_io(ctx.snapshot.table_root):
            reason = "the table is reached through Hadoop's FileSystem, which Python file tasks cannot read"
        if reason is not None and strategy == "files":
            raise InvalidArgumentError(f"{STRATEGY_CONF}=files, but {ctx.operation} cannot run as file tasks: {reason}")
        return reason

    def retire_rows(self, ctx: DmlContext, files: Sequence[AddFile], predicate: BoundPredicate | None) -> RowRetirement:
        fused: RetiredAndWritten | None = ctx.engine_state.get(_FUSED)
        if fused is not None:  # UPDATE: check_new_values already did the work
            return fused.retirement
        if self.file_tasks_reason(ctx, predicate, None) is None:
            fused = self._file_tasks(ctx, files, predicate, None)
            ctx.engine_state[_FUSED] = ctx.engine_state[_FILE_TASKS] = fused
            return fused.retirement
        started = time.monotonic()
        matched = ctx.engine_state.get(_MATCHED)
        if matched is None:
            columns = None if predicate is None else predicate.columns
            matched = scan_logical(self.spark, ctx.snapshot, files, columns=columns, keep_row_ids=True).where(
                self._condition(predicate)
            )
        row_ids = matched.select(FILE_PATH_COL, ROW_INDEX_COL)
        job, partitions = self._dv_job(ctx, files)
        frame = row_ids.repartition(partitions, FILE_PATH_COL).mapInArrow(build_deletion_vectors(job), RESULT_DDL)
        if job.jvm_names is not None:
            frame = write_blobs(self.spark, frame, frame.columns)
        results = spark_job(f"{ctx.operation} on {ctx.snapshot.table_root}", frame.collect)
        fault_point(DML_DV_FILES_WRITTEN)
        outcomes = [_file_retirement(job, row) for row in results if row["kind"] == DV_KIND_FILE]
        return build_retirement(outcomes, ctx.now_ms, _dv_paths(job), int((time.monotonic() - started) * 1000))

    def _dv_job(self, ctx: DmlContext, files: Sequence[AddFile]) -> tuple[DvJobContext, int]:
        """What the tasks need to build DVs for ``files``, and how many tasks: one DV file identity
        per task, assigned here and recorded, so the command can remove any a failed job wrote."""
        snapshot = ctx.snapshot
        partitions = max(1, min(max(1, len(files)), default_parallelism(self.spark)))
        names = hadoop_names(self.spark)
        jvm = names.jvm_io(snapshot.table_root)
        if jvm:
            require_jvm_files(self.spark, snapshot.table_root)
        targets = {names.uri(resolve_data_path(snapshot.table_root, add.path)): add for add in files}
        job = DvJobContext(
            table_root=snapshot.table_root,
            targets=targets,
            jvm_names=names if jvm else None,
            old_dvs=_old_dvs(snapshot.table_root, targets) if jvm else None,
            options=ctx.options,
            dv_supported=ctx.dv_supported,
            file_path_col=FILE_PATH_COL,
            row_index_col=ROW_INDEX_COL,
            dv_file_ids=tuple(new_dv_file_id(ctx.options.dv_random_prefix_len) for _ in range(partitions)),
        )
        ctx.written.add_paths(_dv_paths(job))  # any task may have written its file before a failure
        return job, partitions

    def retire_and_write(
        self, ctx: DmlContext, files: Sequence[AddFile], rows: DataFrame, layout: RowsLayout, spread: Column | None = None
    ) -> RetiredAndWritten:
        """One job: retire the target rows of ``rows`` and write their new versions (``rows_job``).

        ``rows`` carries ``FILE_PATH_COL``/``ROW_INDEX_COL`` (null for rows without a target row,
        as MERGE inserts) and the new values. Rows are repartitioned by file so a file's matches
        meet in one task; ``spread`` (deterministic) spreads rows without a file over the tasks.
        New files go to a private staging folder first and are renamed into place once the job
        succeeded; the command removes the folder (and any DV file) if it fails.
        """
        started = time.monotonic()
        dv_job, partitions = self._dv_job(ctx, files)
        job = self._rows_context(ctx, dv_job, layout)
        key = F.col(FILE_PATH_COL) if spread is None else F.coalesce(F.col(FILE_PATH_COL), spread.cast("string"))
        results = rows.repartition(partitions, key).mapInArrow(retire_and_write(job), RESULT_DDL_ROWS)
        return self._collect_job(ctx, job, results, started)

    def _file_tasks(
        self,
        ctx: DmlContext,
        files: Sequence[AddFile],
        predicate: BoundPredicate | None,
        assignments: Mapping[str, BoundExpression] | None,
    ) -> RetiredAndWritten:
        """One job of file tasks (``file_tasks``): each task matches, retires and writes for its
        group of files in its Python worker; same staging, DV files and results as the row plan."""
        return self._group_job(
            ctx, files, lambda rows, snapshot, groups: run_file_tasks(
                FileTasksContext(rows, snapshot, groups, predicate, assignments)
            ),
        )

    def _group_job(
        self,
        ctx: DmlContext,
        files: Sequence[AddFile],
        task: Callable[
            [RowsJobContext, Snapshot, tuple[tuple[AddFile, ...], ...]],
            Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
        ],
    ) -> RetiredAndWritten:
        """Run ``task`` (built from the tasks' context, the snapshot without its file list and the
        size-balanced groups of ``files``) over ``spark.range``, one partition per group."""
        started = time.monotonic()
        dv_job, partitions = self._dv_job(ctx, files)
        groups = balanced_groups(files, partitions)
        rows = self._rows_context(ctx, dv_job, RowsLayout(value_columns=tuple(ctx.snapshot.schema.field_names)))
        snapshot = dataclasses.replace(ctx.snapshot, files=(), load_tombstones=tuple)
        results = self.spark.range(0, len(groups), 1, len(groups)).mapInArrow(task(rows, snapshot, groups), RESULT_DDL_ROWS)
        return self._collect_job(ctx, rows, results, started)

    def _rows_context(self, ctx: DmlContext, dv_job: DvJobContext, layout: RowsLayout) -> RowsJobContext:
        """The tasks' context with a fresh staging folder, recorded for removal if the command fails."""
        snapshot = ctx.snapshot
        write_id = ""
        if dv_job.jvm_names is not None:  # through Hadoop: final names in place, found again by the write id
            staging, write_id = snapshot.table_root, new_write_id()
            ctx.written.add_marker(write_id)
        else:
            staging = os.path.join(snapshot.table_root, f"{SPARK_STAGING_PREFIX}{uuid.uuid4().hex}")
            ctx.written.add_folder(staging)
        return RowsJobContext(
            write_id=write_id,
            dv=dv_job,
            schema=snapshot.schema,
            partition_columns=tuple(snapshot.partition_columns),
            num_indexed_cols=num_indexed_cols(snapshot.configuration),
            staging_root=staging,
            operation=ctx.operation,
            layout=layout,
            constraints=row_rule_texts(snapshot.configuration, snapshot.schema),
            materialized=tracked_columns(snapshot),
        )

    def _collect_job(self, ctx: DmlContext, job: RowsJobContext, results: DataFrame, started: float) -> RetiredAndWritten:
        """Run a retire-and-write job and hand out what it did; its new files move into place."""
        if job.dv.jvm_names is not None:
            results = write_blobs(self.spark, results, results.columns)
        rows = spark_job(ctx.operation, results.collect, value_error=True)
        outcomes: list[FileRetirement] = []
        adds: list[AddFile] = []
        counts: dict[int, int] = {}
        sources: list[np.ndarray] = []
        kept: dict[str, np.ndarray] = {}
        for row in rows:
            if row["kind"] == KIND_SOURCES:
                sources.append(np.frombuffer(bytes(row["payload"]), dtype="<i8"))
            elif row["kind"] == KIND_KEPT:  # a file belongs to one task: one row per file
                kept[row["file_uri"]] = np.fromiter(BitMap64.deserialize(bytes(row["payload"])), dtype=np.int64)
            elif row["kind"] == KIND_FILE:
                outcomes.append(_file_retirement(job.dv, row))
            elif row["kind"] == KIND_ADD:
                adds.append(AddFile.from_json(json.loads(row["add_json"])))
            elif row["kind"] == KIND_COUNT:
                counts[int(row["clause"])] = counts.get(int(row["clause"]), 0) + int(row["n"])
        retirement = build_retirement(outcomes, ctx.now_ms, _dv_paths(job.dv), int((time.monotonic() - started) * 1000))
        _publish(ctx, job.staging_root, adds)
        # Both kinds of files exist once the job is done and its data files are in place (a kill
        # here leaves orphans VACUUM reclaims, never a staging folder younger than an hour).
        fault_point(DML_DV_FILES_WRITTEN)
        fault_point(DML_DATA_FILES_WRITTEN)
        matched = np.unique(np.concatenate(sources)) if sources else np.empty(0, np.int64)
        return RetiredAndWritten(retirement, WrittenRows.of(adds, started), counts, matched, kept)

    def merge_target_runner(self) -> TargetRunner:
        """The target side of a MERGE with a small source as file tasks (``file_tasks``); the
        embedded MERGE does the rest (binding, pruning, inserts, commit). Tables that write
        change data are refused before any work, so the MERGE falls back to the row plan."""

        def run(ctx: DmlContext, src: pa.Table, job: TargetJob, changes: MergeChanges | None) -> TargetResult:
            if writes_change_data(ctx.snapshot):
                raise NotLocallyEvaluableError("the table writes change data, which the row plan produces")
            if hadoop_names(self.spark).jvm_io(ctx.snapshot.table_root):
                raise NotLocallyEvaluableError("the table is reached through Hadoop's FileSystem: the row plan reads it")
            files = ctx.plan.candidates
            if not files:
                return TargetResult({}, np.empty(0, np.int64), RowRetirement(), [], [], {})
            done = self._group_job(
                ctx, files, lambda rows, snapshot, groups: run_merge_tasks(MergeTasksContext(rows, snapshot, groups, src, job))
            )
            return TargetResult(
                done.clause_counts, done.matched_sources, done.retirement, list(done.written.files), [], done.kept_rows
            )

        return run

    # --- writing ------------------------------------------------------------------------------------

    def write_survivors(self, ctx: DmlContext, files: Sequence[AddFile], predicate: BoundPredicate) -> WrittenRows:
        by_file_tasks: RetiredAndWritten | None = ctx.engine_state.get(_FILE_TASKS)
        if by_file_tasks is not None:  # DELETE: the tasks rewrote these files in the same pass
            return by_file_tasks.written
        if tracked_columns(ctx.snapshot) is None:
            survivors = scan_logical(self.spark, ctx.snapshot, files).where(~self._condition(predicate))
        else:  # copied rows keep their stable row ids and commit versions (row tracking)
            scanned = scan_with_row_ids(self.spark, ctx.snapshot, files).where(~self._condition(predicate))
            survivors = scanned.select(*[F.col(quote(f.name)) for f in ctx.snapshot.schema.fields], *carried(scanned, updated=False))
        written = spark_job(f"{ctx.operation} rewrite", lambda: write_frame(survivors, ctx.snapshot))
        ctx.written.add_data_files(written.files)
        return written

    def check_new_values(
        self, ctx: DmlContext, predicate: BoundPredicate | None, assignments: Mapping[str, BoundExpression]
    ) -> None:
        """The whole UPDATE in one job: file tasks where the embedded evaluator is exact
        (``file_tasks``), else the row plan: Spark evaluates every new value of every matched row (ANSI
        casts fail the job), and the tasks check NOT NULL columns, build the DVs and write the new
        rows (``rows_job``). ``retire_rows`` and ``write_updated_rows`` then hand out the result;
        a failure here leaves nothing behind (the command removes the staging folder and DV files)."""
        if self.file_tasks_reason(ctx, predicate, assignments) is None:
            fused = self._file_tasks(ctx, ctx.plan.candidates, predicate, assignments)
            ctx.engine_state[_FUSED] = ctx.engine_state[_FILE_TASKS] = fused
            return
        sql = {name: value.sql for name, value in assignments.items()}
        snapshot = ctx.snapshot
        matched = scan_with_row_ids(self.spark, snapshot, ctx.plan.candidates).where(self._condition(predicate))
        # updated rows keep their stable row ids; their commit version becomes this commit's
        rows = matched.select(
            FILE_PATH_COL, ROW_INDEX_COL, *updated_projection(snapshot, sql, None, _alignments(ctx)), *carried(matched, updated=True)
        )
        layout = RowsLayout(value_columns=tuple(snapshot.schema.field_names))
        try:
            ctx.engine_state[_FUSED] = self.retire_and_write(ctx, ctx.plan.candidates, rows, layout)
        except SchemaViolationError as exc:
            raise self._name_failing_column(ctx, predicate, sql, exc) from exc.__cause__

    def _name_failing_column(
        self, ctx: DmlContext, predicate: BoundPredicate | None, sql: Mapping[str, str], error: SchemaViolationError
    ) -> SchemaViolationError:
        """Re-evaluate the assignments one at a time to say which column's value does not fit."""
        if "NULL" in str(error) and "NOT NULL" in str(error):
            return error
        matched = self._matched_rows(ctx, predicate)
        # the job also evaluated the condition: if that is what fails, it is no value's fault
        spark_job(f"the condition of {ctx.operation}", matched.count)
        for name, text in sql.items():
            field = ctx.snapshot.schema.get(name)
            value = align_column(F.expr(text), _alignments(ctx).get(name))
            target = castable_spark_type(field)
            misfit = F.count_if(value.isNotNull() & value.try_cast(target).isNull()).alias("n")
            try:  # try_cast never raises: a non-zero count, or a raising value expression, names the column
                culprit = bool(matched.agg(misfit).collect()[0]["n"])
                reason = "does not cast to the column type"
            except Exception as exc:
                culprit = True
                reason = spark_errors.spark_error_class(exc) or type(exc).__name__
            if culprit:
                return SchemaViolationError(
                    f"the value {text!r} does not fit column {name!r} of type {field.type.simple_string()} "
                    f"({reason}); nothing was written"
                )
        return error

    def write_updated_rows(
        self,
        ctx: DmlContext,
        predicate: BoundPredicate | None,
        assignments: Mapping[str, BoundExpression],
        rewrite_files: Sequence[AddFile],
    ) -> WrittenRows:
        """The updated rows the retire-and-write job wrote, plus the unmatched rows of the files the
        rewrite threshold sends to copy-on-write (their matched rows are among the updated ones)."""
        fused: RetiredAndWritten = ctx.engine_state[_FUSED]
        if not rewrite_files or predicate is None or _FILE_TASKS in ctx.engine_state:
            # without a predicate no row survives; file tasks wrote the survivors in the same pass
            return fused.written
        started = time.monotonic()
        survivors = self.write_survivors(ctx, rewrite_files, predicate)
        updated = fused.written
        return WrittenRows(
            [*updated.files, *survivors.files],
            updated.rows + survivors.rows,
            updated.bytes + survivors.bytes,
            updated.elapsed_ms + int((time.monotonic() - started) * 1000),
        )

    # --- change data feed ------------------------------------------------------------------------------

    def write_change_data(
        self, ctx: DmlContext, predicate: BoundPredicate | None, assignments: Mapping[str, BoundExpression] | None
    ) -> list[AddFile]:
        matched = self._matched_rows(ctx, predicate)
        if assignments is None:
            frames = [tagged(matched, table_columns(ctx), DELETE)]
        else:
            sql = {name: value.sql for name, value in assignments.items()}
            frames = [
                tagged(matched, table_columns(ctx), UPDATE_PREIMAGE),
                tagged(matched, updated_projection(ctx.snapshot, sql, None, _alignments(ctx)), UPDATE_POSTIMAGE),
            ]
        adds = spark_job(f"{ctx.operation} change data", lambda: write_change_frames(ctx, frames), value_error=True)
        return adds

    def write_inserted_change_data(self, ctx: DmlContext, adds: Sequence[AddFile]) -> list[AddFile]:
        """Every row of the new files ``adds`` as ``insert`` change rows (see ``Executor``): read
        and written on the driver by the embedded executor, as the feed reader reads change rows;
        only a replaceWhere write whose delete rewrote files asks for them."""
        return LocalExecutor().write_inserted_change_data(ctx, adds)

    def close(self) -> None:
        for frame in self._persisted:
            frame.unpersist()
        self._persisted.clear()

