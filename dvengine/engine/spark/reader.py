"""Read a snapshot as a Spark DataFrame with deletion vectors applied inside Spark.

Rows are scanned with ``_metadata.file_path`` and ``_metadata.row_index`` selected into
ordinary columns, then the (file, row index) pairs that DVs delete are removed with a left
anti-join against a small DataFrame built on the driver from the bitmaps. That keeps every
row in the JVM (no per-row Python), and Spark broadcasts the deleted pairs when they are
small. Partition values are joined from the log, never parsed from folder names.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import DataType
from pyspark.sql.types import StructType as SparkStructType

from dvengine.dv import load_deletion_vector
from dvengine.engine.spark.paths import spark_file_uri
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import StructField, StructType, to_arrow_field, to_arrow_schema
from dvengine.storage import resolve_data_path

FILE_PATH_COL = "__dv_file_path"
ROW_INDEX_COL = "__dv_row_index"
FILE_ID_COL = "__dv_file_id"
# Above this many deleted rows the (file id, row index) set (12 bytes a row) is left to Spark's
# planner, which shuffles instead of broadcasting when it exceeds autoBroadcastJoinThreshold.
BROADCAST_MAX_DELETED_ROWS = 2_000_000


def spark_schema(schema: StructType, physical: bool = False) -> SparkStructType:
    """Spark schema of a Delta schema, going through Arrow so both agree on every type."""
    converted: SparkStructType = from_arrow_schema(to_arrow_schema(schema, physical=physical))
    return converted


def scan_files_with_row_index(
    spark: SparkSession, snapshot: Snapshot, absolute_paths: Sequence[str], columns: Sequence[str] | None = None
) -> DataFrame:
    """Physical scan of the given files: data columns under PHYSICAL names plus file path and row index.

    Used by the reader and by DML verification scans; no DV is applied here.
    """
    partition_cols = {c.lower() for c in snapshot.partition_columns}
    data_fields = [
        f for f in snapshot.schema.fields
        if f.name.lower() not in partition_cols and (columns is None or f.name in columns)
    ]
    physical = StructType(tuple(data_fields))
    reader = spark.read.schema(spark_schema(physical, physical=True))
    df = reader.parquet(*absolute_paths)
    return df.select(
        *[F.col(f"`{f.physical_name}`") for f in data_fields],
        F.col("_metadata.file_path").alias(FILE_PATH_COL),
        F.col("_metadata.row_index").alias(ROW_INDEX_COL),
    )


def deleted_rows_frame(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame | None:
    """(file id, row index) of every row the files' DVs delete, or None if there are none.

    The file id is the file's position in ``files`` (see :func:`file_ids_frame`): 12 bytes per
    deleted row instead of a repeated path string, so millions of deleted rows stay joinable.
    """
    ids: list[pa.Array] = []
    rows: list[pa.Array] = []
    for file_id, add in enumerate(files):
        if add.deletion_vector is None:
            continue
        bitmap = load_deletion_vector(snapshot.table_root, add.deletion_vector)
        indexes = np.asarray(bitmap.to_array(), dtype=np.int64)
        ids.append(pa.array(np.full(len(indexes), file_id, dtype=np.int32)))
        rows.append(pa.array(indexes, type=pa.int64()))
    if not ids:
        return None
    return spark.createDataFrame(pa.table({FILE_ID_COL: pa.concat_arrays(ids), ROW_INDEX_COL: pa.concat_arrays(rows)}))


def file_ids_frame(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame:
    """One row per file: the URI Spark reports in ``_metadata.file_path`` and the file's id."""
    uris = [spark_file_uri(resolve_data_path(snapshot.table_root, add.path)) for add in files]
    table = pa.table({FILE_PATH_COL: pa.array(uris, pa.string()), FILE_ID_COL: pa.array(range(len(uris)), pa.int32())})
    return spark.createDataFrame(table)


def partition_values_frame(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame:
    """One row per file: its Spark file URI and typed partition values (logical names)."""
    part_fields = [snapshot.schema.get(c) for c in snapshot.partition_columns]
    arrow_fields = [pa.field(FILE_PATH_COL, pa.string())] + [to_arrow_field(f).with_nullable(True) for f in part_fields]
    columns: dict[str, list[object]] = {f.name: [] for f in arrow_fields}
    for add in files:
        columns[FILE_PATH_COL].append(spark_file_uri(resolve_data_path(snapshot.table_root, add.path)))
        values = snapshot.partition_values_logical(add)
        for f in part_fields:
            columns[f.name].append(values.get(f.name))
    table = pa.table(columns, schema=pa.schema(arrow_fields))
    return spark.createDataFrame(table)


def scan_logical(
    spark: SparkSession,
    snapshot: Snapshot,
    files: Sequence[AddFile],
    columns: Collection[str] | None = None,
    keep_row_ids: bool = False,
) -> DataFrame:
    """Live rows of ``files`` under logical column names, in schema order, DVs applied.

    ``columns`` limits the scan to those logical columns (DML verification reads only what
    the predicate needs); ``keep_row_ids`` keeps the file path and row index columns that
    address each row physically.
    """
    logical = snapshot.schema
    wanted = [f for f in logical.fields if columns is None or f.name in columns]
    if not files:
        empty = spark.createDataFrame([], spark_schema(StructType(tuple(wanted))))
        if keep_row_ids:
            empty = empty.withColumn(FILE_PATH_COL, F.lit(None).cast("string")).withColumn(
                ROW_INDEX_COL, F.lit(None).cast("long")
            )
        return empty
    paths = [resolve_data_path(snapshot.table_root, add.path) for add in files]
    df = scan_files_with_row_index(spark, snapshot, paths, [f.name for f in wanted])
    deleted = deleted_rows_frame(spark, snapshot, files)
    if deleted is not None:
        # Tag rows with a small integer file id (tiny broadcast join on the path), then drop the
        # deleted (file id, row index) pairs: broadcast when small, shuffle join when huge.
        df = df.join(F.broadcast(file_ids_frame(spark, snapshot, files)), on=FILE_PATH_COL, how="inner")
        total_deleted = sum(add.deleted_row_count for add in files)
        right = F.broadcast(deleted) if total_deleted <= BROADCAST_MAX_DELETED_ROWS else deleted
        df = df.join(right, on=[FILE_ID_COL, ROW_INDEX_COL], how="left_anti").drop(FILE_ID_COL)
    part_lower = {c.lower() for c in snapshot.partition_columns}
    if any(f.name.lower() in part_lower for f in wanted):
        df = df.join(F.broadcast(partition_values_frame(spark, snapshot, files)), on=FILE_PATH_COL, how="inner")
    selected = []
    for f in wanted:
        source = f.name if f.name.lower() in part_lower else f.physical_name
        selected.append(F.col(f"`{source}`").cast(logical_spark_type(f)).alias(f.name))
    if keep_row_ids:
        selected += [F.col(FILE_PATH_COL), F.col(ROW_INDEX_COL)]
    return df.select(*selected)


def read_snapshot_df(spark: SparkSession, snapshot: Snapshot, keep_row_ids: bool = False) -> DataFrame:
    """All live rows of a snapshot, logical column names, schema order."""
    return scan_logical(spark, snapshot, snapshot.files, keep_row_ids=keep_row_ids)


def logical_spark_type(field: StructField) -> DataType:
    """Spark type of a field under its logical (not physical) nested names."""
    return spark_schema(StructType((field,)))[0].dataType
