"""MERGE execution: candidates, one join, clause evaluation, then DVs for retired rows and new files.

Order of work is what keeps failures clean. Everything that can reject the MERGE runs before a
single byte is written: binding (unknown columns, scoping), static casts (Spark analysis),
the cardinality check (a target row matched by several source rows), and a validation pass
over the new rows (values that do not cast to the target type, NULLs into NOT NULL columns).
Only then are deletion vectors and data files written, and one commit makes them visible.

The joined frame is persisted once and feeds the cardinality check, the per-clause counts and
validation, the DV job (row ids of updated and deleted target rows) and the write of new rows.
Target columns are renamed to ``__t<i>`` and source columns to ``__s<j>`` so that same-named
columns of both sides can coexist; clause expressions are rewritten to those names from their
bound trees, never by string substitution.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType as SparkStructType

from dvengine.commands.context import DmlContext, check_dml_allowed, check_dv_mode_allowed, open_dml
from dvengine.commands.merge_clauses import (
    BoundClause,
    ClauseAction,
    ClauseKind,
    MergeClause,
    MergeScope,
    bind_clauses,
    bind_condition,
    operation_parameters,
)
from dvengine.commands.merge_evolution import evolve_for_merge
from dvengine.commands.merge_metrics import merge_metrics
from dvengine.commands.options import resolve_options
from dvengine.commands.retirement import RowRetirement
from dvengine.engine.spark.columns import predicate_column_to_sql, value_column_to_sql
from dvengine.engine.spark.executor import SparkExecutor, spark_job
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.merge_prune import ConditionParts, derive_target_predicate, split_condition
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, logical_spark_type, scan_logical, spark_schema
from dvengine.engine.spark.write_api import dataframe_schema
from dvengine.engine.spark.writer import write_parquet_files
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    MergeCardinalityError,
    SchemaMismatchError,
    SchemaViolationError,
)
from dvengine.expressions import BoundExpression, BoundPredicate, to_spark_sql
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import StructField, StructType
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
    """``MergeScope.to_sql`` for a session: Columns resolved against empty aliased frames of both sides."""
    empty_target = spark.createDataFrame([], spark_schema(target_schema)).alias(target_alias)
    empty_joined = empty_target.crossJoin(spark.createDataFrame([], source_schema).alias(source_alias))

    def to_sql(value: object, is_predicate: bool) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, Column):
            raise TypeError(f"a MERGE condition or value must be a SQL string or a pyspark Column, got {type(value).__name__}")
        return predicate_column_to_sql(value, empty_joined) if is_predicate else value_column_to_sql(value, empty_joined)

    return to_sql


def _first_true(clauses: Sequence[BoundClause], names: _Names) -> Column:
    """CASE WHEN cond1 THEN id1 WHEN cond2 THEN id2 ... END: Delta's first-matching-clause rule."""
    result: Column | None = None
    for c in clauses:
        cond = F.lit(True) if c.condition is None else names.sql(c.condition)
        result = F.when(cond, F.lit(c.clause_id)) if result is None else result.when(cond, F.lit(c.clause_id))
    return result if result is not None else F.lit(None).cast("int")


def _value_columns(snapshot: Snapshot, clauses: Sequence[BoundClause], names: _Names) -> list[Column]:
    """One column per target field: the value the row's clause gives it (NULL for non-writing rows)."""
    columns: list[Column] = []
    for f in snapshot.schema.fields:
        value: Column | None = None
        for c in clauses:
            if not c.writes_row:
                continue
            assigned = c.assignments.get(f.name)
            if assigned is not None:
                expr = names.sql(assigned)
            elif c.action is ClauseAction.UPDATE:
                expr = F.col(names.target[f.name])
            else:
                expr = F.lit(None)
            hit = F.col(CLAUSE) == F.lit(c.clause_id)
            value = F.when(hit, expr) if value is None else value.when(hit, expr)
        columns.append((value if value is not None else F.lit(None)).alias(names.target[f.name]))
    return columns


def _only_unconditional_delete(matched: Sequence[BoundClause]) -> bool:
    return len(matched) == 1 and matched[0].action is ClauseAction.DELETE and matched[0].condition is None


def _num_records(adds: Sequence[AddFile]) -> int:
    return sum(add.num_records or 0 for add in adds)


class _Timer:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)


def execute_merge(spark: SparkSession, req: MergeRequest) -> dict[str, Any]:
    total = _Timer()
    if not req.clauses:
        raise InvalidArgumentError("a MERGE needs at least one WHEN clause")
    options = resolve_options(lambda key: spark.conf.get(key, None), req.mode)
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
    matched = [c for c in clauses if c.kind is ClauseKind.MATCHED]
    not_matched = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED]
    by_source = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE]
    insert_only = not matched and not by_source

    source = req.source.select(
        *[F.col(quote(name)).alias(internal) for name, internal in names.source.items()], F.lit(True).alias(S_PRESENT)
    ).persist(StorageLevel.MEMORY_AND_DISK)
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
            snapshot, "MERGE", options, None if by_source else derived, operation_parameters(condition, clauses)
        )
        evolution.apply(ctx.transaction)
        plan = ctx.plan

        needed = None
        if insert_only:
            needed = {name for q, name in condition.qualified_columns if q == scope.target_alias}
        target = scan_logical(spark, snapshot, plan.candidates, columns=needed, keep_row_ids=True)
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
            F.lit(True).alias(T_PRESENT),
        )
        how = "left_anti" if insert_only else {
            (False, False): "inner", (True, False): "left", (False, True): "right", (True, True): "full"
        }[(bool(not_matched), bool(by_source))]
        if how in ("inner", "left") and num_source_rows <= BROADCAST_SOURCE_MAX_ROWS:
            # Same rows as source LEFT/INNER JOIN target, but with the small source as the hash-join
            # build side: Spark streams the target scan instead of shuffling every target row.
            joined = target.join(F.broadcast(source), names.sql(condition), "right" if how == "left" else "inner")
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
        work = work.persist(StorageLevel.MEMORY_AND_DISK)
        run = _Run(spark, ctx, condition, clauses, names, check_duplicates, num_source_rows, total)
        with ctx.cleaning_up_on_failure():  # DV and data files of a MERGE that did not commit
            return spark_job("MERGE", lambda: _apply(run, work))
    finally:
        if work is not None:
            work.unpersist()
        source.unpersist()


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


def _apply(run: _Run, work: DataFrame) -> dict[str, Any]:
    spark, ctx, clauses, names = run.spark, run.ctx, run.clauses, run.names
    snapshot, plan = ctx.snapshot, ctx.plan
    scan = _Timer()
    writing = [c.clause_id for c in clauses if c.writes_row]
    retiring = [c.clause_id for c in clauses if c.retires_target_row]
    fields = list(snapshot.schema.fields)
    typed_names = [names.target[f.name] for f in fields]
    valued = _analyze(lambda: work.select(CLAUSE, *_value_columns(snapshot, clauses, names)),
                      InvalidPredicateError, "cannot evaluate a MERGE assignment")
    tried = [F.col(n).try_cast(logical_spark_type(f)) for n, f in zip(typed_names, fields)]
    _analyze(lambda: valued.select(*tried), SchemaViolationError, "a MERGE assignment cannot be cast to its target column type")

    if run.check_duplicates:
        both = work.where(F.col(T_PRESENT).isNotNull() & F.col(S_PRESENT).isNotNull())
        duplicate = both.groupBy(FILE_PATH_COL, ROW_INDEX_COL).count().where(F.col("count") > 1).limit(1).collect()
        if duplicate:
            raise MergeCardinalityError(
                "cannot perform MERGE: multiple source rows matched the same target row and could modify it in "
                "conflicting ways (Delta's DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE); deduplicate the "
                "source or make the condition match at most one source row per target row; nothing was written"
            )

    counts = _clause_counts_and_validate(valued, tried, fields, typed_names, writing)
    retired = RowRetirement()
    if any(counts.get(cid, 0) for cid in retiring):
        ids = work.where(F.col(CLAUSE).isin(retiring)).select(FILE_PATH_COL, ROW_INDEX_COL)
        if not run.check_duplicates:
            ids = ids.distinct()
        retired = SparkExecutor(spark).retire_row_ids(ctx, plan.candidates, ids, time.monotonic())
    scan_ms = scan.ms()

    rewrite = _Timer()
    new_rows = sum(counts.get(cid, 0) for cid in writing)
    adds: list[AddFile] = []
    if new_rows or retired.files_to_rewrite:
        raw = valued.where(F.col(CLAUSE).isin(writing))
        out = raw.select(*[F.col(n).cast(logical_spark_type(f)).alias(f.name) for n, f in zip(typed_names, fields)])
        if retired.files_to_rewrite:
            ids = work.where(F.col(CLAUSE).isin(retiring)).select(FILE_PATH_COL, ROW_INDEX_COL)
            survivors = (
                scan_logical(spark, snapshot, retired.files_to_rewrite, keep_row_ids=True)
                .join(ids, on=[FILE_PATH_COL, ROW_INDEX_COL], how="left_anti")
                .select(*[F.col(quote(f.name)) for f in fields])
            )
            out = out.unionByName(survivors)
        # Small outputs (the common upsert) go to few files instead of one per shuffle partition.
        estimate = new_rows + sum(a.live_records or 0 for a in retired.files_to_rewrite)
        out = out.coalesce(max(1, -(-estimate // ROWS_PER_OUTPUT_FILE)))  # never raises the partition count
        adds = spark_job(
            "MERGE",
            lambda: write_parquet_files(
                out, snapshot.table_root, snapshot.schema, snapshot.partition_columns,
                num_indexed_cols(snapshot.configuration),
            ),
            value_error=True,
        )
        ctx.written.add_data_files(adds)
    rewrite_ms = rewrite.ms() if adds else 0

    metrics = merge_metrics(
        clauses, counts, not run.check_duplicates, run.num_source_rows, retired, adds, plan, scan_ms, rewrite_ms, "spark"
    )
    ctx.started = run.total.started  # executionTimeMs covers binding and the source aggregation too
    ctx.transaction.add_actions([*retired.actions, *adds])
    return ctx.finish(metrics)


def _analyze(build: Callable[[], Any], error: type[Exception], what: str) -> Any:
    """Run a frame-building step (Spark analyses eagerly) and turn analysis errors into ``error``."""
    try:
        return build()
    except AnalysisException as exc:
        raise error(f"{what}: {exc}") from exc


def _clause_counts_and_validate(
    valued: DataFrame, tried: list[Column], fields: Sequence[StructField], typed_names: list[str], writing: list[int]
) -> dict[int, int]:
    """Rows per clause, and in the same job the checks on new values (uncastable, NULL into NOT NULL)."""
    is_writing = F.col(CLAUSE).isin(writing)
    checks: list[Column] = []
    for i, (name, f) in enumerate(zip(typed_names, fields)):
        checks.append(F.when(F.col(name).isNotNull() & tried[i].isNull(), 1).otherwise(0).alias(f"bad{i}"))
        if not f.nullable:
            checks.append(F.when(is_writing & tried[i].isNull(), 1).otherwise(0).alias(f"null{i}"))
    check_names = [f"bad{i}" for i in range(len(fields))] + [f"null{i}" for i, f in enumerate(fields) if not f.nullable]
    rows = (
        valued.select(CLAUSE, *checks)
        .groupBy(CLAUSE)
        .agg(F.count(F.lit(1)).alias("__n"), *[F.sum(F.col(n)).alias(n) for n in check_names])
        .collect()
    )
    counts = {int(r[CLAUSE]): int(r["__n"]) for r in rows if r[CLAUSE] is not None}
    bad = [f.name for i, f in enumerate(fields) if any((r[f"bad{i}"] or 0) > 0 for r in rows)]
    if bad:
        raise SchemaViolationError(
            f"MERGE would write value(s) that cannot be cast to the target type of column(s) {bad}; nothing was written"
        )
    nulls = [f.name for i, f in enumerate(fields) if not f.nullable and any((r[f"null{i}"] or 0) > 0 for r in rows)]
    if nulls:
        raise SchemaViolationError(f"MERGE would write NULL into NOT NULL column(s) {nulls}; nothing was written")
    return counts
