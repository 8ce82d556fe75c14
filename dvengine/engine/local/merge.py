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
from dataclasses import dataclass, field
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
    identity_to_assign,
    operation_parameters,
)
from dvengine.commands.merge_evolution import evolve_for_merge
from dvengine.commands.merge_metrics import merge_metrics
from dvengine.commands.options import ConfLookup
from dvengine.commands.replan import PlanAttempt, run_replanning
from dvengine.commands.retirement import RowRetirement
from dvengine.commands.struct_cast import Alignment, assignment_alignment
from dvengine.commands.write import record_marks
from dvengine.dv import outside
from dvengine.engine.local.change_data import MergeChanges, write_change_rows
from dvengine.engine.local.executor import FileMatch, LocalExecutor, keep_row_ids
from dvengine.engine.local.key_lookup import lookup_keys
from dvengine.engine.local.not_null import null_into_not_null
from dvengine.engine.local.struct_align import align
from dvengine.engine.local.update_values import AssignedValue, assigned_value
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
    BoundPredicate,
    parse_predicate,
    to_pyarrow_expression,
)
from dvengine.expressions.arrow_plans import filter_table, project_table, use_threads
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.refs import REF_KEY, ColumnRef, bound_refs, column_node, ref_of
from dvengine.expressions.trees import conjuncts
from dvengine.log import Snapshot, load_snapshot
from dvengine.planning.decisions import DmlOptions
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import INTERNAL_COLUMNS
from dvengine.protocol.schema import StructField, StructType, from_arrow_schema, to_arrow_type
from dvengine.writing.identity import identity_columns

DEFAULT_TARGET_ALIAS = "__target"
DEFAULT_SOURCE_ALIAS = "__source"
IN_LIST_MAX = 100  # beyond it [min, max]: parsing a longer list (sqlglot, ~0.14 ms a value) costs more than it saves
FILE_ID = "__merge_file"
ROW_ID = "__merge_row"
SOURCE_ID = "__merge_sid"
_POSITION = "__merge_pos"  # a target row's position across the candidate files, through the join
_SOURCE_POSITION = "__merge_source_pos"  # a source row's position, through the join
_IDENTITY = "__merge_identity"  # + a target column's ``__t<i>``: new identity values of the inserted rows
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
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
    conf: ConfLookup | None = None  # the session's conf, read by the commit (None: dvengine's configuration)


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
    lists: list[tuple[_Key, list[object]]] = []
    for key in keys:
        column = pc.drop_null(source.column(key.source.name))
        quoted = quote_identifier(key.target.name)
        if len(column) == 0:
            conjuncts.append("FALSE")
            continue
        distinct = pc.unique(column)
        if len(distinct) <= IN_LIST_MAX:
            values = sorted(distinct.to_pylist())
            lists.append((key, values))
            conjuncts.append(f"{quoted} IN ({', '.join(_literal_sql(v, key.target) for v in values)})")
        else:
            bounds = pc.min_max(column).as_py()
            conjuncts.append(
                f"{quoted} >= {_literal_sql(bounds['min'], key.target)} AND {quoted} <= {_literal_sql(bounds['max'], key.target)}"
            )
    if not conjuncts:
        return None
    if len(lists) == len(conjuncts):
        built = _integer_in_lists(lists)
        if built is not None:
            return built
    return parse_predicate(" AND ".join(f"({c})" for c in conjuncts), target_schema)


_INTEGER_RANGES = {"byte": 2**7, "short": 2**15, "integer": 2**31, "long": 2**63}


def _integer_in_lists(lists: Sequence[tuple[_Key, list[object]]]) -> BoundPredicate | None:
    """``key IN (values) AND ...`` bound directly, for integer keys whose values fit the column.

    Parsing and binding the text of a 100-value IN list, a new one every round, cost ~2.6 ms of a
    ~20 ms upsert round (sqlglot tokenizing, the binder's type check, the generator's deep copy);
    building the tree the binder would build costs ~0.2 ms. The tree is the binder's: a
    back-quoted column carrying its ColumnRef, integer literals (negative ones as ``-`` of a
    literal, as the parser reads them). Anything else (strings, dates, a value outside the
    column's range, which the binder and the Arrow translation judge) takes the text path."""
    tree: exp.Expr | None = None
    for key, values in lists:
        limit = _INTEGER_RANGES.get(key.target.type.name)
        if limit is None or not all(isinstance(v, int) and -limit <= v < limit for v in values):
            return None
        column = column_node([key.target.name])
        column.meta[REF_KEY] = ColumnRef(None, (key.target.name,), (key.target,))
        items = [exp.Literal.number(v) if v >= 0 else exp.Neg(this=exp.Literal.number(-v)) for v in values]  # type: ignore[operator]
        node = exp.In(this=column, expressions=items)
        tree = node if tree is None else exp.And(this=tree, expression=node)
    if tree is None:
        return None
    names = frozenset(key.target.name for key, _ in lists)
    return BoundPredicate(
        sql=str(tree.sql(dialect="spark", comments=False, copy=False)),  # a fresh tree: nothing to protect
        columns=names,
        qualified_columns=frozenset((None, n) for n in names),
        tree=tree,
    )


class _Plan:
    """Names of the joined table: target columns ``__t<i>``, source columns ``__s<j>``."""

    def __init__(self, scope: MergeScope) -> None:
        self.target = {f.name: f"__t{i}" for i, f in enumerate(scope.target_schema.fields)}
        self.source = {f.name: f"__s{j}" for j, f in enumerate(scope.source_schema.fields)}
        self.rename = {f"{scope.target_alias}.{k}".lower(): v for k, v in self.target.items()}
        self.rename.update({f"{scope.source_alias}.{k}".lower(): v for k, v in self.source.items()})
        self.evolution = scope.schema_evolution

    def assigned(self, clause: BoundClause, f: StructField) -> AssignedValue:
        """The Arrow expression of the clause's value for ``f``. A struct-holding value, whatever
        the expression, is computed as it is and rebuilt into the column's type after the
        projection (Delta matches struct fields by name; ``commands/struct_cast``), as UPDATE's
        values (``update_values.assigned_value``). SchemaMismatchError when Delta would refuse it;
        InvalidPredicateError when it is not computable exactly here."""
        evolution = self.evolution
        return assigned_value(
            clause.assignments[f.name], f, self.rename, lambda t: assignment_alignment(clause, f, evolution, t)
        )

    def condition(self, predicate: BoundPredicate | None) -> Any:
        return pc.scalar(True) if predicate is None else to_pyarrow_expression(predicate, self.rename)



def _check_local(plan: _Plan, clauses: Sequence[BoundClause], residual: BoundPredicate | None, target: StructType) -> None:
    """Translate every expression once so unsupported shapes fail before any work."""
    try:
        plan.condition(residual)
        for clause in clauses:
            plan.condition(clause.condition)
            for name in clause.assignments:
                plan.assigned(clause, target.get(name))
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
                values = project_table(table, [plan.condition(clause.condition)], ["c"]).column(0)
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
        rebuilt: dict[str, Alignment | None] = {}  # nested values rebuilt after the projection
        for f in target.fields:
            if f.name in clause.assignments:
                assigned = plan.assigned(clause, f)
                expressions.append(assigned.expression)
                if assigned.rebuild:
                    rebuilt[f.name] = assigned.alignment
            elif clause.action is ClauseAction.UPDATE:
                expressions.append(pc.field(plan.target[f.name]))
            elif _IDENTITY + plan.target[f.name] in rows.column_names:  # new values (_with_identity_values)
                expressions.append(pc.field(_IDENTITY + plan.target[f.name]))
            else:
                expressions.append(pc.scalar(pa.scalar(None, to_arrow_type(f.type))))
        try:
            values = project_table(rows, expressions, target.field_names)
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise SchemaViolationError(f"MERGE would write a value that does not fit its target column: {exc}; nothing was written") from exc
        for name, alignment in rebuilt.items():
            f = target.get(name)
            # UPDATE SET * keeps the fields the source lacks from the row's own struct
            current = rows.column(plan.target[name]) if clause.action is ClauseAction.UPDATE else None
            index = values.schema.get_field_index(name)
            values = values.set_column(index, name, align(values.column(index), alignment, f.type, name, current))
        bad = null_into_not_null(values, target)
        if bad:
            raise SchemaViolationError(f"MERGE would write NULL into NOT NULL column(s) {bad}; nothing was written")
        typed = values.cast(pa.schema([pa.field(f.name, to_arrow_type(f.type)) for f in target.fields]))
        # An updated target row keeps its stable row id (inserts carry none: they get fresh ids).
        out[clause.clause_id] = keep_row_ids(rows, typed) if clause.action is ClauseAction.UPDATE else typed
    return out, counts


def execute_local_merge(
    req: LocalMergeRequest, target_runner: TargetRunner | None = None, engine_name: str = "local"
) -> dict[str, Any]:
    """Run a MERGE in-process; NotLocallyEvaluableError (before any write) when it cannot.

    ``target_runner`` replaces the in-process target side (the Spark executor's file tasks run
    it on the cluster; ``engine_name`` is then reported as ``executionEngine``): binding,
    pruning, inserts, metrics and the commit stay here. In-process, the MERGE may plan on a young
    cached snapshot and re-plan if another writer committed since (commands/replan.py): its
    source is an Arrow table, so running it again is cheap and exact."""
    if not req.clauses:
        raise InvalidArgumentError("a MERGE needs at least one WHEN clause")
    if target_runner is not None:
        return _merge_on(req, load_snapshot(req.table_root), None, target_runner, engine_name)
    return run_replanning(
        req.table_root,
        req.options,
        lambda snapshot, attempt: _merge_on(req, snapshot, attempt, None, engine_name),
        lambda root: load_snapshot(root),  # late-bound: tests stub it
    )


def _merge_on(
    req: LocalMergeRequest,
    snapshot: Snapshot,
    attempt: PlanAttempt | None,
    target_runner: TargetRunner | None,
    engine_name: str,
) -> dict[str, Any]:
    started = time.monotonic()
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
    # Both runners (in process, and the Spark executor's file tasks) report every target row that
    # joined and stayed (TargetResult.kept_rows), so any MERGE they run can be judged row by row.
    ctx = open_dml(
        snapshot, "MERGE", req.options, derived, operation_parameters(condition, clauses), True, attempt=attempt,
        conf=req.conf,
    )
    ctx.started = started  # executionTimeMs covers binding too, as on Spark
    if ctx.repeat:
        return ctx.skip_repeat(merge_metrics(clauses, {}, False, 0, RowRetirement(), [], ctx.plan, 0, 0, "none"))
    evolution_plan.apply(ctx.transaction)
    with ctx.cleaning_up_on_failure():
        if target_runner is None:
            return _run(ctx, run_target_locally(LocalExecutor()), "local", req.source, plan, keys, residual, clauses)
        return _run(ctx, target_runner, engine_name, req.source, plan, keys, residual, clauses)


@dataclass(frozen=True)
class TargetJob:
    """The target side of a bound MERGE, everything a task needs to run it on some files."""

    schema: StructType
    plan: _Plan
    keys: tuple[_Key, ...]
    residual: BoundPredicate | None
    matched_clauses: tuple[BoundClause, ...]
    by_source: tuple[BoundClause, ...]
    check_duplicates: bool


@dataclass
class TargetSide:
    """What the MATCHED and NOT MATCHED BY SOURCE clauses did to some candidate files."""

    outputs: list[pa.Table]  # new rows of writing clauses, in the target schema
    counts: dict[int, int]  # clause id -> rows that took it
    retire: dict[int, np.ndarray]  # index into the files' matches -> row indexes to retire (unique)
    matched_sources: np.ndarray  # SOURCE_IDs that matched some target row
    # index into the files' matches -> row indexes that joined a source row (retired or not)
    matched_rows: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass
class TargetResult:
    """The target side over all candidate files, as a runner hands it back to the command."""

    counts: dict[int, int]
    matched_sources: np.ndarray
    retired: RowRetirement
    written: list[AddFile]  # files the runner already wrote (new rows, rewritten survivors)
    pending: list[pa.Table]  # rows still to write, with the inserts
    # data file path (as the log names it) -> target rows that joined a source row and were not
    # retired: their presence kept a source row from being inserted (commit/rebase.py, K)
    kept_rows: dict[str, np.ndarray]


# How the target side runs: in this process (``run_target_locally``) or, for the Spark executor,
# as file tasks on the cluster (``engine.spark.file_tasks``); (ctx, prepared source, job, changes).
TargetRunner = Callable[[DmlContext, pa.Table, TargetJob, "MergeChanges | None"], TargetResult]


def prepare_source(source: pa.Table, plan: _Plan, keys: Sequence[_Key]) -> pa.Table:
    """Source columns renamed ``__s<j>``, its row ids, and join key columns of one Arrow type."""
    src = source.rename_columns([plan.source[f.name] for f in (from_arrow_schema(source.schema)).fields])
    src = src.append_column(SOURCE_ID, pa.array(np.arange(src.num_rows, dtype=np.int64)))
    for i, key in enumerate(keys):
        src = src.append_column(f"__ks{i}", src.column(plan.source[key.source.name]).cast(_key_type(key)))
    return src


def _key_type(key: _Key) -> pa.DataType:
    """Join keys must have one Arrow type on both sides: integers widen to int64."""
    return pa.int64() if _family(key.target) == "int" else to_arrow_type(key.target.type)


def _target_rows(schema: StructType, matches: Sequence[FileMatch], job: TargetJob) -> pa.Table:
    """Live rows of the files (all columns, renamed) with their file index and row ids."""
    tables = []
    for file_id, match in enumerate(matches):
        rows = match.rows
        assert rows is not None
        renamed = rows.rename_columns([name if name in INTERNAL_COLUMNS else job.plan.target[name] for name in rows.column_names])
        renamed = renamed.append_column(FILE_ID, pa.array(np.full(len(match.matched), file_id, dtype=np.int32)))
        tables.append(renamed.append_column(ROW_ID, pa.array(match.matched)))
    if tables:
        target = pa.concat_tables(tables)
    else:
        target = pa.schema(
            [pa.field(job.plan.target[f.name], to_arrow_type(f.type)) for f in schema.fields]
            + [pa.field(FILE_ID, pa.int32()), pa.field(ROW_ID, pa.int64())]
        ).empty_table()
    for i, key in enumerate(job.keys):
        target = target.append_column(f"__kt{i}", target.column(job.plan.target[key.target.name]).cast(_key_type(key)))
    return target


def _row_ids(table: pa.Table) -> Any:
    """One int64 per row naming (file, row): file index * 2**40 + row index."""
    return pc.add(pc.multiply(table.column(FILE_ID).cast(pa.int64()), 2**40), table.column(ROW_ID))


def _carries_dead(match: FileMatch) -> bool:
    """Whether ``match`` (from ``physical_file``) still holds rows its DV deletes."""
    return len(match.previously_deleted) > 0 and len(match.matched) == match.physical_rows


def _live(table: pa.Table, matches: Sequence[FileMatch]) -> pa.Table:
    """``table`` (with FILE_ID / ROW_ID) without the rows the files' DVs delete."""
    dead = [
        np.asarray(m.previously_deleted.to_array(), dtype=np.int64) + file_id * 2**40
        for file_id, m in enumerate(matches)
        if _carries_dead(m)
    ]
    if not dead or not table.num_rows:
        return table
    return table.filter(pc.invert(pc.is_in(_row_ids(table), value_set=pa.array(np.concatenate(dead)))))


def _join_pairs(matches: Sequence[FileMatch], src: pa.Table, job: TargetJob) -> pa.Table:
    """The (target row, source row) pairs whose keys are equal, on live target rows: target
    columns renamed ``__t<i>``, FILE_ID, ROW_ID, then the source's columns.

    Only the key columns and a running position go through the hash join; the other target
    columns are gathered afterwards for the pairs alone. Carrying every column of every
    candidate row through the join cost twice as much (5M rows, 1k / 100k keys: ~97 / 130 ms
    against ~53 / 68 ms key-only, on 2 busy cores), and nearly all of those rows find no partner.
    """
    sizes = np.array([len(m.matched) for m in matches], dtype=np.int64)
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes)])
    keys: dict[str, pa.ChunkedArray] = {}
    for i, key in enumerate(job.keys):
        chunks = []
        for m in matches:
            assert m.rows is not None
            chunks += m.rows.column(key.target.name).cast(_key_type(key)).chunks
        keys[f"__kt{i}"] = pa.chunked_array(chunks, type=_key_type(key))
    keys[_POSITION] = pa.chunked_array([pa.array(np.arange(int(offsets[-1]), dtype=np.int64))])
    left = pa.table(keys)
    left_keys = [f"__kt{i}" for i in range(len(job.keys))]
    right_keys = [f"__ks{i}" for i in range(len(job.keys))]
    # The source side too goes through the join as keys and positions only: Acero's hash join
    # refuses nested non-key columns (structs, lists, maps), which a source may well carry.
    right = src.select(right_keys).append_column(_SOURCE_POSITION, pa.array(np.arange(src.num_rows, dtype=np.int64)))
    try:
        joined = left.join(
            right, keys=left_keys, right_keys=right_keys, join_type="inner",
            use_threads=use_threads(left.num_rows + right.num_rows),
        )
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:  # e.g. a key type the hash join cannot compare
        raise NotLocallyEvaluableError(f"the local hash join cannot compare these keys: {exc}") from exc
    positions = joined.column(_POSITION).to_numpy()
    order = np.argsort(positions, kind="stable")
    positions = positions[order]
    bounds = np.searchsorted(positions, offsets)
    keep = np.ones(len(positions), dtype=bool)
    parts: list[pa.Table] = []
    file_ids: list[np.ndarray] = []
    row_ids: list[np.ndarray] = []
    for file_id, m in enumerate(matches):
        lo, hi = int(bounds[file_id]), int(bounds[file_id + 1])
        if lo == hi:
            continue
        local = positions[lo:hi] - offsets[file_id]
        rows = m.matched[local]
        if _carries_dead(m):
            live = outside(rows, m.previously_deleted)
            keep[lo:hi] = live
            local, rows = local[live], rows[live]
        assert m.rows is not None
        parts.append(m.rows.take(pa.array(local)))
        file_ids.append(np.full(len(rows), file_id, dtype=np.int32))
        row_ids.append(rows)
    if parts:
        target = pa.concat_tables(parts)
    elif matches and matches[0].rows is not None:
        target = matches[0].rows.slice(0, 0)
    else:
        target = pa.schema([pa.field(f.name, to_arrow_type(f.type)) for f in job.schema.fields]).empty_table()
    target = target.rename_columns([name if name in INTERNAL_COLUMNS else job.plan.target[name] for name in target.column_names])
    target = target.append_column(FILE_ID, pa.array(np.concatenate(file_ids) if file_ids else np.empty(0, np.int32), pa.int32()))
    target = target.append_column(ROW_ID, pa.array(np.concatenate(row_ids) if row_ids else np.empty(0, np.int64), pa.int64()))
    source_rows = joined.column(_SOURCE_POSITION).take(pa.array(order[keep]))
    source_side = src.select([n for n in src.column_names if n not in right_keys]).take(source_rows)
    for name in source_side.column_names:
        target = target.append_column(name, source_side.column(name))
    return target


def merge_target_side(matches: Sequence[FileMatch], src: pa.Table, job: TargetJob, changes: MergeChanges | None) -> TargetSide:
    """Join the rows of ``matches``' files with the source (dropping rows their DVs delete),
    check cardinality, and apply the MATCHED and NOT MATCHED BY SOURCE clauses. ``matches``
    carry the live rows (``match_file``) or all physical rows (``physical_file``: no copy).
    Works on any subset of the candidate files: a target row belongs to one file, so a task
    holding some files sees all pairs of their rows."""
    plan, schema = job.plan, job.schema
    pairs = _join_pairs(matches, src, job)
    if job.residual is not None and pairs.num_rows:
        try:
            pairs = filter_table(pairs, plan.condition(job.residual))
        except (pa.ArrowInvalid, ArithmeticError) as exc:
            raise EvaluationError(f"the MERGE condition failed while evaluating rows: {exc}") from exc

    if job.check_duplicates and pairs.num_rows and len(pc.unique(_row_ids(pairs))) != pairs.num_rows:
        raise MergeCardinalityError(
            "cannot perform MERGE: multiple source rows matched the same target row and could modify it in "
            "conflicting ways (Delta's DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE); deduplicate the "
            "source or make the condition match at most one source row per target row; nothing was written"
        )

    side = TargetSide([], {}, {}, np.unique(pairs.column(SOURCE_ID).to_numpy()) if pairs.num_rows else np.empty(0, np.int64))
    if pairs.num_rows:
        pair_files = pairs.column(FILE_ID).to_numpy()
        pair_rows = pairs.column(ROW_ID).to_numpy()
        side.matched_rows = {int(f): np.unique(pair_rows[pair_files == f]) for f in np.unique(pair_files)}
    retire: dict[int, list[np.ndarray]] = {}

    def retire_rows(table: pa.Table, ids: np.ndarray, retiring: set[int]) -> None:
        mask = np.isin(ids, list(retiring))
        if mask.any():
            files = table.column(FILE_ID).to_numpy()[mask]
            rows = table.column(ROW_ID).to_numpy()[mask]
            for file_id in np.unique(files):
                retire.setdefault(int(file_id), []).append(rows[files == file_id])

    def apply(table: pa.Table, clauses: Sequence[BoundClause]) -> np.ndarray:
        ids = _first_clause(table, clauses, plan)
        new, counts = _new_rows(table, ids, clauses, plan, schema)
        side.outputs.extend(new.values())
        side.counts.update(counts)
        if changes is not None:
            changes.add(table, ids, clauses, new)
        retire_rows(table, ids, {c.clause_id for c in clauses if c.retires_target_row})
        return ids

    if job.matched_clauses and pairs.num_rows:
        apply(pairs, job.matched_clauses)
    if job.by_source:
        live = _live(_target_rows(schema, matches, job), matches)
        matched_targets = pc.unique(_row_ids(pairs))
        apply(live.filter(pc.invert(pc.is_in(_row_ids(live), value_set=matched_targets))), job.by_source)
    side.retire = {file_id: np.unique(np.concatenate(chunks)) for file_id, chunks in retire.items()}
    return side


def _record_kept_rows(ctx: DmlContext, target: TargetResult) -> None:
    """Tell the transaction which matched target rows the MERGE leaves in place: their presence
    decided that their source rows are not inserted, so a concurrent delete of one of them is a
    conflict, not something to rebase over (commit/rebase.py)."""
    for path, rows in target.kept_rows.items():
        if len(rows):
            ctx.transaction.record_kept_rows(path, rows.tolist())


def run_target_locally(executor: LocalExecutor) -> TargetRunner:
    """The embedded executor's target side: every candidate file in this process."""

    def run(ctx: DmlContext, src: pa.Table, job: TargetJob, changes: MergeChanges | None) -> TargetResult:
        started = time.monotonic()
        matches = _joinable_rows(ctx, executor, src, job)
        side = merge_target_side(matches, src, job, changes)
        retired = RowRetirement()
        if side.retire:
            to_retire = []
            for file_id, rows in side.retire.items():
                m = matches[file_id]
                to_retire.append(FileMatch(m.add, m.physical_rows, m.previously_deleted, rows))
            retired = executor.retire_matches(ctx, to_retire, started)
        survivors = [executor.surviving_rows(ctx, add) for add in retired.files_to_rewrite]
        kept = {
            matches[f].add.path: np.setdiff1d(rows, side.retire.get(f, np.empty(0, np.int64)), assume_unique=True)
            for f, rows in side.matched_rows.items()
        }
        return TargetResult(side.counts, side.matched_sources, retired, [], side.outputs + survivors, kept)

    return run


def _joinable_rows(ctx: DmlContext, executor: LocalExecutor, src: pa.Table, job: TargetJob) -> list[FileMatch]:
    """The candidate files' rows the hash join needs: with no NOT MATCHED BY SOURCE clause (those
    act on the other rows), only each file's live rows whose first join key (integer, string or
    date) equals some source key, found through the file's cached key index (``key_lookup``,
    ``executor.key_rows``): the join then sees ~the source's size instead of the table's (1.5M
    target rows / 7 files, 100 keys: the join cost ~7 ms a round and grew with the table). The
    index's equality is the join's (integers by value, dates by day, strings byte-wise), so this
    is a superset of the rows the join pairs (other keys and the residual still decide) and the
    result is the same. Otherwise every physical row of every file, as before."""
    keys = None if job.by_source or not job.keys else lookup_keys(src.column("__ks0"))
    if keys is None:
        return executor.physical_files(ctx, ctx.plan.candidates)
    return executor.key_rows(ctx, ctx.plan.candidates, job.keys[0].target.name, keys)


def _run(
    ctx: DmlContext,
    runner: TargetRunner,
    engine: str,
    source: pa.Table,
    plan: _Plan,
    keys: Sequence[_Key],
    residual: BoundPredicate | None,
    clauses: Sequence[BoundClause],
) -> dict[str, Any]:
    schema = ctx.snapshot.schema
    executor = LocalExecutor()
    matched_clauses = tuple(c for c in clauses if c.kind is ClauseKind.MATCHED)
    insert_clauses = [c for c in clauses if c.kind is ClauseKind.NOT_MATCHED]
    by_source = tuple(c for c in clauses if c.kind is ClauseKind.NOT_MATCHED_BY_SOURCE)
    insert_only = not matched_clauses and not by_source  # Delta writes no change files: readers derive inserts
    check_duplicates = bool(matched_clauses) and not (
        len(matched_clauses) == 1 and matched_clauses[0].action is ClauseAction.DELETE and matched_clauses[0].condition is None
    )
    scan_started = time.monotonic()
    src = prepare_source(source, plan, keys)
    job = TargetJob(schema, plan, tuple(keys), residual, matched_clauses, by_source, check_duplicates)
    changes = MergeChanges(plan.target, schema, (FILE_ID, ROW_ID)) if writes_change_data(ctx.snapshot) and not insert_only else None
    target = runner(ctx, src, job, changes)
    _record_kept_rows(ctx, target)
    counts = dict(target.counts)
    pending = list(target.pending)
    if insert_clauses:
        unmatched = src.filter(pc.invert(pc.is_in(src.column(SOURCE_ID), value_set=pa.array(target.matched_sources, pa.int64()))))
        ids = _first_clause(unmatched, insert_clauses, plan)
        unmatched = _with_identity_values(ctx, unmatched, ids, insert_clauses, plan)
        new, c = _new_rows(unmatched, ids, insert_clauses, plan, schema)
        pending += new.values()
        counts.update(c)
        if changes is not None:
            changes.add(unmatched, ids, insert_clauses, new)
    scan_ms = int((time.monotonic() - scan_started) * 1000)

    rewrite_started = time.monotonic()
    written = executor.write_tables(ctx, pending)
    files = [*target.written, *written.files]
    metrics = merge_metrics(
        clauses, counts, not check_duplicates, source.num_rows, target.retired, files, ctx.plan, scan_ms,
        int((time.monotonic() - rewrite_started) * 1000) if files else 0, engine,
    )
    ctx.transaction.add_actions([*target.retired.actions, *files])
    if changes is not None:
        metrics.update(change_file_metrics(register_change_files(ctx, write_change_rows(ctx, changes.tagged)), "MERGE"))
    return ctx.finish(metrics)


def _with_identity_values(
    ctx: DmlContext, rows: pa.Table, clause_ids: np.ndarray, clauses: Sequence[BoundClause], plan: _Plan
) -> pa.Table:
    """``rows`` (the unmatched source rows) with a column of new values for each identity column
    that some insert clause leaves to the table (``identity_to_assign``), and the new high-water
    marks recorded in the commit, as appends do (``writing.identity``).

    Values are dense from the mark (``mark + step``, ``mark + 2 * step`` ...), handed out in source
    row order to the rows whose clause needs them; rows of other clauses keep their given value.
    The ``metaData`` action with the new mark makes a concurrent writer that drew from the same
    mark fail the conflict check (MetadataChangedError) instead of committing duplicates."""
    schema = ctx.snapshot.schema
    marks: dict[str, int | None] = {}
    for name, spec in identity_columns(schema).items():
        lacking = [c.clause_id for c in clauses if name in identity_to_assign(schema, c)]
        needs = np.isin(clause_ids, lacking)
        n = int(needs.sum())
        if not n:
            continue
        first, last = spec.first_new_value(), spec.first_new_value() + (n - 1) * spec.step
        if not _LONG_MIN <= last <= _LONG_MAX:
            raise SchemaViolationError(
                f"MERGE would insert {n} rows into IDENTITY column {name!r}, but values from {first} in steps of "
                f"{spec.step} leave the BIGINT range; nothing was written"
            )
        values = np.zeros(rows.num_rows, dtype=np.int64)
        values[needs] = first + spec.step * np.arange(n, dtype=np.int64)
        rows = rows.append_column(_IDENTITY + plan.target[name], pa.array(values))
        marks[name] = spec.mark_after([first, last])
    record_marks(ctx.transaction, marks)
    return rows
