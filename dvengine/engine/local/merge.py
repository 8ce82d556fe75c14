"""MERGE on the embedded executor: an Arrow hash join of a small source with the candidate rows.

The plan is the one Delta describes: target rows that can match are found by joining the source
with the candidate files' live rows on the condition's equality keys (Acero's hash join), the
rest of the condition filters the joined pairs, and each pair, unmatched source row and (with
NOT MATCHED BY SOURCE clauses) unmatched target row takes its first clause whose condition holds.
Matched target rows that are updated or deleted are retired with DVs (or their files rewritten
above the threshold); updated and inserted rows are written to new files; one commit.

Only conditions with at least one ``target.col = source.col`` key of the same type family, and
clause conditions and values the Arrow translation evaluates exactly, run here; anything else
raises NotLocallyEvaluableError before a byte is written, and ``auto`` runs the MERGE on Spark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

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
    operation_parameters,
)
from dvengine.commands.merge_evolution import evolve_for_merge
from dvengine.commands.merge_metrics import merge_metrics
from dvengine.commands.retirement import RowRetirement
from dvengine.engine.local.change_data import MergeChanges, write_change_rows
from dvengine.engine.local.executor import FileMatch, LocalExecutor, project
from dvengine.errors import (
    EvaluationError,
    InvalidArgumentError,
    InvalidPredicateError,
    MergeCardinalityError,
    NotLocallyEvaluableError,
    SchemaMismatchError,
    SchemaViolationError,
)
from dvengine.expressions import (
    BoundExpression,
    BoundPredicate,
    parse_predicate,
    to_pyarrow_expression,
    to_pyarrow_value,
)
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.refs import bound_refs, ref_of
from dvengine.expressions.trees import conjuncts
from dvengine.log import load_snapshot
from dvengine.planning.decisions import DmlOptions
from dvengine.protocol.schema import StructField, StructType, from_arrow_schema, to_arrow_type

DEFAULT_TARGET_ALIAS = "__target"
DEFAULT_SOURCE_ALIAS = "__source"
IN_LIST_MAX = 100  # beyond it [min, max]: parsing a longer list (sqlglot, ~0.14 ms a value) costs more than it saves
FILE_ID = "__merge_file"
ROW_ID = "__merge_row"
SOURCE_ID = "__merge_sid"
_INTEGRAL = ("byte", "short", "integer", "long")


@dataclass(frozen=True)
class LocalMergeRequest:
    table_root: str
    target_alias: str | None
    source: pa.Table
    source_alias: str | None
    condition: object
    clauses: Sequence[MergeClause]
    options: DmlOptions
    # Builds MergeScope.to_sql from (target schema, source schema, target alias, source alias) when
    # some expression is an engine object (a pyspark Column); None: SQL text only.
    resolver: Callable[[StructType, StructType, str, str], Callable[[object, bool], str]] | None = None
    schema_evolution: bool = False  # withSchemaEvolution() or the auto-merge conf


@dataclass(frozen=True)
class _Key:
    target: StructField
    source: StructField


def _family(f: StructField) -> str | None:
    name = f.type.name
    if name in _INTEGRAL:
        return "int"
    if name in ("string", "date"):
        return name
    return None


def _split(condition: BoundPredicate, target_alias: str, source_alias: str) -> tuple[list[_Key], list[exp.Expr]]:
    """Equality keys ``t.col = s.col`` (same type family) and the remaining conjuncts."""
    keys: list[_Key] = []
    rest: list[exp.Expr] = []
    for conj in conjuncts(condition.tree):
        if isinstance(conj, exp.EQ):
            left, right = ref_of(_unparen(conj.this)), ref_of(_unparen(conj.expression))
            if left is not None and right is not None and len(left.path) == 1 and len(right.path) == 1:
                pair = {left.qualifier: left, right.qualifier: right}
                t, s = pair.get(target_alias), pair.get(source_alias)
                if t is not None and s is not None and _family(t.leaf) is not None and _family(t.leaf) == _family(s.leaf):
                    keys.append(_Key(t.leaf, s.leaf))
                    continue
        rest.append(conj)
    return keys, rest


def _unparen(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _as_predicate(nodes: Sequence[exp.Expr]) -> BoundPredicate | None:
    if not nodes:
        return None
    tree: exp.Expr = nodes[0]
    for node in nodes[1:]:
        tree = exp.And(this=tree, expression=node)
    refs = bound_refs(tree)
    return BoundPredicate(
        sql=tree.sql(dialect="spark"),
        columns=frozenset(r.top for r in refs),
        qualified_columns=frozenset((r.qualifier, r.top) for r in refs),
        tree=tree,
    )


def _literal_sql(value: object, f: StructField) -> str:
    if isinstance(value, str):
        return str(exp.Literal.string(value).sql(dialect="spark"))
    if f.type.name == "date":
        return f"DATE '{value}'"
    return str(int(value))  # type: ignore[call-overload]


def _derive_target_predicate(source: pa.Table, keys: Sequence[_Key], target_schema: StructType) -> BoundPredicate | None:
    """Target-only predicate every matchable row satisfies: key IN (source keys) or within [min, max]."""
    conjuncts = []
    for key in keys:
        column = pc.drop_null(source.column(key.source.name))
        quoted = quote_identifier(key.target.name)
        if len(column) == 0:
            conjuncts.append("FALSE")
            continue
        distinct = pc.unique(column)
        if len(distinct) <= IN_LIST_MAX:
            values = sorted(distinct.to_pylist())
            conjuncts.append(f"{quoted} IN ({', '.join(_literal_sql(v, key.target) for v in values)})")
        else:
            bounds = pc.min_max(column).as_py()
            conjuncts.append(
                f"{quoted} >= {_literal_sql(bounds['min'], key.target)} AND {quoted} <= {_literal_sql(bounds['max'], key.target)}"
            )
    if not conjuncts:
        return None
    return parse_predicate(" AND ".join(f"({c})" for c in conjuncts), target_schema)


class _Plan:
    """Names of the joined table: target columns ``__t<i>``, source columns ``__s<j>``."""

    def __init__(self, scope: MergeScope) -> None:
        self.target = {f.name: f"__t{i}" for i, f in enumerate(scope.target_schema.fields)}
        self.source = {f.name: f"__s{j}" for j, f in enumerate(scope.source_schema.fields)}
        self.rename = {f"{scope.target_alias}.{k}".lower(): v for k, v in self.target.items()}
        self.rename.update({f"{scope.source_alias}.{k}".lower(): v for k, v in self.source.items()})

    def condition(self, predicate: BoundPredicate | None) -> Any:
        return pc.scalar(True) if predicate is None else to_pyarrow_expression(predicate, self.rename)

    def value(self, expr: BoundExpression, f: StructField) -> Any:
        return to_pyarrow_value(expr, f.type, self.rename)


def _check_local(plan: _Plan, clauses: Sequence[BoundClause], residual: BoundPredicate | None, target: StructType) -> None:
    """Translate every expression once so unsupported shapes fail before any work."""
    try:
        plan.condition(residual)
        for clause in clauses:
            plan.condition(clause.condition)
            for name, value in clause.assignments.items():
                plan.value(value, target.get(name))
    except NotLocallyEvaluableError:
        raise
    except InvalidPredicateError as exc:
        raise NotLocallyEvaluableError(str(exc)) from exc


def _first_clause(table: pa.Table, clauses: Sequence[BoundClause], plan: _Plan) -> np.ndarray:
    """Per row, the id of the first clause whose condition is TRUE (-1 when none)."""
    out = np.full(table.num_rows, -1, dtype=np.int64)
    if table.num_rows == 0:
        return out
    for clause in clauses:
        open_rows = out < 0
        if not open_rows.any():
            break
        if clause.condition is None:
            hit = np.ones(table.num_rows, dtype=bool)
        else:
            try:
                values = project(table, [plan.condition(clause.condition)], ["c"]).column(0)
            except (pa.ArrowInvalid, ArithmeticError) as exc:
                raise EvaluationError(f"MERGE clause condition {clause.condition.sql!r} failed: {exc}") from exc
            hit = np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)
        out[open_rows & hit] = clause.clause_id
    return out


def _new_rows(
    table: pa.Table, clause_ids: np.ndarray, clauses: Sequence[BoundClause], plan: _Plan, target: StructType
) -> tuple[dict[int, pa.Table], dict[int, int]]:
    """Rows written by each writing clause (by clause id), and the row count of every clause."""
    counts: dict[int, int] = {}
    out: dict[int, pa.Table] = {}
    for clause in clauses:
        mask = clause_ids == clause.clause_id
        n = int(mask.sum())
        counts[clause.clause_id] = n
        if not n or not clause.writes_row:
            continue
        rows = table.filter(pa.array(mask))
        expressions = []
        for f in target.fields:
            if f.name in clause.assignments:
                expressions.append(plan.value(clause.assignments[f.name], f))
            elif clause.action is ClauseAction.UPDATE:
                expressions.append(pc.field(plan.target[f.name]))
            else:
                expressions.append(pc.scalar(pa.scalar(None, to_arrow_type(f.type))))
        try:
            values = project(rows, expressions, target.field_names)
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise SchemaViolationError(f"MERGE would write a value that does not fit its target column: {exc}; nothing was written") from exc
        bad = [f.name for f in target.fields if not f.nullable and values.column(f.name).null_count]
        if bad:
            raise SchemaViolationError(f"MERGE would write NULL into NOT NULL column(s) {bad}; nothing was written")
        out[clause.clause_id] = values.cast(pa.schema([pa.field(f.name, to_arrow_type(f.type)) for f in target.fields]))
    return out, counts


def _target_rows(ctx: DmlContext, executor: LocalExecutor, plan: _Plan) -> tuple[pa.Table, list[FileMatch]]:
    """Live rows of the candidate files (all columns, renamed) with their file and row ids."""
    matches = executor._matches(ctx, ctx.plan.candidates, None, all_columns=True)
    tables = []
    for file_id, match in enumerate(matches):
        rows = match.rows
        assert rows is not None
        renamed = rows.rename_columns([plan.target[name] for name in rows.column_names])
        renamed = renamed.append_column(FILE_ID, pa.array(np.full(len(match.matched), file_id, dtype=np.int32)))
        tables.append(renamed.append_column(ROW_ID, pa.array(match.matched)))
    if not tables:
        schema = pa.schema(
            [pa.field(plan.target[f.name], to_arrow_type(f.type)) for f in ctx.snapshot.schema.fields]
            + [pa.field(FILE_ID, pa.int32()), pa.field(ROW_ID, pa.int64())]
        )
        return schema.empty_table(), matches
    return pa.concat_tables(tables), matches


def execute_local_merge(req: LocalMergeRequest) -> dict[str, Any]:
    """Run a MERGE in-process; NotLocallyEvaluableError (before any write) when it cannot."""
    started = time.monotonic()
    if not req.clauses:
        raise InvalidArgumentError("a MERGE needs at least one WHEN clause")
    snapshot = load_snapshot(req.table_root)
    check_dml_allowed(snapshot, "MERGE")
    check_dv_mode_allowed(snapshot, req.options)
    source_schema = from_arrow_schema(req.source.schema)
    lowered = [n.lower() for n in source_schema.field_names]
    if len(set(lowered)) != len(lowered):
        raise SchemaMismatchError(f"the source has duplicate column names (case-insensitive): {source_schema.field_names}")
    target_alias = req.target_alias or DEFAULT_TARGET_ALIAS
    source_alias = req.source_alias or DEFAULT_SOURCE_ALIAS
    if target_alias.lower() == source_alias.lower():
        raise InvalidArgumentError(f"the target and the source must have different aliases (both are {target_alias!r})")
    evolution_plan = evolve_for_merge(snapshot, source_schema, target_alias, req.clauses, req.schema_evolution)
    snapshot = evolution_plan.snapshot
    evolution = req.schema_evolution
    if req.resolver is None:
        scope = MergeScope(target_alias, source_alias, snapshot.schema, source_schema, schema_evolution=evolution)
    else:
        to_sql = req.resolver(snapshot.schema, source_schema, target_alias, source_alias)
        scope = MergeScope(target_alias, source_alias, snapshot.schema, source_schema, to_sql, evolution)
    condition = bind_condition(scope, req.condition, None)
    clauses = bind_clauses(scope, req.clauses)
    by_source = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE]
    keys, rest = _split(condition, target_alias, source_alias)
    if not keys:
        raise NotLocallyEvaluableError("the MERGE condition has no target.col = source.col key the local hash join can use")
    plan = _Plan(scope)
    residual = _as_predicate(rest)
    _check_local(plan, clauses, residual, snapshot.schema)

    derived = None if by_source else _derive_target_predicate(req.source, keys, snapshot.schema)
    ctx = open_dml(snapshot, "MERGE", req.options, derived, operation_parameters(condition, clauses))
    ctx.started = started  # executionTimeMs covers binding too, as on Spark
    evolution_plan.apply(ctx.transaction)
    with ctx.cleaning_up_on_failure():
        return _run(ctx, LocalExecutor(), req.source, plan, keys, residual, clauses)


def _run(
    ctx: DmlContext,
    executor: LocalExecutor,
    source: pa.Table,
    plan: _Plan,
    keys: Sequence[_Key],
    residual: BoundPredicate | None,
    clauses: Sequence[BoundClause],
) -> dict[str, Any]:
    schema = ctx.snapshot.schema
    matched_clauses = [c for c in clauses if c.kind is ClauseKind.MATCHED]
    insert_clauses = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED]
    by_source = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE]
    insert_only = not matched_clauses and not by_source  # Delta writes no change files: readers derive inserts
    scan_started = time.monotonic()
    src = source.rename_columns([plan.source[f.name] for f in (from_arrow_schema(source.schema)).fields])
    src = src.append_column(SOURCE_ID, pa.array(np.arange(src.num_rows, dtype=np.int64)))
    target, matches = _target_rows(ctx, executor, plan)

    # Join keys must have one Arrow type on both sides: widen integers to int64.
    left_keys, right_keys = [], []
    for i, key in enumerate(keys):
        lname, rname = f"__kt{i}", f"__ks{i}"
        ltype = pa.int64() if _family(key.target) == "int" else to_arrow_type(key.target.type)
        target = target.append_column(lname, target.column(plan.target[key.target.name]).cast(ltype))
        src = src.append_column(rname, src.column(plan.source[key.source.name]).cast(ltype))
        left_keys.append(lname)
        right_keys.append(rname)
    try:
        pairs = target.join(src, keys=left_keys, right_keys=right_keys, join_type="inner", use_threads=True)
    except pa.ArrowNotImplementedError as exc:  # e.g. a nested column type the hash join cannot carry
        raise NotLocallyEvaluableError(f"the local hash join cannot carry these columns: {exc}") from exc
    if residual is not None and pairs.num_rows:
        try:
            pairs = pairs.filter(plan.condition(residual))
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise EvaluationError(f"the MERGE condition failed while evaluating rows: {exc}") from exc

    check_duplicates = bool(matched_clauses) and not (
        len(matched_clauses) == 1 and matched_clauses[0].action is ClauseAction.DELETE and matched_clauses[0].condition is None
    )
    if check_duplicates and pairs.num_rows:
        ids = pc.add(pc.multiply(pairs.column(FILE_ID).cast(pa.int64()), 2**40), pairs.column(ROW_ID))
        if len(pc.unique(ids)) != pairs.num_rows:
            raise MergeCardinalityError(
                "cannot perform MERGE: multiple source rows matched the same target row and could modify it in "
                "conflicting ways (Delta's DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE); deduplicate the "
                "source or make the condition match at most one source row per target row; nothing was written"
            )

    outputs: list[pa.Table] = []
    counts: dict[int, int] = {}
    changes = MergeChanges(plan.target, schema, (FILE_ID, ROW_ID)) if writes_change_data(ctx.snapshot) and not insert_only else None
    retire: dict[int, list[np.ndarray]] = {}

    def retire_rows(table: pa.Table, ids: np.ndarray, retiring: set[int]) -> None:
        mask = np.isin(ids, list(retiring))
        if mask.any():
            files = table.column(FILE_ID).to_numpy()[mask]
            rows = table.column(ROW_ID).to_numpy()[mask]
            for file_id in np.unique(files):
                retire.setdefault(int(file_id), []).append(rows[files == file_id])

    if matched_clauses and pairs.num_rows:
        ids = _first_clause(pairs, matched_clauses, plan)
        new, c = _new_rows(pairs, ids, matched_clauses, plan, schema)
        outputs += new.values()
        counts.update(c)
        if changes is not None:
            changes.add(pairs, ids, matched_clauses, new)
        retire_rows(pairs, ids, {c.clause_id for c in matched_clauses if c.retires_target_row})
    if insert_clauses:
        matched_sources = pc.unique(pairs.column(SOURCE_ID)) if pairs.num_rows else pa.array([], pa.int64())
        unmatched = src.filter(pc.invert(pc.is_in(src.column(SOURCE_ID), value_set=matched_sources)))
        ids = _first_clause(unmatched, insert_clauses, plan)
        new, c = _new_rows(unmatched, ids, insert_clauses, plan, schema)
        outputs += new.values()
        counts.update(c)
        if changes is not None:
            changes.add(unmatched, ids, insert_clauses, new)
    if by_source:
        matched_targets = pc.add(pc.multiply(pairs.column(FILE_ID).cast(pa.int64()), 2**40), pairs.column(ROW_ID))
        all_targets = pc.add(pc.multiply(target.column(FILE_ID).cast(pa.int64()), 2**40), target.column(ROW_ID))
        lonely = target.filter(pc.invert(pc.is_in(all_targets, value_set=pc.unique(matched_targets))))
        ids = _first_clause(lonely, by_source, plan)
        new, c = _new_rows(lonely, ids, by_source, plan, schema)
        outputs += new.values()
        counts.update(c)
        if changes is not None:
            changes.add(lonely, ids, by_source, new)
        retire_rows(lonely, ids, {c.clause_id for c in by_source if c.retires_target_row})

    retired = RowRetirement()
    if retire:
        to_retire = []
        for file_id, chunks in retire.items():
            m = matches[file_id]
            to_retire.append(FileMatch(m.add, m.physical_rows, m.previously_deleted, np.unique(np.concatenate(chunks))))
        retired = executor.retire_matches(ctx, to_retire, scan_started)
    scan_ms = int((time.monotonic() - scan_started) * 1000)

    rewrite_started = time.monotonic()
    survivors = [executor.surviving_rows(ctx, add) for add in retired.files_to_rewrite]
    written = executor.write_tables(ctx, outputs + survivors)
    metrics = merge_metrics(
        clauses, counts, not check_duplicates, source.num_rows, retired, written.files, ctx.plan, scan_ms,
        int((time.monotonic() - rewrite_started) * 1000) if written.files else 0, executor.name,
    )
    ctx.transaction.add_actions([*retired.actions, *written.files])
    if changes is not None:
        metrics.update(change_file_metrics(register_change_files(ctx, write_change_rows(ctx, changes.tagged)), "MERGE"))
    return ctx.finish(metrics)

