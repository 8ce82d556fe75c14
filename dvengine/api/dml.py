"""DELETE and UPDATE entry points: bind, plan, pick the executor, run the command.

This is the layer between the user-facing ``DeltaTable`` and the engine-neutral commands: it
turns pyspark Columns into SQL text (only when the caller passed Columns, which implies a
session), resolves options from Spark conf when a session exists, and chooses the executor with
:class:`~dvengine.commands.selection.EngineChoice`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dvengine.commands.context import open_dml
from dvengine.commands.delete import delete_metrics, run_delete
from dvengine.commands.executor import Executor
from dvengine.commands.options import ConfLookup, resolve_options, session_conf
from dvengine.commands.replan import PlanAttempt, run_replanning
from dvengine.commands.selection import EngineChoice, candidate_bytes
from dvengine.commands.update import bind_assignments, fold_update_assignments, run_update, update_metrics
from dvengine.engine.local import LocalExecutor
from dvengine.engine.local.auto_compaction import after_commit
from dvengine.expressions import BoundPredicate, parse_predicate
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.schema import StructType
from dvengine.writing.defaults import resolve_default_assignments
from dvengine.writing.generated import with_generated_assignments
from dvengine.writing.identity import check_identity_update

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SessionProvider = Callable[[], "SparkSession"]


class EngineSession:
    """The caller's SparkSession, if any, and how to get one when only Spark can do the work."""

    def __init__(self, spark: SparkSession | None, provider: SessionProvider) -> None:
        self._spark = spark
        self._provider = provider

    @property
    def has_session(self) -> bool:
        return self._spark is not None

    def session(self) -> SparkSession:
        if self._spark is None:
            self._spark = self._provider()
        return self._spark

    def conf(self) -> ConfLookup:
        return session_conf(self._spark)

    def make_spark_executor(self) -> Executor:
        from dvengine.engine.spark.executor import SparkExecutor

        return SparkExecutor(self.session())

    def choice(self, engine: str | None) -> EngineChoice:
        return EngineChoice.create(engine, self.conf(), LocalExecutor, self.make_spark_executor, self.has_session)

    def condition_sql(self, condition: object, schema: StructType) -> str:
        """SQL text of a condition given as a string or a pyspark Column."""
        if isinstance(condition, str):
            return condition
        if type(condition).__name__ != "Column":
            raise TypeError(f"condition must be a SQL string or a pyspark Column, got {type(condition).__name__}")
        from dvengine.engine.spark.columns import predicate_column_to_sql
        from dvengine.engine.spark.empty_frames import empty_frame
        from dvengine.engine.spark.reader import spark_schema

        return predicate_column_to_sql(condition, empty_frame(self.session(), spark_schema(schema)))  # type: ignore[arg-type]

    def value_sql(self, value: object, schema: StructType, column: str) -> str:
        """SQL text of an UPDATE value given as a string or a pyspark Column (a Column naming DEFAULT
        comes back as its text, for the DEFAULT keyword to be resolved as Spark's analyzer does)."""
        if isinstance(value, str):
            return value
        if type(value).__name__ != "Column":
            raise TypeError(
                f"the value for column {column!r} must be a SQL expression string or a pyspark Column, "
                f"got {type(value).__name__}: {value!r}"
            )
        from dvengine.engine.spark.columns import update_value_column_to_sql
        from dvengine.engine.spark.empty_frames import empty_frame
        from dvengine.engine.spark.reader import spark_schema

        return update_value_column_to_sql(value, empty_frame(self.session(), spark_schema(schema)))  # type: ignore[arg-type]


def _bind_condition(session: EngineSession, condition: object, schema: StructType) -> BoundPredicate | None:
    if condition is None:
        return None
    return parse_predicate(session.condition_sql(condition, schema), schema)


def delete(session: EngineSession, table_root: str, condition: object, mode: str | None, engine: str | None) -> dict[str, Any]:
    """DELETE FROM table WHERE condition; Delta's metrics plus ``version`` and ``executionEngine``."""
    choice = session.choice(engine)
    options = resolve_options(choice.conf, mode)
    read: list[Snapshot] = []

    def run(snapshot: Snapshot, attempt: PlanAttempt) -> dict[str, Any]:
        read.append(snapshot)
        predicate = _bind_condition(session, condition, snapshot.schema)
        ctx = open_dml(snapshot, "DELETE", options, predicate, attempt=attempt, conf=choice.conf)
        if ctx.repeat:
            return ctx.skip_repeat(delete_metrics(ctx, "none"))
        executor = choice.select(snapshot.schema, predicate, [], candidate_bytes(ctx), "DELETE")
        try:
            return run_delete(ctx, executor)
        finally:
            executor.close()

    metrics = run_replanning(table_root, options, run, lambda root: load_snapshot(root))  # late-bound: tests stub it
    after_commit(choice.conf, read[-1].table_root, metrics.get("version"), read[-1].configuration)
    return metrics


def update(
    session: EngineSession,
    table_root: str,
    condition: object,
    assignments: Mapping[str, object],
    mode: str | None,
    engine: str | None,
) -> dict[str, Any]:
    """UPDATE table SET assignments WHERE condition; Delta's metrics plus ``version`` and ``executionEngine``."""
    if not isinstance(assignments, Mapping):
        raise TypeError(f"set must be a dict of column name -> SQL expression or Column, got {type(assignments).__name__}")
    for name in assignments:
        if not isinstance(name, str):
            raise TypeError(f"set keys must be column names (str), got {type(name).__name__}: {name!r}")
    choice = session.choice(engine)
    options = resolve_options(choice.conf, mode)
    read: list[Snapshot] = []

    def run(snapshot: Snapshot, attempt: PlanAttempt) -> dict[str, Any]:
        read.append(snapshot)
        schema = snapshot.schema
        predicate = _bind_condition(session, condition, schema)
        texts = {name: session.value_sql(value, schema, name) for name, value in assignments.items()}
        texts = resolve_default_assignments(schema, texts, "UPDATE")  # SET c = DEFAULT, as Spark's analyzer
        folded = fold_update_assignments(schema, texts)  # s.x = v -> s = named_struct(..., 'x', v, ...)
        check_identity_update(schema, list(folded.columns), "UPDATE")
        generated = with_generated_assignments(schema, folded.columns, folded.values, folded.rebuilt)
        bound = bind_assignments(schema, generated)  # generated columns follow their inputs
        ctx = open_dml(snapshot, "UPDATE", options, predicate, attempt=attempt, conf=choice.conf)
        if ctx.repeat:
            return ctx.skip_repeat(update_metrics(ctx, "none"))
        values = [(name, schema.get(name).type, value) for name, value in bound.items()]
        executor = choice.select(schema, predicate, values, candidate_bytes(ctx), "UPDATE")
        try:
            return run_update(ctx, executor, bound)
        finally:
            executor.close()

    metrics = run_replanning(table_root, options, run, lambda root: load_snapshot(root))  # late-bound: tests stub it
    after_commit(choice.conf, read[-1].table_root, metrics.get("version"), read[-1].configuration)
    return metrics
