"""MERGE execution: candidates, one join, and one job that evaluates clauses, writes DVs and new files.

Binding errors (unknown columns, scoping) and static casts (Spark analysis) are refused before
any job runs. The join then feeds a single retire-and-write job (``rows_job``): its tasks check
cardinality (a target row matched by several source rows), values that do not cast to the
target type and NULLs into NOT NULL columns, build DVs and write the new rows. A refusal fails
that job, and the command removes whatever any task wrote, so a refused MERGE leaves the table
folder as it was; one commit makes a successful one visible. Only the matched pairs of a small
source are kept (see ``_small_source_left_join``), never a copy of the target: a small upsert
costs the source summary, the matched-pairs pass and that one job (jobs per command are
recorded by the benchmark harness).
Target columns are renamed to ``__t<i>`` and source columns to ``__s<j>`` so that same-named
columns of both sides can coexist; clause expressions are rewritten to those names from their
bound trees, never by string substitution.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField as SparkStructField
from pyspark.sql.types import StructType as SparkStructType

from dvengine.commands.change_data import change_file_metrics, register_change_files, writes_change_data
from dvengine.commands.context import DmlContext, check_dml_allowed, check_dv_mode_allowed, open_dml
from dvengine.commands.merge_clauses import (
    BoundClause,
    ClauseAction,
    ClauseKind,
    MergeClause,
    MergeScope,
    bind_clauses,
    bind_condition,
    identity_to_assign,
    operation_parameters,
    row_level_safe,
)
from dvengine.commands.merge_evolution import evolve_for_merge
from dvengine.commands.merge_metrics import merge_metrics
from dvengine.commands.options import resolve_options, session_conf
from dvengine.commands.retirement import RowRetirement
from dvengine.commands.struct_cast import Alignment, assignment_alignment, keeps_target_fields
from dvengine.commands.write import record_marks
from dvengine.engine.spark.change_data import merge_change_frames, write_change_frames
from dvengine.engine.spark.columns import predicate_column_to_sql, value_column_to_sql
from dvengine.engine.spark.empty_frames import empty_frame
from dvengine.engine.spark.executor import SparkExecutor, analyzed_type, spark_job
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.identity_values import IdentityTarget, with_identity_values
from dvengine.engine.spark.merge_prune import ConditionParts, derive_target_predicate, split_condition
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, logical_spark_type, spark_schema
from dvengine.engine.spark.row_ids import ROW_COMMIT_VERSION, ROW_ID, carried, scan_with_row_ids
from dvengine.engine.spark.rows_job import RowsLayout
from dvengine.engine.spark.struct_align import align_column
from dvengine.engine.spark.write_api import dataframe_schema
from dvengine.engine.spark.writer import write_parquet_files
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    SchemaMismatchError,
    SchemaViolationError,
)
from dvengine.expressions import BoundExpression, BoundPredicate, to_spark_sql
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType, holds_struct
from dvengine.read.row_ids import tracked_columns
from dvengine.writing.identity import identity_columns
from dvengine.writing.stats import num_indexed_cols

T_PRESENT = "__merge_tp"
S_PRESENT = "__merge_sp"
CLAUSE = "__merge_clause"
DEFAULT_TARGET_ALIAS = "__target"
ROWS_PER_OUTPUT_FILE = 1_000_000
DEFAULT_SOURCE_ALIAS = "__source"


@dataclass(frozen=True)
class MergeRequest:
    table_root: str
    target_alias: str | None
    source: DataFrame
    source_alias: str | None
    condition: str | Column
    clauses: Sequence[MergeClause]
    mode: str | None = None
    schema_evolution: bool = False  # withSchemaEvolution() or the auto-merge conf


@dataclass
class _Names:
    """Internal column names of the join and the rename map for clause expressions."""

    target: dict[str, str] = field(default_factory=dict)  # logical target name -> __t<i>
    source: dict[str, str] = field(default_factory=dict)  # source column name -> __s<j>
    rename: dict[str, str] = field(default_factory=dict)  # alias.name -> internal

    def sql(self, expr: BoundExpression) -> Column:
        return F.expr(to_spark_sql(expr, self.rename))


# Sources up to this many rows are broadcast to every task of the target scan.
BROADCAST_SOURCE_MAX_ROWS = 1_000_000


def _scope(spark: SparkSession, snapshot: Snapshot, req: MergeRequest) -> tuple[MergeScope, _Names]:
    target_alias = req.target_alias or DEFAULT_TARGET_ALIAS
    source_alias = req.source_alias or DEFAULT_SOURCE_ALIAS
    if target_alias.lower() == source_alias.lower():
        raise InvalidArgumentError(f"the target and the source must have different aliases (both are {target_alias!r})")
    lowered = [c.lower() for c in req.source.columns]
    if len(set(lowered)) != len(lowered):
        raise SchemaMismatchError(f"the source has duplicate column names (case-insensitive): {req.source.columns}")
    source_schema = dataframe_schema(req.source)
    to_sql = column_resolver(spark, snapshot.schema, req.source.schema, target_alias, source_alias)
    scope = MergeScope(target_alias, source_alias, snapshot.schema, source_schema, to_sql, req.schema_evolution)
    names = _Names()
    for i, f in enumerate(snapshot.schema.fields):
        names.target[f.name] = f"__t{i}"
        names.rename[f"{target_alias}.{f.name}"] = f"__t{i}"
    for j, name in enumerate(req.source.columns):
        names.source[name] = f"__s{j}"
        names.rename[f"{source_alias}.{name}"] = f"__s{j}"
    return scope, names


def column_resolver(
    spark: SparkSession, target_schema: StructType, source_schema: SparkStructType, target_alias: str, source_alias: str
) -> Callable[[object, bool], str]:
    """``MergeScope.to_sql`` for a session: Columns resolved against empty aliased frames of both
    sides, built on the first Column (a MERGE given only SQL strings never needs them)."""
    joined: list[DataFrame] = []

    def empty_joined() -> DataFrame:
        if not joined:
            empty_target = empty_frame(spark, spark_schema(target_schema)).alias(target_alias)
            joined.append(empty_target.crossJoin(empty_frame(spark, source_schema).alias(source_alias)))
        return joined[0]

    def to_sql(value: object, is_predicate: bool) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, Column):
            raise TypeError(f"a MERGE condition or value must be a SQL string or a pyspark Column, got {type(value).__name__}")
        frame = empty_joined()
        return predicate_column_to_sql(value, frame) if is_predicate else value_column_to_sql(value, frame)

    return to_sql


def _first_true(clauses: Sequence[BoundClause], names: _Names) -> Column:
    """CASE WHEN cond1 THEN id1 WHEN cond2 THEN id2 ... END: Delta's first-matching-clause rule."""
    result: Column | None = None
    for c in clauses:
        cond = F.lit(True) if c.condition is None else names.sql(c.condition)
        result = F.when(cond, F.lit(c.clause_id)) if result is None else result.when(cond, F.lit(c.clause_id))
    return result if result is not None else F.lit(None).cast("int")


def _assigned_column(
    clause: BoundClause, f: StructField, names: _Names, alignments: Mapping[tuple[int, str], Alignment], evolution: bool
) -> Column:
    """The clause's value for ``f``; a struct-holding value is rebuilt by name into ``f``'s type
    first (``alignments``, see :func:`plan_alignments`: Spark's own cast would match struct fields
    by position), so every clause's value has the column's field names and order."""
    expr = names.sql(clause.assignments[f.name])
    alignment = alignments.get((clause.clause_id, f.name))
    if alignment is None:
        return expr
    current = F.col(names.target[f.name]) if keeps_target_fields(clause, evolution) else None
    return align_column(expr, alignment, current)


def _value_columns(
    snapshot: Snapshot,
    clauses: Sequence[BoundClause],
    names: _Names,
    alignments: Mapping[tuple[int, str], Alignment],
    evolution: bool,
) -> list[Column]:
    """One column per target field: the value the row's clause gives it (NULL for non-writing rows)."""
    columns: list[Column] = []
    for f in snapshot.schema.fields:
        value: Column | None = None
        for c in clauses:
            if not c.writes_row:
                continue
            assigned = c.assignments.get(f.name)
            if assigned is not None:
                expr = _assigned_column(c, f, names, alignments, evolution)
            elif c.action is ClauseAction.UPDATE:
                expr = F.col(names.target[f.name])
            else:
                expr = F.lit(None)
            hit = F.col(CLAUSE) == F.lit(c.clause_id)
            value = F.when(hit, expr) if value is None else value.when(hit, expr)
        columns.append((value if value is not None else F.lit(None)).alias(names.target[f.name]))
    return columns


def plan_alignments(
    spark: SparkSession,
    schema: StructType,
    source_schema: SparkStructType,
    names: _Names,
    clauses: Sequence[BoundClause],
    evolution: bool,
) -> dict[tuple[int, str], Alignment]:
    """For each clause value assigned to a struct-holding column, keyed by (clause id, column), how
    it is rebuilt into the column's type (``commands.struct_cast.assignment_alignment``), planned
    from its type as Spark's analyzer gives it over an empty frame of the joined columns: any
    expression (a plain column, ``named_struct``, ``IF`` / ``CASE``, ``array``, ``map``) goes by
    field name at every depth, as Delta's MERGE. SchemaMismatchError naming the column when Delta
    would refuse the value, InvalidPredicateError when it does not analyze; before any job runs."""
    frame: DataFrame | None = None
    out: dict[tuple[int, str], Alignment] = {}
    for clause in clauses:
        for name, value in clause.assignments.items():
            f = schema.get(name)
            if not holds_struct(f.type):
                continue
            if frame is None:
                frame = empty_frame(spark, SparkStructType(
                    [SparkStructField(names.target[t.name], logical_spark_type(t)) for t in schema.fields]
                    + [SparkStructField(names.source[s.name], s.dataType) for s in source_schema.fields]
                ))
            text = to_spark_sql(value, names.rename)
            try:
                value_type = analyzed_type(frame, text)
            except AnalysisException as exc:
                raise InvalidPredicateError(f"cannot evaluate a MERGE assignment: {exc}") from exc
            alignment = assignment_alignment(clause, f, evolution, value_type)
            if alignment is not None:
                out[(clause.clause_id, name)] = alignment
    return out


def _only_unconditional_delete(matched: Sequence[BoundClause]) -> bool:
    return len(matched) == 1 and matched[0].action is ClauseAction.DELETE and matched[0].condition is None


def _num_records(adds: Sequence[AddFile]) -> int:
    return sum(add.num_records or 0 for add in adds)


class _Timer:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


def _identity_targets(snapshot: Snapshot, clauses: Sequence[BoundClause], names: _Names) -> list[IdentityTarget]:
    """The identity columns some insert clause leaves to the table (``identity_to_assign``), with
    the rows that need new values: those whose clause is such an insert."""
    targets = []
    for name, spec in identity_columns(snapshot.schema).items():
        lacking = [c.clause_id for c in clauses if name in identity_to_assign(snapshot.schema, c)]
        if lacking:
            targets.append(IdentityTarget(names.target[name], spec, F.col(CLAUSE).isin(lacking)))
    return targets


def execute_merge(spark: SparkSession, req: MergeRequest) -> dict[str, Any]:
    total = _Timer()
    if not req.clauses:
        raise InvalidArgumentError("a MERGE needs at least one WHEN clause")
    options = resolve_options(session_conf(spark), req.mode)
    snapshot = load_snapshot(req.table_root)
    check_dml_allowed(snapshot, "MERGE")
    check_dv_mode_allowed(snapshot, options)
    evolution = evolve_for_merge(
        snapshot, dataframe_schema(req.source), req.target_alias or DEFAULT_TARGET_ALIAS, req.clauses, req.schema_evolution
    )
    snapshot = evolution.snapshot
    scope, names = _scope(spark, snapshot, req)
    condition = bind_condition(scope, req.condition, None)
    clauses = bind_clauses(scope, req.clauses)
    alignments = plan_alignments(spark, snapshot.schema, req.source.schema, names, clauses, req.schema_evolution)
    matched = [c for c in clauses if c.kind is ClauseKind.MATCHED]
    not_matched = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED]
    by_source = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE]
    insert_only = not matched and not by_source

    source = req.source.select(
        *[F.col(quote(name)).alias(internal) for name, internal in names.source.items()], F.lit(True).alias(S_PRESENT)
    ).persist(StorageLevel.MEMORY_AND_DISK)
    persisted: list[DataFrame] = []
    work: DataFrame | None = None
    try:
        source_rename = {k: v for k, v in names.rename.items() if k.lower().startswith(scope.source_alias.lower() + ".")}
        parts = (
            ConditionParts((), ())
            if by_source
            else split_condition(condition, scope.target_alias, scope.source_alias, snapshot.schema, source_rename)
        )
        target_types = {f.name: logical_spark_type(f) for f in snapshot.schema.fields}
        derived, num_source_rows = spark_job(
            "MERGE", lambda: derive_target_predicate(source, parts, snapshot.schema, target_types)
        )
        ctx = open_dml(
            snapshot,
            "MERGE",
            options,
            None if by_source else derived,
            operation_parameters(condition, clauses),
            row_level_safe(clauses),
            conf=session_conf(spark),
        )
        if ctx.repeat:
            return ctx.skip_repeat(merge_metrics(clauses, {}, False, 0, RowRetirement(), [], ctx.plan, 0, 0, "none"))
        evolution.apply(ctx.transaction)
        plan = ctx.plan

        needed = None
        if insert_only:
            needed = {name for q, name in condition.qualified_columns if q == scope.target_alias}
        elif not by_source and not writes_change_data(snapshot):  # change data needs whole pre-images
            needed = _target_columns_used(snapshot.schema, condition, clauses, scope.target_alias, req.schema_evolution)
        # with row tracking the target rows carry their stable ids (``row_ids``): an updated row keeps its id
        target = scan_with_row_ids(spark, snapshot, plan.candidates, columns=needed)
        if derived is not None:
            # Every matchable target row satisfies `derived` (source key range/IN list plus the
            # condition's target-only conjuncts); without not-matched-by-source clauses the other
            # target rows play no part, so drop them in the scan (pushed into Parquet, below the DV
            # anti-join) instead of carrying them through the join.
            target = target.where(F.expr(derived.sql))
        target = target.select(
            *[F.col(quote(f.name)).alias(names.target[f.name]) for f in snapshot.schema.fields if needed is None or f.name in needed],
            FILE_PATH_COL,
            ROW_INDEX_COL,
            *[F.col(c) for c in (ROW_ID, ROW_COMMIT_VERSION) if c in target.columns],
            F.lit(True).alias(T_PRESENT),
        )
        how = "left_anti" if insert_only else {
            (False, False): "inner", (True, False): "left", (False, True): "right", (True, True): "full"
        }[(bool(not_matched), bool(by_source))]
        small_source = num_source_rows <= BROADCAST_SOURCE_MAX_ROWS
        if how == "inner" and small_source:
            # The small source as the hash-join build side: Spark streams the target scan.
            joined = target.join(F.broadcast(source), names.sql(condition), "inner")
        elif how in ("left", "left_anti") and small_source:
            joined = _small_source_left_join(target, source, names.sql(condition), how == "left", persisted)
        else:
            joined = source.join(target, names.sql(condition), how)
        t_present = F.lit(False) if insert_only else F.coalesce(F.col(T_PRESENT), F.lit(False))
        s_present = F.coalesce(F.col(S_PRESENT), F.lit(False))
        clause_col = (
            F.when(t_present & s_present, _first_true(matched, names))
            .when(s_present, _first_true(not_matched, names))
            .when(t_present, _first_true(by_source, names))
        )
        check_duplicates = not insert_only and not _only_unconditional_delete(matched)
        keep = F.col(CLAUSE).isNotNull()
        if check_duplicates:
            keep = keep | (t_present & s_present)
        try:
            work = joined.withColumn(CLAUSE, clause_col).where(keep)
        except AnalysisException as exc:
            raise InvalidPredicateError(f"cannot evaluate the MERGE condition or clause conditions: {exc}") from exc
        run = _Run(
            spark, ctx, condition, clauses, names, check_duplicates, num_source_rows, total, persisted, req.schema_evolution,
            alignments,
        )
        with ctx.cleaning_up_on_failure():  # DV and data files of a MERGE that did not commit
            return spark_job("MERGE", lambda: _apply(run, work))
    finally:
        for frame in persisted:
            frame.unpersist()
        source.unpersist()


def _target_columns_used(
    schema: StructType, condition: BoundPredicate, clauses: Sequence[BoundClause], target_alias: str, evolution: bool
) -> set[str]:
    """Target columns the MERGE reads: the condition's, the clauses' (conditions and values),
    those an UPDATE keeps (not assigned), and the struct columns whose fields an evolving
    UPDATE SET * keeps (``keeps_target_fields``). A typical ``updateAll`` upsert needs only the key, so the
    target scan skips the other columns (Parquet is columnar: the ``name`` strings of 10M rows
    cost more to read than the key) and the matched pairs kept in memory stay narrow."""

    def used(expr: BoundExpression | None) -> set[str]:
        return set() if expr is None else {name for q, name in expr.qualified_columns if q == target_alias}

    needed = used(condition)
    for clause in clauses:
        needed |= used(clause.condition)
        for value in clause.assignments.values():
            needed |= used(value)
        if clause.action is ClauseAction.UPDATE:
            needed |= {f.name for f in schema.fields if f.name not in clause.assignments}
        if keeps_target_fields(clause, evolution):
            needed |= {name for name in clause.assignments if holds_struct(schema.get(name).type)}
    return needed


def _small_source_left_join(
    target: DataFrame, source: DataFrame, condition: Column, keep_matched: bool, persisted: list[DataFrame]
) -> DataFrame:
    """``source LEFT JOIN target`` (or ``LEFT ANTI``) for a source small enough to broadcast,
    without shuffling the target.

    A left outer join can only build its hash table on the target side, which would shuffle every
    target row (measured: 10 s for a 100k-key upsert into 10M rows here). Instead the target is
    streamed once through an inner hash join against the broadcast source; the matched pairs (at
    most the source's size times the matches per key) are kept, and the source rows without a
    match are found by an anti join against those matched target rows, broadcast in turn.
    """
    matched = target.join(F.broadcast(source), condition, "inner").persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(matched)
    unmatched = source.join(F.broadcast(matched.select(*target.columns)), condition, "left_anti")
    if not keep_matched:
        return unmatched
    return matched.unionByName(unmatched, allowMissingColumns=True)


@dataclass(frozen=True)
class _Run:
    """Everything the second half of a MERGE needs, resolved by the first half."""

    spark: SparkSession
    ctx: DmlContext
    condition: BoundPredicate
    clauses: list[BoundClause]
    names: _Names
    check_duplicates: bool
    num_source_rows: int
    total: _Timer
    persisted: list[DataFrame]  # frames to unpersist once the MERGE is done
    evolution: bool  # schema evolution on: nested values fill fields they lack (commands/struct_cast)
    alignments: Mapping[tuple[int, str], Alignment]  # struct values rebuilt by name (plan_alignments)


WRITE = "__merge_write"
RETIRE = "__merge_retire"
MATCH = "__merge_match"
BAD = "__merge_bad"


def _apply(run: _Run, work: DataFrame) -> dict[str, Any]:
    """Clause values, checks, DVs and new files in one Spark job (``SparkExecutor.retire_and_write``).

    Every check that can refuse the MERGE runs inside that job's tasks (cardinality, values that
    do not cast, NULLs into NOT NULL columns); a refusal fails the job and the command removes
    what any task wrote, so the table folder is as it was.
    """
    spark, ctx, clauses, names = run.spark, run.ctx, run.clauses, run.names
    snapshot, plan = ctx.snapshot, ctx.plan
    scan = _Timer()
    writing = [c.clause_id for c in clauses if c.writes_row]
    retiring = [c.clause_id for c in clauses if c.retires_target_row]
    fields = list(snapshot.schema.fields)
    typed_names = [names.target[f.name] for f in fields]
    presence = [F.col(c) for c in (T_PRESENT, S_PRESENT) if c in work.columns]
    valued = _analyze(
        lambda: work.select(
            CLAUSE, *_row_id_columns(work), *_stable_id_columns(work), *presence,
            *_value_columns(snapshot, clauses, names, run.alignments, run.evolution),
        ),
        InvalidPredicateError,
        "cannot evaluate a MERGE assignment",
    )
    # rows inserted without a value for an identity column get dense new values (``identity_values``);
    # the new high-water marks go into the commit, so a concurrent writer from the same marks conflicts
    valued, marks = with_identity_values(valued, _identity_targets(snapshot, clauses, names), run.persisted, "MERGE")
    record_marks(ctx.transaction, marks)
    tried = [F.col(n).try_cast(logical_spark_type(f)) for n, f in zip(typed_names, fields)]
    _analyze(lambda: valued.select(*tried), SchemaViolationError, "a MERGE assignment cannot be cast to its target column type")
    uncastable = F.concat_ws(",", *[F.when(F.col(n).isNotNull() & t.isNull(), F.lit(f.name)) for n, t, f in zip(typed_names, tried, fields)])
    flags = [
        F.coalesce(F.col(CLAUSE).isin(writing), F.lit(False)).alias(WRITE),
        F.coalesce(F.col(CLAUSE).isin(retiring), F.lit(False)).alias(RETIRE),
        uncastable.alias(BAD),
    ]
    if run.check_duplicates:
        flags.append((F.col(T_PRESENT).isNotNull() & F.col(S_PRESENT).isNotNull()).alias(MATCH))
    # written rows: updated ones keep their stable row id, inserts have none (NULL: fresh ids)
    rows = valued.select(
        FILE_PATH_COL, ROW_INDEX_COL, CLAUSE, *flags, *[t.alias(n) for n, t in zip(typed_names, tried)],
        *carried(valued, updated=True),
    )
    layout = RowsLayout(
        value_columns=tuple(typed_names),
        write_col=WRITE,
        retire_col=RETIRE,
        clause_col=CLAUSE,
        match_col=MATCH if run.check_duplicates else None,
        bad_values_col=BAD,
    )
    # rows without a target row (inserts) are spread by a hash of their values; Spark refuses to
    # hash maps, so map columns (also nested ones) are left out of it
    hashable = [F.col(n) for n, f in zip(typed_names, fields) if not _holds_map(f.type)]
    spread = F.hash(*hashable) if hashable else F.lit(0)
    fused = SparkExecutor(spark).retire_and_write(ctx, plan.candidates, rows, layout, spread)
    counts, retired = fused.clause_counts, fused.retirement
    adds = list(fused.written.files)
    scan_ms = scan.ms()

    rewrite = _Timer()
    if retired.files_to_rewrite:
        # Files over the rewrite threshold lose their DV: their unretired rows are copied to new files.
        ids = work.where(F.col(CLAUSE).isin(retiring)).select(FILE_PATH_COL, ROW_INDEX_COL)
        kept = scan_with_row_ids(spark, snapshot, retired.files_to_rewrite).join(
            ids, on=[FILE_PATH_COL, ROW_INDEX_COL], how="left_anti"
        )
        survivors = kept.select(*[F.col(quote(f.name)) for f in fields], *carried(kept, updated=False))
        estimate = sum(a.live_records or 0 for a in retired.files_to_rewrite)
        survivors = survivors.coalesce(max(1, -(-estimate // ROWS_PER_OUTPUT_FILE)))  # never raises the partition count
        copied = spark_job(
            "MERGE",
            lambda: write_parquet_files(
                survivors, snapshot.table_root, snapshot.schema, snapshot.partition_columns,
                num_indexed_cols(snapshot.configuration), materialized=tracked_columns(snapshot),
            ),
        )
        ctx.written.add_data_files(copied)
        adds += copied
    rewrite_ms = fused.written.elapsed_ms + (rewrite.ms() if retired.files_to_rewrite else 0)

    metrics = merge_metrics(
        clauses, counts, not run.check_duplicates, run.num_source_rows, retired, adds, plan, scan_ms, rewrite_ms, "spark"
    )
    ctx.started = run.total.started  # executionTimeMs covers binding and the source aggregation too
    ctx.transaction.add_actions([*retired.actions, *adds])
    changes_to_write = writes_change_data(snapshot) and any(c.kind is not ClauseKind.NOT_MATCHED for c in clauses)
    if changes_to_write and any(counts.values()):  # an insert-only MERGE's inserts are derived from its adds
        frames = merge_change_frames(ctx, clauses, work, valued, [names.target[f.name] for f in fields], CLAUSE)
        changes = register_change_files(ctx, write_change_frames(ctx, frames))
        metrics.update(change_file_metrics(changes, "MERGE"))
    return ctx.finish(metrics)


def _holds_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _holds_map(data_type.element_type)
    if isinstance(data_type, StructType):
        return any(_holds_map(f.type) for f in data_type.fields)
    return False


def _row_id_columns(work: DataFrame) -> list[Column]:
    """The target row's (file, row index), NULL where the row has none (inserts; insert-only MERGE)."""
    if FILE_PATH_COL in work.columns:
        return [F.col(FILE_PATH_COL), F.col(ROW_INDEX_COL)]
    return [F.lit(None).cast("string").alias(FILE_PATH_COL), F.lit(None).cast("long").alias(ROW_INDEX_COL)]


def _stable_id_columns(work: DataFrame) -> list[Column]:
    """The target row's stable row id and commit version where the table keeps them (row tracking)."""
    return [F.col(c) for c in (ROW_ID, ROW_COMMIT_VERSION) if c in work.columns]


def _analyze(build: Callable[[], Any], error: type[Exception], what: str) -> Any:
    """Run a frame-building step (Spark analyses eagerly) and turn analysis errors into ``error``."""
    try:
        return build()
    except AnalysisException as exc:
        raise error(f"{what}: {exc}") from exc
