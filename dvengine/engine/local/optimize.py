"""The embedded executor's half of OPTIMIZE and of DV purging: rewrite files without their deleted rows.

A bin's files are read with their DVs applied (the reference Arrow reader, or the local executor's
column cache when it holds a file: ``executor.live_file_rows``), concatenated in bin
order and written by the same writer DML uses (file naming, stats, column mapping, partition
folders), so compacted files are indistinguishable from any other dvengine-written file. One bin
is bounded by ``optimize.maxFileSize`` (1 GiB by default), which bounds the memory used.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from dvengine.engine.local.executor import live_file_rows, writable_rows
from dvengine.engine.local.writer import write_data_files
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import MaterializedColumns
from dvengine.protocol.schema import to_arrow_schema
from dvengine.read.row_ids import live_rows_with_ids, tracked_columns
from dvengine.writing.stats import num_indexed_cols


def live_rows(snapshot: Snapshot, files: Sequence[AddFile]) -> pa.Table:
    """The rows of ``files`` their DVs leave, in the table's column order (what a rewrite keeps);
    on a table that keeps stable row ids, with each row's id and commit version (a compacted row
    is copied, so both are preserved: written as materialized columns)."""
    if tracked_columns(snapshot) is not None:
        tables = [live_rows_with_ids(snapshot, add) for add in files]
        return writable_rows(snapshot, tables)[0]
    names = to_arrow_schema(snapshot.schema).names
    tables = [live_file_rows(snapshot, add).select(names) for add in files]
    return pa.concat_tables(tables) if tables else to_arrow_schema(snapshot.schema).empty_table()


def materialized_names(snapshot: Snapshot) -> MaterializedColumns | None:
    """Where the writer stores carried stable ids (None: the table does not keep them)."""
    return tracked_columns(snapshot)


def rewrite_files(snapshot: Snapshot, files: Sequence[AddFile]) -> list[AddFile]:
    """Live rows of ``files`` (one partition) written as new data files; nothing is committed."""
    rows = live_rows(snapshot, files)
    if rows.num_rows == 0:
        return []
    return write_data_files(
        rows,
        snapshot.table_root,
        snapshot.schema,
        snapshot.partition_columns,
        num_indexed_cols(snapshot.configuration),
        materialized=materialized_names(snapshot),
    )
