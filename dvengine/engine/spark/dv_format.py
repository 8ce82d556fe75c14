"""The optional JVM reader that applies deletion vectors inside Spark's Parquet scan.

``io.dvengine.spark.DeletionVectorParquetFormat`` (Java, ``jvm/``, built into
``jvm/build/dvengine-spark.jar`` by ``make install``) extends Spark's ParquetFileFormat the way
Delta Spark's DeltaParquetFileFormat does: executors decode each file's DV and mark deleted rows
in a byte column the scan filters on, so a DV'd file costs about what a clean one does. This
module decides whether a session can use it (the class must be loadable in the session's JVM),
honours the ``dvengine.read.dvReader`` conf key, and describes the DVs for the executors.
Without the jar, reads fall back to the pure-Python plan in :mod:`dvengine.engine.spark.reader`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)
from pyspark.sql.types import StructType as SparkStructType

from dvengine.commands.options import CONF_DV_READER, session_conf
from dvengine.dv.descriptor import absolute_dv_path
from dvengine.dv.dvfile import check_descriptor_range
from dvengine.dv.z85 import z85_decode
from dvengine.engine.spark.jar import JAR_NAME, jar_path
from dvengine.engine.spark.jvm_reader import _LOADABLE, JVM_FORMAT, jvm_reader_loadable
from dvengine.engine.spark.paths import LOCAL, HadoopNames
from dvengine.errors import DeletionVectorError, InvalidArgumentError, SparkEnvironmentError
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import MaterializedColumns
from dvengine.protocol.schema import StructField, to_arrow_field
from dvengine.storage import resolve_data_path, storage_for

IS_DELETED_COL = "__dvengine_is_row_deleted"
# The JVM format's subclass that also fills Delta's row-tracking metadata fields
# (_metadata.row_id, row_commit_version, base_row_id, default_row_commit_version; RowTrackingParquetFormat.java).
ROW_TRACKING_FORMAT = "io.dvengine.spark.RowTrackingParquetFormat"
ROW_TRACKING_FILES_OPTION = "dvengine.rowTracking.files"
ROW_ID_COLUMN_OPTION = "dvengine.rowTracking.rowIdColumn"
ROW_COMMIT_VERSION_COLUMN_OPTION = "dvengine.rowTracking.rowCommitVersionColumn"
TABLE_OPTION = "dvengine.table"
# Per-file constant columns the row-tracking format fills itself (RowTrackingColumns.java).
CONSTANT_COLUMNS_OPTION = "dvengine.constantColumns"
# Delta types a constant column can have (what partition columns can be).
CONSTANT_TYPES = frozenset({
    "string", "long", "integer", "short", "byte", "boolean", "date", "timestamp", "timestamp_ntz",
    "decimal", "double", "float", "binary",
})
DVS_OPTION = "dvengine.dvs"
# "true": the format leaves deleted rows out of its batches itself (no marker column, no filter).
DROP_DELETED_OPTION = "dvengine.dropDeleted"
# Column types the format copies when it leaves rows out (SurvivingRows.java); other schemas
# (structs, arrays, maps, ...) use the marker column and a filter.
_COPYABLE_TYPES = (
    BooleanType, ByteType, ShortType, IntegerType, DateType, LongType, TimestampType, TimestampNTZType,
    FloatType, DoubleType, DecimalType, StringType, BinaryType,
)


# Drop mode copies the batches that lose rows, the marker design filters every row. Since row
# indexes of whole-file splits are counted instead of asked of Spark (MarkDeletedRows.java), the
# copy is the cheaper of the two for fixed-width columns at any density, and for strings or binary
# only while few batches lose rows. Paired probes, 10M rows / 20 files (numbers) and 5M rows / 5
# files (two strings), interleaved rounds against the plain scan: one 1-row DV drop 0.99x, marker
# 1.20x; DVs on 1 % of every file: numbers drop 1.03x, marker 1.17x; strings drop 1.13x, marker
# 1.04x. Above this share of rows in batches that lose rows, a schema with strings or binary
# takes the marker.
DROP_MAX_COPIED_SHARE = 0.5
# Rows per columnar batch Spark's Parquet reader returns by default (columnarReaderBatchSize).
_BATCH_ROWS = 4096
# Types whose copy moves a variable number of bytes per value.
_VARIABLE_WIDTH_TYPES = (StringType, BinaryType)


def copied_share(files: Sequence[AddFile]) -> float:
    """An upper bound on the share of rows that sit in batches losing rows: a file with ``c``
    deleted rows out of ``n`` touches at most ``min(n, c * 4096)`` rows' worth of batches."""
    total = sum(add.num_records or 0 for add in files)
    if total == 0:
        return 1.0
    touched = sum(min(add.num_records or 0, add.deleted_row_count * _BATCH_ROWS) for add in files)
    return touched / total


def drops_deleted_rows(read_schema: SparkStructType, files: Sequence[AddFile]) -> bool:
    """Whether a scan of ``read_schema`` (data and partition columns) over ``files`` should have
    the format drop deleted rows itself rather than mark them for a filter: only atomic columns
    can be copied; fixed-width ones always pay, strings and binary only while few batches lose
    rows (see DROP_MAX_COPIED_SHARE)."""
    if not all(isinstance(f.dataType, _COPYABLE_TYPES) for f in read_schema.fields):
        return False
    if not any(isinstance(f.dataType, _VARIABLE_WIDTH_TYPES) for f in read_schema.fields):
        return True
    return copied_share(files) <= DROP_MAX_COPIED_SHARE


DV_READERS = ("auto", "jvm", "python")
# Bytes of the DV frame around the bitmap: 4-byte size field before, 4-byte CRC after.
_FRAME_OVERHEAD = 8


def use_jvm_reader(spark: SparkSession) -> bool:
    """Whether DV'd files are read through the JVM format, per ``dvengine.read.dvReader``:
    ``auto`` (default) when the class loads, ``jvm`` always (SparkEnvironmentError if it cannot),
    ``python`` never."""
    raw = session_conf(spark)(CONF_DV_READER) or "auto"
    choice = raw.strip().lower()
    if choice not in DV_READERS:
        raise InvalidArgumentError(f"configuration {CONF_DV_READER} must be one of {DV_READERS}, got {raw!r}")
    if choice == "python":
        return False
    loadable = jvm_reader_loadable(spark, warn=choice == "auto")
    if choice == "jvm" and not loadable:
        raise SparkEnvironmentError(
            f"{CONF_DV_READER}=jvm but class {JVM_FORMAT} is not on this session's classpath and could not be "
            f"added to it; start Spark with spark.jars={jar_path() or JAR_NAME} (spark-submit --jars), e.g. through "
            f"dvengine.configure_spark_with_dvengine(builder) (or set {CONF_DV_READER}=auto to fall back to the "
            "Python plan)"
        )
    return loadable


def _dv_line(snapshot: Snapshot, add: AddFile, names: HadoopNames) -> str:
    """One ``dvengine.dvs`` entry (format documented in DeletionVectorRef.java). Checks that need
    no DV bytes (descriptor range, DV file present and long enough) run here, so the common
    damage raises DeletionVectorError before Spark starts; executors verify the bytes."""
    dv = add.deletion_vector
    file_uri = names.uri(resolve_data_path(snapshot.table_root, add.path))
    num_records = -1 if add.num_records is None else add.num_records
    if dv is None:  # read in the same scan as the DV'd files, nothing to remove
        return f"{file_uri}\t{num_records}\t0\tn"
    head = f"{file_uri}\t{num_records}\t{dv.cardinality}"
    if dv.is_inline:
        try:
            payload = z85_decode(dv.path_or_inline_dv, dv.size_in_bytes)
        except DeletionVectorError as exc:
            raise DeletionVectorError(f"inline deletion vector of {add.path}: {exc}") from exc
        return f"{head}\ti\t{base64.b64encode(payload).decode('ascii')}"
    path = absolute_dv_path(snapshot.table_root, dv)
    offset = 1 if dv.offset is None else dv.offset
    check_descriptor_range(offset, dv.size_in_bytes, path)
    try:
        length = storage_for(path).head(path).size
    except FileNotFoundError:
        raise DeletionVectorError(
            f"deletion vector file {path} (descriptor {dv.unique_id}, data file {add.path}) does not exist"
        ) from None
    if length < offset + dv.size_in_bytes + _FRAME_OVERHEAD:
        raise DeletionVectorError(
            f"deletion vector file {path} is {length} bytes, too short for the {dv.size_in_bytes}-byte DV "
            f"at offset {offset} (data file {add.path}; truncated?)"
        )
    return f"{head}\tf\t{names.uri(path)}\t{offset}\t{dv.size_in_bytes}"


def dvs_option(snapshot: Snapshot, files: Sequence[AddFile], names: HadoopNames = LOCAL) -> str:
    """The ``dvengine.dvs`` option for a scan of ``files``: each file's DV, or that it has none."""
    return "\n".join(_dv_line(snapshot, add, names) for add in files)


def row_tracking_options(
    snapshot: Snapshot, files: Sequence[AddFile], columns: MaterializedColumns, names: HadoopNames = LOCAL
) -> dict[str, str]:
    """Options of a :data:`ROW_TRACKING_FORMAT` scan of ``files``: each file's ``baseRowId`` and
    ``defaultRowCommitVersion`` (the way DV descriptors travel to tasks) and the materialized
    columns' physical names. A file lacking the ids (a protocol violation on an enabled table) is
    left out: reading it fails only if its ``_metadata.row_id`` is asked for, naming the file."""
    lines = [
        f"{names.uri(resolve_data_path(snapshot.table_root, add.path))}\t{add.base_row_id}\t{add.default_row_commit_version}"
        for add in files
        if add.base_row_id is not None and add.default_row_commit_version is not None
    ]
    return {
        ROW_TRACKING_FILES_OPTION: "\n".join(lines),
        ROW_ID_COLUMN_OPTION: columns.row_id,
        ROW_COMMIT_VERSION_COLUMN_OPTION: columns.row_commit_version,
        TABLE_OPTION: snapshot.table_root,
    }


def _encoded(values: list[object], field: StructField) -> list[str]:
    """One column's values as RowTrackingColumns.internalValue reads them: ``n`` for NULL, else
    ``v`` + text: dates as days and timestamps as microseconds since the epoch (through Arrow, as
    the Python plan's partition frame types them), strings and binary base64, floats with
    Java's spellings of the non-finite values."""
    arrow = pa.array(values, type=to_arrow_field(field).type)
    name = field.type.name
    if name == "date":
        arrow = arrow.cast(pa.int32())
    elif name in ("timestamp", "timestamp_ntz"):
        arrow = arrow.cast(pa.int64())
    out = []
    for value in arrow.to_pylist():
        if value is None:
            out.append("n")
        elif isinstance(value, bytes | str):
            raw = value.encode("utf-8") if isinstance(value, str) else value
            out.append("v" + base64.b64encode(raw).decode("ascii"))
        elif isinstance(value, bool):
            out.append("vtrue" if value else "vfalse")
        elif isinstance(value, float):
            text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity") if math.isinf(value) else repr(value)
            out.append("v" + text)
        else:
            out.append(f"v{value}")
    return out


def constant_columns_option(
    snapshot: Snapshot, files: Sequence[AddFile], columns: Sequence[tuple[str, StructField]], names: HadoopNames = LOCAL
) -> str:
    """The ``dvengine.constantColumns`` option: ``columns`` (name in the read schema, the table's
    partition field) take each file's partition values from the log."""
    values = [snapshot.partition_values_logical(add) for add in files]
    encoded = [_encoded([v.get(field.name) for v in values], field) for _, field in columns]
    lines = ["\t".join(name for name, _ in columns)]
    for i, add in enumerate(files):
        uri = names.uri(resolve_data_path(snapshot.table_root, add.path))
        lines.append("\t".join([uri, *(column[i] for column in encoded)]))
    return "\n".join(lines)


__all__ = [
    "CONF_DV_READER",
    "DROP_DELETED_OPTION",
    "IS_DELETED_COL",
    "JAR_NAME",
    "JVM_FORMAT",
    "ROW_TRACKING_FORMAT",
    "_LOADABLE",
    "constant_columns_option",
    "copied_share",
    "drops_deleted_rows",
    "dvs_option",
    "jar_path",
    "jvm_reader_loadable",
    "row_tracking_options",
    "use_jvm_reader",
]
