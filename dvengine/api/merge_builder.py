"""MERGE: the delta-spark ``DeltaMergeBuilder`` API over both executors.

The builder records clauses (names and semantics as in delta-spark, plus ``withMode`` and
``withEngine``). Argument types are checked when a clause is added, with delta-spark's
TypeError/ValueError (``dvengine.commands.arguments``); binding against the schema and the work
happen in :meth:`DeltaMergeBuilder.execute`, so a bad clause still leaves the table untouched.
``execute()`` returns delta-spark's metrics DataFrame for a table opened with a SparkSession and
the metrics dict otherwise; ``executeMetrics()`` always returns the dict. The source may be a Spark DataFrame, a pyarrow Table or
a pandas DataFrame. With ``engine="auto"`` a source of at most
``dvengine.execution.localMaxSourceRows`` rows is merged in-process (a Spark source is
collected to Arrow in one job), which is what makes frequent small CDC upserts cheap; larger
sources and conditions only Spark can evaluate run on Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dvengine.commands.arguments import check_column_mapping, check_condition
from dvengine.commands.executor import ENGINE_LOCAL, ENGINE_SPARK
from dvengine.commands.merge_clauses import ClauseAction, ClauseKind, Expr, MergeClause
from dvengine.commands.merge_metrics import delta_merge_result
from dvengine.commands.options import resolve_options
from dvengine.commands.selection import EngineChoice
from dvengine.commands.write_options import auto_merge_enabled
from dvengine.engine.local.auto_compaction import after_commit
from dvengine.engine.local.merge import LocalMergeRequest, execute_local_merge
from dvengine.engine.local.write_api import as_arrow_table, normalize_arrow_types
from dvengine.errors import InvalidArgumentError, NotLocallyEvaluableError
from dvengine.planning.decisions import MODES

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from dvengine.api.dml import EngineSession

CONF_LOCAL_MAX_SOURCE_ROWS = "dvengine.execution.localMaxSourceRows"
DEFAULT_LOCAL_MAX_SOURCE_ROWS = 1_000_000


class DeltaMergeBuilder:
    """Builds a MERGE into a Delta table; clauses of each kind apply in the order given."""

    def __init__(
        self,
        session: EngineSession,
        table_root: str,
        target_alias: str | None,
        source: Any,
        condition: Expr,
        source_alias: str | None = None,
        *,
        delta_spark_results: bool = False,
    ) -> None:
        if source is None:
            raise ValueError("'source' in merge cannot be None")
        if as_arrow_table(source) is None and type(source).__name__ != "DataFrame":
            raise TypeError(
                "Type of 'source' in merge must be DataFrame (a Spark DataFrame, a pyarrow Table or a pandas "
                f"DataFrame), got {type(source).__name__}"
            )
        if condition is None:
            raise ValueError("'condition' in merge cannot be None")
        check_condition(condition)
        self._session = session
        self._table_root = table_root
        self._target_alias = target_alias
        self._source = source
        self._source_alias = source_alias
        self._condition = condition
        self._clauses: list[MergeClause] = []
        self._mode: str | None = None
        self._engine: str | None = None
        self._delta_spark_results = delta_spark_results
        self._schema_evolution = False

    def _add(self, kind: ClauseKind, action: ClauseAction, condition: Expr | None, assignments: Mapping[str, Expr] | None,
             what: str, mapping_name: str | None = None) -> DeltaMergeBuilder:
        """Record a clause after delta-spark's call-time checks (the mapping first, as delta-spark does)."""
        frozen = None if mapping_name is None else check_column_mapping(assignments, f"'{mapping_name}' in {what}")
        check_condition(condition)
        self._clauses.append(MergeClause(kind, action, condition, frozen))
        return self

    def whenMatchedUpdate(self, condition: Expr | None = None, set: Mapping[str, Expr] | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.MATCHED, ClauseAction.UPDATE, condition, set, "whenMatchedUpdate", "set")

    def whenMatchedUpdateAll(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.MATCHED, ClauseAction.UPDATE, condition, None, "whenMatchedUpdateAll")

    def whenMatchedDelete(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.MATCHED, ClauseAction.DELETE, condition, None, "whenMatchedDelete")

    def whenNotMatchedInsert(self, condition: Expr | None = None, values: Mapping[str, Expr] | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.NOT_MATCHED, ClauseAction.INSERT, condition, values, "whenNotMatchedInsert", "values")

    def whenNotMatchedInsertAll(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.NOT_MATCHED, ClauseAction.INSERT, condition, None, "whenNotMatchedInsertAll")

    def whenNotMatchedBySourceUpdate(
        self, condition: Expr | None = None, set: Mapping[str, Expr] | None = None
    ) -> DeltaMergeBuilder:
        return self._add(
            ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.UPDATE, condition, set, "whenNotMatchedBySourceUpdate", "set"
        )

    def whenNotMatchedBySourceDelete(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.DELETE, condition, None, "whenNotMatchedBySourceDelete")

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """Add the source columns the MERGE writes to the target schema, in the same commit
        (as delta-spark; also on with ``spark.databricks.delta.schema.autoMerge.enabled``)."""
        self._schema_evolution = True
        return self

    def withMode(self, mode: str) -> DeltaMergeBuilder:
        """dvengine extension: ``dv`` | ``rewrite`` | ``auto`` (default from Spark conf)."""
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a string, got {type(mode).__name__}")
        if mode.lower() not in MODES:
            raise InvalidArgumentError(f"mode must be one of {MODES}, got {mode!r}")
        self._mode = mode.lower()
        return self

    def withEngine(self, engine: str) -> DeltaMergeBuilder:
        """dvengine extension: ``auto`` | ``local`` | ``spark`` (default from ``dvengine.execution.engine``)."""
        self._session.choice(engine)  # validates
        self._engine = engine.lower()
        return self

    # --- execution ------------------------------------------------------------------------------

    def _local_source(self, requested: str) -> pa.Table | None:
        """The source as Arrow if the local executor should merge it, else None."""
        arrow = as_arrow_table(self._source)
        if arrow is not None:
            return normalize_arrow_types(arrow)
        if requested == ENGINE_SPARK:
            return None
        from dvengine.engine.spark.merge import collect_small_source

        return collect_small_source(self._source, None if requested == ENGINE_LOCAL else self._max_local_source_rows())

    def _max_local_source_rows(self) -> int:
        raw = self._session.conf()(CONF_LOCAL_MAX_SOURCE_ROWS)
        return DEFAULT_LOCAL_MAX_SOURCE_ROWS if raw in (None, "") else int(str(raw))

    def _column_resolver(self) -> Any:
        """How the local MERGE turns pyspark Columns into SQL (only needed when some were given)."""
        exprs: list[object] = [self._condition]
        for clause in self._clauses:
            exprs.append(clause.condition)
            exprs.extend((clause.assignments or {}).values())
        if all(e is None or isinstance(e, str) for e in exprs):
            return None
        from dvengine.engine.spark.merge import local_merge_resolver

        return local_merge_resolver(self._session.session())

    def execute(self) -> DataFrame | dict[str, Any]:
        """Run the MERGE as one commit.

        For a table opened with a SparkSession this returns what delta-spark returns: a one-row
        DataFrame ``num_affected_rows, num_updated_rows, num_deleted_rows, num_inserted_rows``.
        Without a session (``DeltaTable.forPath(None, path)``) it returns the dict of
        :meth:`executeMetrics`.
        """
        metrics = self.executeMetrics()
        if not self._delta_spark_results:
            return metrics
        from dvengine.engine.spark.results import MERGE_METRIC_COLUMNS, metrics_dataframe

        return metrics_dataframe(self._session.session(), delta_merge_result(metrics), MERGE_METRIC_COLUMNS, nullable=False)

    def executeMetrics(self) -> dict[str, Any]:
        """dvengine-native: run the MERGE; Delta's full MERGE metrics (commitInfo names) plus ``version``
        (None: nothing changed) and ``executionEngine``, whatever the table was opened with."""
        choice = self._session.choice(self._engine)
        metrics = self._run(choice)
        after_commit(choice.conf, self._table_root, metrics.get("version"))
        return metrics

    def _run(self, choice: EngineChoice) -> dict[str, Any]:
        options = resolve_options(choice.conf, self._mode)
        evolution = self._schema_evolution or auto_merge_enabled(choice.conf)
        source_alias = self._source_alias
        if source_alias is None and as_arrow_table(self._source) is None:
            from dvengine.engine.spark.merge import dataframe_alias

            source_alias = dataframe_alias(self._source)
        def local_request(arrow: pa.Table) -> LocalMergeRequest:
            return LocalMergeRequest(
                self._table_root, self._target_alias, arrow, source_alias, self._condition, tuple(self._clauses),
                options, self._column_resolver(), evolution, choice.conf,
            )

        if choice.requested != ENGINE_SPARK:
            arrow = self._local_source(choice.requested)
            if arrow is not None:
                try:
                    return execute_local_merge(local_request(arrow))
                except NotLocallyEvaluableError:
                    if choice.requested == ENGINE_LOCAL:
                        raise
        else:  # a small source runs as file tasks on the cluster, unless the strategy says rows
            from dvengine.engine.spark.merge import merge_as_file_tasks

            done = merge_as_file_tasks(self._session.session(), self._source, self._max_local_source_rows(), local_request)
            if done is not None:
                return done
        from dvengine.engine.spark.merge import run_spark_merge

        return run_spark_merge(
            self._session.session(), self._table_root, self._target_alias, self._source, source_alias,
            self._condition, tuple(self._clauses), self._mode, evolution,
        )
