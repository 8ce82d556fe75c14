"""Stable row ids and row commit versions of a row-tracking table, read with Arrow (no JVM).

PROTOCOL.md "Reader Requirements for Row Tracking": a row's stable id is the materialized row id
column of its file when present and not NULL, else ``baseRowId`` + the row's physical index; its
stable commit version is the materialized commit version when present and not NULL, else the
file's ``defaultRowCommitVersion``. Commands use :func:`with_stable_ids` to carry both from the
file a row is read from to the file it is written to (the writer stores them under the table's
materialized names); :func:`read_row_tracking` is the user-facing read, what Spark shows as
``_metadata.row_id`` / ``_metadata.row_commit_version``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.errors import ProtocolError, UnsupportedFeatureError
from dvengine.log import Snapshot
from dvengine.protocol import row_tracking
from dvengine.protocol.actions import AddFile
from dvengine.protocol.features import writer_features
from dvengine.protocol.schema import to_arrow_schema
from dvengine.read.arrow_reader import deleted_row_mask, open_data_file, read_physical_rows

ROW_ID = "row_id"  # output names of read_row_tracking, as Spark's _metadata fields
ROW_COMMIT_VERSION = "row_commit_version"


def tracked_columns(snapshot: Snapshot) -> row_tracking.MaterializedColumns | None:
    """The materialized column names when stable ids must be kept (row tracking enabled), else None."""
    if not row_tracking.enabled(snapshot.configuration):
        return None
    if row_tracking.FEATURE not in writer_features(snapshot.protocol):
        raise ProtocolError(
            f"table {snapshot.table_root} sets {row_tracking.ENABLE}=true but its protocol lacks the "
            f"'{row_tracking.FEATURE}' writer feature"
        )
    return row_tracking.required_materialized_columns(snapshot.configuration, snapshot.table_root)


def _coalesced(parquet: pq.ParquetFile, name: str, fallback: pa.Array) -> pa.Array:
    if name not in parquet.schema_arrow.names:
        return fallback
    stored = parquet.read(columns=[name]).column(0).combine_chunks().cast(pa.int64())
    return pc.coalesce(stored, fallback)


def stable_ids(
    snapshot: Snapshot, add: AddFile, names: row_tracking.MaterializedColumns, parquet: pq.ParquetFile | None = None
) -> tuple[pa.Array, pa.Array]:
    """(stable row id, stable row commit version) of every physical row of ``add``, in file order."""
    if add.base_row_id is None or add.default_row_commit_version is None:
        raise ProtocolError(
            f"file {add.path} of row-tracking table {snapshot.table_root} has no baseRowId / defaultRowCommitVersion "
            "(every live add must carry them once row tracking is enabled)"
        )
    if parquet is None:
        parquet = open_data_file(snapshot, add)
    num_rows = parquet.metadata.num_rows
    fresh = pa.array(np.arange(num_rows, dtype=np.int64) + add.base_row_id)
    default = pa.array(np.full(num_rows, add.default_row_commit_version, dtype=np.int64))
    return _coalesced(parquet, names.row_id, fresh), _coalesced(parquet, names.row_commit_version, default)


def with_stable_ids(snapshot: Snapshot, add: AddFile, physical_rows: pa.Table, parquet: pq.ParquetFile | None = None) -> pa.Table:
    """``physical_rows`` (every physical row of ``add``, in file order) with the internal stable id
    and commit version columns appended when the table keeps stable ids; unchanged otherwise."""
    names = tracked_columns(snapshot)
    if names is None:
        return physical_rows
    row_ids, versions = stable_ids(snapshot, add, names, parquet)
    if len(row_ids) != physical_rows.num_rows:
        raise ProtocolError(f"file {add.path}: {physical_rows.num_rows} rows read but {len(row_ids)} row ids")
    return physical_rows.append_column(row_tracking.ROW_ID_COLUMN, row_ids).append_column(
        row_tracking.ROW_COMMIT_VERSION_COLUMN, versions
    )


def live_rows_with_ids(snapshot: Snapshot, add: AddFile) -> pa.Table:
    """Live rows of ``add`` (DV applied), logical columns plus the internal id columns when tracked."""
    parquet = open_data_file(snapshot, add)
    table = with_stable_ids(snapshot, add, read_physical_rows(snapshot, add, None, parquet), parquet)
    keep = deleted_row_mask(snapshot.table_root, add, parquet.metadata.num_rows)
    return table if keep is None else table.filter(pa.array(keep))


def read_row_tracking(snapshot: Snapshot, columns: Sequence[str] | None = None) -> pa.Table:
    """Live rows of ``snapshot`` with their stable ``row_id`` and ``row_commit_version`` columns.

    Only for tables with row tracking enabled: before that, ids are not stable (Delta does not
    expose them either), so asking is an UnsupportedFeatureError naming the table.
    """
    names = tracked_columns(snapshot)
    if names is None:
        raise UnsupportedFeatureError(
            f"table {snapshot.table_root} does not have row tracking enabled ({row_tracking.ENABLE}=true); "
            "it has no stable row ids to read"
        )
    tables = []
    for add in snapshot.files:
        parquet = open_data_file(snapshot, add)
        table = read_physical_rows(snapshot, add, columns, parquet)
        row_ids, versions = stable_ids(snapshot, add, names, parquet)
        table = table.append_column(ROW_ID, row_ids).append_column(ROW_COMMIT_VERSION, versions)
        keep = deleted_row_mask(snapshot.table_root, add, parquet.metadata.num_rows)
        tables.append(table if keep is None else table.filter(pa.array(keep)))
    if not tables:
        base = to_arrow_schema(snapshot.schema)
        if columns is not None:
            wanted = {c.lower() for c in columns}
            base = pa.schema([f for f in base if f.name.lower() in wanted])
        return base.append(pa.field(ROW_ID, pa.int64())).append(pa.field(ROW_COMMIT_VERSION, pa.int64())).empty_table()
    return pa.concat_tables(tables)
