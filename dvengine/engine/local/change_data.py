"""Writing change data rows in-process: Arrow tables tagged with ``_change_type`` into ``_change_data``.

The same Parquet writer as data files (physical names, partition folders, INT64 timestamps)
writes them, rooted at ``_change_data`` and with ``_change_type`` as one more column, so the
files have the layout Delta Spark gives them; ``commands.change_data`` commits them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

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
from dvengine.engine.local.writer import write_data_files
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import StructType, conform_table, to_arrow_field


def tag(rows: pa.Table, change_type: str) -> pa.Table:
    """``rows`` (logical columns) with a constant ``_change_type`` column."""
    return rows.append_column(CHANGE_TYPE_COLUMN, pa.array([change_type] * rows.num_rows, pa.string()))


def write_change_rows(ctx: DmlContext, tagged: Sequence[pa.Table]) -> list[AddFile]:
    """Write tagged rows (table columns + ``_change_type``) under ``_change_data``; nothing when empty."""
    tables = [t for t in tagged if t.num_rows]
    if not tables:
        return []
    snapshot = ctx.snapshot
    schema = change_file_schema(snapshot.schema)
    common = pa.schema([to_arrow_field(f).with_nullable(True) for f in schema.fields])
    rows = pa.concat_tables([conform_table(t.select(common.names), common) for t in tables])
    # No column stats: readers never skip change files by them, and Delta Spark writes none either.
    return write_data_files(rows, change_data_root(snapshot), schema, snapshot.partition_columns, num_indexed_cols=0)


class MergeChanges:
    """Change rows of a local MERGE, gathered clause by clause as it evaluates them.

    Per Delta Spark's MERGE: a matched (or not-matched-by-source) UPDATE gives the target row as
    ``update_preimage`` and the new row as ``update_postimage``; a DELETE gives the target row as
    ``delete`` (once per target row even when several source rows match it, as Delta
    de-duplicates CDF deletes); an INSERT gives the new row as ``insert``.
    """

    def __init__(self, target_names: Mapping[str, str], schema: StructType, row_key: Sequence[str]) -> None:
        self._target_names = target_names  # logical column -> its name in the joined table
        self._schema = schema
        self._row_key = list(row_key)  # columns identifying a target row in the joined table
        self.tagged: list[pa.Table] = []

    def _target_rows(self, rows: pa.Table) -> pa.Table:
        names = [self._target_names[f.name] for f in self._schema.fields]
        return rows.select(names).rename_columns(self._schema.field_names)

    def add(self, table: pa.Table, clause_ids: np.ndarray, clauses: Sequence[BoundClause], new_rows: Mapping[int, pa.Table]) -> None:
        """Record the changes of ``clauses`` over ``table`` (first matching clause id per row)."""
        for clause in clauses:
            mask = clause_ids == clause.clause_id
            if not mask.any():
                continue
            if clause.action is ClauseAction.INSERT:
                self.tagged.append(tag(new_rows[clause.clause_id], INSERT))
                continue
            rows = table.filter(pa.array(mask))
            if clause.action is ClauseAction.UPDATE:
                self.tagged += [tag(self._target_rows(rows), UPDATE_PREIMAGE), tag(new_rows[clause.clause_id], UPDATE_POSTIMAGE)]
            else:
                keys = np.column_stack([rows.column(k).to_numpy().astype(np.int64) for k in self._row_key])
                _, first = np.unique(keys, axis=0, return_index=True)
                self.tagged.append(tag(self._target_rows(rows.take(pa.array(np.sort(first)))), DELETE))
