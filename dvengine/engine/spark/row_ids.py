"""Stable row ids and row commit versions in Spark scans, for the row plans of row-tracking tables.

PROTOCOL.md "Row Tracking": a row's stable id is its file's materialized row id column where that
is present and not NULL, else ``baseRowId`` + the row's physical index; its stable commit version
is the materialized commit version, else the file's ``defaultRowCommitVersion``. The local
executor computes both per file with Arrow (``read.row_ids``); here the same is one Spark plan:
the scan keeps ``_metadata.file_path`` / ``_metadata.row_index`` (as it does for DVs) and reads
the materialized columns by physical name, a broadcast table of ``(file, baseRowId,
defaultRowCommitVersion)`` built on the driver from the log is joined on the file, and two
``coalesce`` give the internal columns (``protocol.row_tracking.INTERNAL_COLUMNS``) that the
writers (``rows_job`` tasks, ``writer.write_parquet_files``) store under the materialized names.
This is also what Delta's own reader does for ``_metadata.row_id`` (constant per-file metadata
columns plus the Parquet row index).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.paths import hadoop_names
from dvengine.engine.spark.reader import FILE_PATH_COL, ROW_INDEX_COL, scan_logical
from dvengine.errors import ProtocolError, UnsupportedFeatureError
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import ENABLE, ROW_COMMIT_VERSION_COLUMN, ROW_ID_COLUMN, MaterializedColumns
from dvengine.read.row_ids import ROW_COMMIT_VERSION as READ_ROW_COMMIT_VERSION
from dvengine.read.row_ids import ROW_ID as READ_ROW_ID
from dvengine.read.row_ids import tracked_columns
from dvengine.storage import resolve_data_path

ROW_ID = ROW_ID_COLUMN
ROW_COMMIT_VERSION = ROW_COMMIT_VERSION_COLUMN
_BASE = "__dv_base_row_id"
_DEFAULT_VERSION = "__dv_default_row_commit_version"


def _per_file(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame:
    """One row per file: the URI Spark reports in ``_metadata.file_path``, ``baseRowId`` and
    ``defaultRowCommitVersion`` (every live file of an enabled table must carry both)."""
    names = hadoop_names(spark)
    uris, bases, versions = [], [], []
    for add in files:
        if add.base_row_id is None or add.default_row_commit_version is None:
            raise ProtocolError(
                f"file {add.path} of row-tracking table {snapshot.table_root} has no baseRowId / "
                "defaultRowCommitVersion (every live add must carry them once row tracking is enabled)"
            )
        uris.append(names.uri(resolve_data_path(snapshot.table_root, add.path)))
        bases.append(add.base_row_id)
        versions.append(add.default_row_commit_version)
    table = pa.table({
        FILE_PATH_COL: pa.array(uris, pa.string()),
        _BASE: pa.array(bases, pa.int64()),
        _DEFAULT_VERSION: pa.array(versions, pa.int64()),
    })
    return spark.createDataFrame(table)


def scan_with_row_ids(
    spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile], columns: Collection[str] | None = None
) -> DataFrame:
    """``scan_logical(..., keep_row_ids=True)`` of ``files``, plus the stable row id and commit
    version columns (``ROW_ID`` / ``ROW_COMMIT_VERSION``) when the table keeps stable ids."""
    names = tracked_columns(snapshot)
    if names is None:
        return scan_logical(spark, snapshot, files, columns=columns, keep_row_ids=True)
    hidden = (names.row_id, names.row_commit_version)
    frame = scan_logical(spark, snapshot, files, columns=columns, keep_row_ids=True, hidden_columns=hidden)
    if not files:
        return frame.select(
            *[F.col(quote(c)) for c in frame.columns if c not in hidden],
            F.lit(None).cast("long").alias(ROW_ID), F.lit(None).cast("long").alias(ROW_COMMIT_VERSION),
        )
    return _stable(frame.join(F.broadcast(_per_file(spark, snapshot, files)), on=FILE_PATH_COL, how="inner"), names)


def _stable(joined: DataFrame, names: MaterializedColumns) -> DataFrame:
    kept = [F.col(quote(c)) for c in joined.columns if c not in (names.row_id, names.row_commit_version, _BASE, _DEFAULT_VERSION)]
    row_id = F.coalesce(F.col(quote(names.row_id)), F.col(_BASE) + F.col(ROW_INDEX_COL))
    version = F.coalesce(F.col(quote(names.row_commit_version)), F.col(_DEFAULT_VERSION))
    return joined.select(*kept, row_id.alias(ROW_ID), version.alias(ROW_COMMIT_VERSION))


def carried(frame: DataFrame, updated: bool) -> list[Column]:
    """The internal id columns a row plan writes for rows of ``frame`` (empty when ``frame`` has
    none, i.e. the table keeps no stable ids): copied rows keep id and commit version; updated
    rows keep their id and get a NULL version (= the new file's ``defaultRowCommitVersion``, the
    version of this commit); rows without a target row (inserts) have NULL ids, i.e. fresh ones."""
    if ROW_ID not in frame.columns:
        return []
    version = F.lit(None).cast("long") if updated else F.col(ROW_COMMIT_VERSION)
    return [F.col(ROW_ID), version.alias(ROW_COMMIT_VERSION)]


def read_row_tracking_df(spark: SparkSession, snapshot: Snapshot, columns: Collection[str] | None = None) -> DataFrame:
    """Live rows of ``snapshot`` as a Spark DataFrame with ``row_id`` and ``row_commit_version``
    (what Delta shows as ``_metadata.row_id`` / ``_metadata.row_commit_version``): the Spark twin
    of ``read.row_ids.read_row_tracking``, computed in the plan as the row plans do. Only for
    tables with row tracking enabled (else UnsupportedFeatureError naming the table)."""
    if tracked_columns(snapshot) is None:
        raise UnsupportedFeatureError(
            f"table {snapshot.table_root} does not have row tracking enabled ({ENABLE}=true); "
            "it has no stable row ids to read"
        )
    frame = scan_with_row_ids(spark, snapshot, snapshot.files, columns)
    wanted = [f.name for f in snapshot.schema.fields if columns is None or f.name in columns]
    return frame.select(
        *[F.col(quote(name)) for name in wanted],
        F.col(ROW_ID).alias(READ_ROW_ID), F.col(ROW_COMMIT_VERSION).alias(READ_ROW_COMMIT_VERSION),
    )
