"""MERGE: the delta-spark ``DeltaMergeBuilder`` API and the ``dvengine upsert`` command.

The builder only records clauses (names and semantics as in delta-spark, plus ``withMode``);
all checking and work happens in :func:`execute`, so a builder can be assembled freely and a
bad clause still leaves the table untouched. Execution lives in ``merge_exec``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from dvengine.engine.spark.merge_clauses import ClauseAction, ClauseKind, Expr, MergeClause
from dvengine.engine.spark.merge_exec import MergeRequest, execute_merge
from dvengine.errors import InvalidArgumentError
from dvengine.planning.decisions import MODES
from dvengine.storage import normalize_table_path


def dataframe_alias(df: DataFrame) -> str | None:
    """The alias given with ``df.alias(name)`` (a SubqueryAlias at the top of the plan), if any.

    PySpark has no public accessor; the analyzed plan of a classic DataFrame carries it. Spark
    Connect frames (no JVM plan) answer None and need an explicit alias.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().analyzed()
        if str(plan.nodeName()) == "SubqueryAlias":
            return str(plan.alias())
    except Exception:  # noqa: BLE001 - no alias is a valid answer when the plan cannot be inspected
        return None
    return None


class DeltaMergeBuilder:
    """Builds a MERGE into a Delta table; clauses of each kind apply in the order given."""

    def __init__(
        self,
        spark: SparkSession,
        table_root: str,
        target_alias: str | None,
        source: DataFrame,
        condition: str | Column,
        source_alias: str | None = None,
    ) -> None:
        self._spark = spark
        self._table_root = table_root
        self._target_alias = target_alias
        self._source = source
        self._source_alias = source_alias if source_alias is not None else dataframe_alias(source)
        self._condition = condition
        self._clauses: list[MergeClause] = []
        self._mode: str | None = None

    def _add(self, kind: ClauseKind, action: ClauseAction, condition: Expr | None,
             assignments: Mapping[str, Expr] | None) -> DeltaMergeBuilder:
        if assignments is not None and not isinstance(assignments, Mapping):
            raise InvalidArgumentError(f"assignments must be a dict of column -> expression, got {type(assignments).__name__}")
        frozen = None if assignments is None else dict(assignments)
        self._clauses.append(MergeClause(kind, action, condition, frozen))
        return self

    def whenMatchedUpdate(self, condition: Expr | None = None, set: Mapping[str, Expr] | None = None) -> DeltaMergeBuilder:
        if set is None:
            raise InvalidArgumentError("whenMatchedUpdate needs set={column: expression}; use whenMatchedUpdateAll for all columns")
        return self._add(ClauseKind.MATCHED, ClauseAction.UPDATE, condition, set)

    def whenMatchedUpdateAll(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.MATCHED, ClauseAction.UPDATE, condition, None)

    def whenMatchedDelete(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.MATCHED, ClauseAction.DELETE, condition, None)

    def whenNotMatchedInsert(self, condition: Expr | None = None, values: Mapping[str, Expr] | None = None) -> DeltaMergeBuilder:
        if values is None:
            raise InvalidArgumentError("whenNotMatchedInsert needs values={column: expression}; use whenNotMatchedInsertAll")
        return self._add(ClauseKind.NOT_MATCHED, ClauseAction.INSERT, condition, values)

    def whenNotMatchedInsertAll(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.NOT_MATCHED, ClauseAction.INSERT, condition, None)

    def whenNotMatchedBySourceUpdate(
        self, condition: Expr | None = None, set: Mapping[str, Expr] | None = None
    ) -> DeltaMergeBuilder:
        if set is None:
            raise InvalidArgumentError("whenNotMatchedBySourceUpdate needs set={column: expression}")
        return self._add(ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.UPDATE, condition, set)

    def whenNotMatchedBySourceDelete(self, condition: Expr | None = None) -> DeltaMergeBuilder:
        return self._add(ClauseKind.NOT_MATCHED_BY_SOURCE, ClauseAction.DELETE, condition, None)

    def withMode(self, mode: str) -> DeltaMergeBuilder:
        """dvengine extension: ``dv`` | ``rewrite`` | ``auto`` (default from Spark conf)."""
        if mode.lower() not in MODES:
            raise InvalidArgumentError(f"mode must be one of {MODES}, got {mode!r}")
        self._mode = mode.lower()
        return self

    def execute(self) -> dict[str, Any]:
        """Run the MERGE as one commit; returns Delta's MERGE metrics plus ``version`` (None: no change)."""
        request = MergeRequest(
            table_root=self._table_root,
            target_alias=self._target_alias,
            source=self._source,
            source_alias=self._source_alias,
            condition=self._condition,
            clauses=tuple(self._clauses),
            mode=self._mode,
        )
        return execute_merge(self._spark, request)


def merge_builder(
    spark: SparkSession,
    table_root: str,
    target_alias: str | None,
    source: DataFrame,
    condition: str | Column,
    source_alias: str | None = None,
) -> DeltaMergeBuilder:
    """Start a MERGE of ``source`` into the table at ``table_root``.

    The source alias is ``source_alias`` if given, else the one set with ``source.alias(...)``;
    without either, source columns can only be referenced unqualified (when unambiguous).
    """
    return DeltaMergeBuilder(spark, normalize_table_path(table_root), target_alias, source, condition, source_alias)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def upsert_condition(keys: list[str]) -> str:
    return " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in keys)


def key_columns(text: str) -> list[str]:
    """argparse type for ``--key``: comma-separated names; none at all is a usage error (exit 2)."""
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise argparse.ArgumentTypeError(f"needs at least one column name, got {text!r}")
    return keys


def cmd_upsert(args: argparse.Namespace) -> int:
    """The source file and the table are checked without Spark, so typos fail before a JVM starts."""
    from dvengine.cli_dml import cli_session, parquet_source_schema
    from dvengine.log import latest_version

    keys: list[str] = args.key
    root = normalize_table_path(args.path)
    latest_version(root)  # TableNotFoundError before Spark starts
    parquet_source_schema(args.source, "--source")
    spark = cli_session(args)
    source = spark.read.parquet(args.source)
    builder = (
        merge_builder(spark, root, "t", source, upsert_condition(keys), source_alias="s")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
    )
    if args.mode:
        builder = builder.withMode(args.mode)
    metrics = builder.execute()
    sys.stdout.write(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return 0


def register_cli(subparsers: Any) -> None:
    """Add ``dvengine upsert PATH --source FILE.parquet --key COL[,COL...] [--mode dv|rewrite|auto]``."""
    upsert = subparsers.add_parser(
        "upsert", help="MERGE a Parquet file into a table by key: update all columns on match, insert otherwise"
    )
    upsert.add_argument("path")
    upsert.add_argument("--source", required=True, help="Parquet file with the new rows")
    upsert.add_argument(
        "--key", required=True, type=key_columns, help="comma-separated key columns (same names in table and file)"
    )
    upsert.add_argument("--mode", choices=list(MODES))
    upsert.set_defaults(handler=cmd_upsert)
