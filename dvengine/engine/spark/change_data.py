"""Writing change data rows from Spark: frames tagged with ``_change_type`` into ``_change_data``.

The data-file writer (physical names, partition folders, staging folder and clean-up) writes
them, rooted at ``_change_data`` and with ``_change_type`` as one more column, which is the
layout Delta Spark gives its change files; ``commands.change_data`` commits them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dvengine.commands.change_data import (
    CHANGE_TYPE_COLUMN,
    DELETE,
    INSERT,
    UPDATE_POSTIMAGE,
    UPDATE_PREIMAGE,
    change_data_root,
    change_file_schema,
)
from dvengine.commands.context import DmlContext
from dvengine.commands.merge_clauses import BoundClause, ClauseAction
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, logical_spark_type
from dvengine.engine.spark.writer import write_parquet_files
from dvengine.protocol.actions import AddFile


def tagged(frame: DataFrame, columns: Sequence[Column], change_type: str) -> DataFrame:
    """``columns`` (one per table field, in schema order) of ``frame`` plus a constant ``_change_type``."""
    return frame.select(*columns, F.lit(change_type).alias(CHANGE_TYPE_COLUMN))


def table_columns(ctx: DmlContext, names: Sequence[str] | None = None) -> list[Column]:
    """The table's fields read from ``names`` (default: the fields' own names), cast to their types."""
    fields = ctx.snapshot.schema.fields
    sources = names if names is not None else [f.name for f in fields]
    return [F.col(quote(n)).cast(logical_spark_type(f)).alias(f.name) for n, f in zip(sources, fields, strict=True)]


def write_change_frames(ctx: DmlContext, frames: Sequence[DataFrame]) -> list[AddFile]:
    """Write the union of tagged frames under ``_change_data`` (files relative to that folder)."""
    if not frames:
        return []
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    snapshot = ctx.snapshot
    return write_parquet_files(
        union, change_data_root(snapshot), change_file_schema(snapshot.schema), snapshot.partition_columns, num_indexed_cols=0
    )


def merge_change_frames(
    ctx: DmlContext, clauses: Sequence[BoundClause], work: DataFrame, valued: DataFrame, target_names: Sequence[str], clause_col: str
) -> list[DataFrame]:
    """Change rows of a Spark MERGE, as Delta Spark's MERGE writes them.

    ``work`` has the joined rows (target columns under ``target_names``, the row's first matching
    clause in ``clause_col``, the target row ids); ``valued`` the new row of each writing clause
    under the same names. UPDATE: target row as ``update_preimage`` and new row as
    ``update_postimage``; DELETE: target row as ``delete``, once per target row (Delta
    de-duplicates CDF deletes when several source rows match one); INSERT: new row as ``insert``.
    """
    def ids(action: ClauseAction) -> list[int]:
        return [c.clause_id for c in clauses if c.action is action]

    def having(frame: DataFrame, action: ClauseAction) -> DataFrame:
        return frame.where(F.col(clause_col).isin(ids(action)))

    old = table_columns(ctx, target_names)
    new = table_columns(ctx, target_names)
    frames = []
    if ids(ClauseAction.UPDATE):
        frames += [
            tagged(having(work, ClauseAction.UPDATE), old, UPDATE_PREIMAGE),
            tagged(having(valued, ClauseAction.UPDATE), new, UPDATE_POSTIMAGE),
        ]
    if ids(ClauseAction.DELETE):
        deleted = having(work, ClauseAction.DELETE).dropDuplicates([FILE_PATH_COL, ROW_INDEX_COL])
        frames.append(tagged(deleted, old, DELETE))
    if ids(ClauseAction.INSERT):
        frames.append(tagged(having(valued, ClauseAction.INSERT), new, INSERT))
    return frames
