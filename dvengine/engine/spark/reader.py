"""Read a snapshot as a Spark DataFrame with deletion vectors applied inside Spark.

Rows are scanned with ``_metadata.file_path`` and ``_metadata.row_index`` selected into
ordinary columns, then the (file, row index) pairs that DVs delete are removed with a left
anti-join against a small DataFrame built on the driver from the bitmaps. That keeps every
row in the JVM (no per-row Python), and Spark broadcasts the deleted pairs when they are
small. Partition values are joined from the log, never parsed from folder names.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from dataclasses import replace
from functools import reduce
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType
from pyspark.sql.types import StructType as SparkStructType

from dvengine.dv import load_deletion_vector
from dvengine.engine.spark import dv_format
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.jvm_paths import load_paths
from dvengine.engine.spark.paths import hadoop_names
from dvengine.errors import LogCorruptedError, ProtocolError
from dvengine.expressions import BoundPredicate
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.nested_not_null import as_nullable
from dvengine.protocol.row_tracking import MaterializedColumns
from dvengine.protocol.schema import PrimitiveType, StructField, StructType, to_arrow_field, to_arrow_schema
from dvengine.read import plan_scan
from dvengine.read.row_ids import tracked_columns
from dvengine.storage import resolve_data_path, storage_for
from dvengine.writing.files import parse_partition_folders

FILE_PATH_COL = "__dv_file_path"
ROW_INDEX_COL = "__dv_row_index"
FILE_ID_COL = "__dv_file_id"
FILE_SIZE_COL = "__dv_file_size"
# Read-schema names of partition columns the row-tracking format fills per file.
CONSTANT_PREFIX = "__dvengine_partition_"
# Above this many deleted rows the (file id, row index) set (12 bytes a row) is left to Spark's
# planner, which shuffles instead of broadcasting when it exceeds autoBroadcastJoinThreshold.
BROADCAST_MAX_DELETED_ROWS = 2_000_000
# Up to this many deleted rows among a scan group's files, they are dropped by a filter with an
# IN list per file (Spark turns it into a hash-set lookup) instead of an anti-join.
FILTER_MAX_DELETED_ROWS = 1_000


def spark_schema(schema: StructType, physical: bool = False) -> SparkStructType:
    """Spark schema of a Delta schema, going through Arrow so both agree on every type."""
    converted: SparkStructType = from_arrow_schema(to_arrow_schema(schema, physical=physical))
    return converted


def deleted_rows_frame(
    spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile], key: str = FILE_ID_COL
) -> DataFrame | None:
    """(file key, row index) of every row the files' DVs delete, or None if there are none.

    The file key is the file's position in ``files`` (``FILE_ID_COL``, see :func:`file_ids_frame`)
    or its size in bytes (``FILE_SIZE_COL``, when sizes are unique): 12-16 bytes per deleted row
    instead of a repeated path string, so millions of deleted rows stay joinable.
    """
    keys: list[pa.Array] = []
    rows: list[pa.Array] = []
    for file_id, add in enumerate(files):
        if add.deletion_vector is None:
            continue
        bitmap = load_deletion_vector(snapshot.table_root, add.deletion_vector, num_records=add.num_records)
        indexes = np.asarray(bitmap.to_array(), dtype=np.int64)
        if key == FILE_SIZE_COL:
            keys.append(pa.array(np.full(len(indexes), add.size, dtype=np.int64)))
        else:
            keys.append(pa.array(np.full(len(indexes), file_id, dtype=np.int32)))
        rows.append(pa.array(indexes, type=pa.int64()))
    if not keys:
        return None
    return spark.createDataFrame(pa.table({key: pa.concat_arrays(keys), ROW_INDEX_COL: pa.concat_arrays(rows)}))


def file_ids_frame(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame:
    """One row per file: the URI Spark reports in ``_metadata.file_path`` and the file's id."""
    names = hadoop_names(spark)
    uris = [names.uri(resolve_data_path(snapshot.table_root, add.path)) for add in files]
    table = pa.table({FILE_PATH_COL: pa.array(uris, pa.string()), FILE_ID_COL: pa.array(range(len(uris)), pa.int32())})
    return spark.createDataFrame(table)


def partition_values_frame(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> DataFrame:
    """One row per file: its Spark file URI and typed partition values (logical names)."""
    part_fields = [snapshot.schema.get(c) for c in snapshot.partition_columns]
    arrow_fields = [pa.field(FILE_PATH_COL, pa.string())] + [to_arrow_field(f).with_nullable(True) for f in part_fields]
    columns: dict[str, list[object]] = {f.name: [] for f in arrow_fields}
    names = hadoop_names(spark)
    for add in files:
        columns[FILE_PATH_COL].append(names.uri(resolve_data_path(snapshot.table_root, add.path)))
        values = snapshot.partition_values_logical(add)
        for f in part_fields:
            columns[f.name].append(values.get(f.name))
    table = pa.table(columns, schema=pa.schema(arrow_fields))
    return spark.createDataFrame(table)


def _discoverable_partitions(snapshot: Snapshot, files: Sequence[AddFile]) -> bool:
    """Whether Spark's own partition discovery gives exactly the log's partition values.

    The protocol does not tie partition values to folder names, so this is checked file by
    file: every file must sit in Hive-style folders (``<key>=<value>`` per partition column, keys
    as ``partitionValues`` spells them) that parse to its ``partitionValues``, for column types
    whose folder text Spark parses the same way. Then Spark sees real partition columns and a
    filter on them prunes files (PartitionFilters) instead of joining values onto every row.
    """
    if not snapshot.partition_columns:
        return True
    keys = snapshot.partition_keys
    if any(data_type.name not in _DISCOVERABLE_TYPES for _, _, data_type in keys):
        return False
    part_types = [(key, data_type) for _, key, data_type in keys]
    for add in files:
        relative = unquote(add.path)
        if "://" in add.path or relative.startswith("/"):
            return False
        folder = relative.rsplit("/", 1)[0] if "/" in relative else ""
        try:
            parsed = parse_partition_folders(folder, part_types)
        except (ProtocolError, ValueError):
            return False
        if any(parsed.get(key) != add.partition_values.get(key) for _, key, _ in keys):
            return False
    return True


_DISCOVERABLE_TYPES = frozenset({"string", "long", "integer", "short", "byte", "date", "boolean"})


def _read_parquet(
    reader: DataFrameReader, snapshot: Snapshot, files: Sequence[AddFile], jvm: bool = False
) -> DataFrame:
    """``reader.parquet`` of the files (``reader.load`` for the JVM DV format); a file the log lists
    but the disk lacks is LogCorruptedError naming it (Spark checks existence when the DataFrame is created)."""
    local_paths = [resolve_data_path(snapshot.table_root, add.path) for add in files]
    names = hadoop_names(getattr(reader, "_spark", None))
    try:
        return load_paths(reader, [names.path(p) for p in local_paths], parquet=not jvm)
    except AnalysisException as exc:
        missing = [add.path for add, path in zip(files, local_paths) if not storage_for(path).exists(path)]
        if not missing:
            raise
        raise LogCorruptedError(
            f"data file {missing[0]} listed in the log of {snapshot.table_root} is missing"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
        ) from exc


def _deleted_rows_sql(snapshot: Snapshot, files: Sequence[AddFile]) -> str:
    """``(size = s1 AND row_index IN (...)) OR ...`` over the files' DVs: for a few deleted rows a
    filter inside the scan's stage costs less than building and broadcasting a join table."""
    terms = []
    for add in files:
        if add.deletion_vector is None:
            continue
        rows = load_deletion_vector(snapshot.table_root, add.deletion_vector, num_records=add.num_records)
        if len(rows):
            in_list = ", ".join(str(int(r)) for r in rows)
            terms.append(f"({quote(FILE_SIZE_COL)} = {int(add.size)} AND {quote(ROW_INDEX_COL)} IN ({in_list}))")
    return " OR ".join(terms) if terms else "false"


def _unique_sizes(files: Sequence[AddFile]) -> bool:
    sizes = [add.size for add in files]
    return len(set(sizes)) == len(sizes)


def _scan_group(
    spark: SparkSession,
    snapshot: Snapshot,
    files: Sequence[AddFile],
    wanted: Sequence[StructField],
    keep_row_ids: bool,
    jvm: bool = False,
    row_tracking: MaterializedColumns | None = None,
) -> DataFrame:
    """Live rows of files that share one way of reading: all without DVs, or all with DVs.

    Files without a DV are a plain Parquet scan. With ``jvm``, files with DVs are read through
    the JVM format (:mod:`dvengine.engine.spark.dv_format`), which marks deleted rows in the scan,
    and a filter drops them. Otherwise they also read ``_metadata.row_index`` and anti-join the
    deleted (file, row index) pairs; the file is identified by its size (a long, so the join
    compares two longs per row) when sizes are unique among these files, else by a small integer
    id joined on the path. With ``row_tracking`` (and ``jvm``) the files are read through the
    format's row-tracking subclass, which adds ``_metadata.row_id`` and friends to the scan.
    """
    root = snapshot.table_root
    part_lower = {c.lower() for c in snapshot.partition_columns}
    data_fields = [f for f in wanted if f.name.lower() not in part_lower]
    part_fields = [f for f in wanted if f.name.lower() in part_lower]
    with_dvs = any(add.deletion_vector is not None for add in files)
    # A table column of the marker's name (physical names are what the scan sees) keeps the Python plan.
    jvm = jvm and (with_dvs or row_tracking is not None) and not keep_row_ids and all(
        f.physical_name.lower() != dv_format.IS_DELETED_COL for f in snapshot.schema.fields
    )
    discover = bool(part_fields) and _discoverable_partitions(snapshot, files)
    # The row-tracking format fills partition values itself where folders do not spell them: a
    # join would hide _metadata from the plan above it (see metadata_row_tracking).
    constants = jvm and row_tracking is not None and bool(part_fields) and not discover
    by_size = with_dvs and not jvm and _unique_sizes(files)
    needs_path = keep_row_ids or (with_dvs and not jvm and not by_size) or (bool(part_fields) and not discover and not constants)

    keys_by_name = {logical: key for logical, key, _ in snapshot.partition_keys}
    read_fields: list[StructField] = list(data_fields)
    if discover:
        read_fields += [StructField(keys_by_name[f.name], f.type, True, {}) for f in part_fields]
    constant_names = {f.name: f"{CONSTANT_PREFIX}{i}" for i, f in enumerate(part_fields)} if constants else {}
    if constants:
        read_fields += [StructField(constant_names[f.name], f.type, True, {}) for f in part_fields]
    physical = StructType(tuple(data_fields))
    schema = spark_schema(physical, physical=True)
    for f in read_fields[len(data_fields):]:
        schema = schema.add(f.name, spark_schema(StructType((f,)))[0].dataType, True)
    # Drop mode: the format leaves deleted rows out itself; else it marks them and a filter drops them.
    drop = jvm and dv_format.drops_deleted_rows(schema, files)
    if jvm:
        names = hadoop_names(spark)
        reader = spark.read.format(dv_format.JVM_FORMAT if row_tracking is None else dv_format.ROW_TRACKING_FORMAT)
        reader = reader.option(dv_format.DVS_OPTION, dv_format.dvs_option(snapshot, files, names))
        if row_tracking is not None:
            reader = reader.options(**dv_format.row_tracking_options(snapshot, files, row_tracking, names))
        if constants:
            columns = [(constant_names[f.name], f) for f in part_fields]
            reader = reader.option(dv_format.CONSTANT_COLUMNS_OPTION, dv_format.constant_columns_option(snapshot, files, columns, names))
        if drop:
            reader = reader.option(dv_format.DROP_DELETED_OPTION, "true")
        else:
            schema = schema.add(dv_format.IS_DELETED_COL, "byte", True)
    else:
        reader = spark.read
    reader = reader.schema(schema)
    if discover:
        reader = reader.option("basePath", hadoop_names(spark).uri(root))
    df = _read_parquet(reader, snapshot, files, jvm)
    if jvm and not drop:
        df = df.where(f"{quote(dv_format.IS_DELETED_COL)} = 0")
    # Projections are SQL text in one selectExpr each: a Column built in Python costs several py4j
    # round-trips (F.col, cast, alias: ~80 for a 4-column table), selectExpr about one per column.
    metadata = []
    if needs_path:
        metadata.append(f"_metadata.file_path AS {quote(FILE_PATH_COL)}")
    if (with_dvs and not jvm) or keep_row_ids:
        metadata.append(f"_metadata.row_index AS {quote(ROW_INDEX_COL)}")
    if by_size:
        metadata.append(f"_metadata.file_size AS {quote(FILE_SIZE_COL)}")
    sources = {
        f.name: (keys_by_name[f.name] if discover else constant_names.get(f.name, f.name))
        if f.name.lower() in part_lower
        else f.physical_name
        for f in wanted
    }
    logical = [_logical_column_sql(f, sources[f.name]) for f in wanted]
    joins = (with_dvs and not jvm) or (bool(part_fields) and not discover and not constants)
    if not joins:  # one projection straight over the scan
        row_ids = [f"_metadata.file_path AS {quote(FILE_PATH_COL)}", f"_metadata.row_index AS {quote(ROW_INDEX_COL)}"]
        return df.selectExpr(*logical, *(row_ids if keep_row_ids else []))
    scanned = [quote(f.physical_name) for f in data_fields]
    if discover or constants:
        scanned += [quote(f.name) for f in read_fields[len(data_fields):]]
    df = df.selectExpr(*scanned, *metadata)
    if with_dvs and not jvm:
        total_deleted = sum(add.deleted_row_count for add in files)
        if by_size and total_deleted <= FILTER_MAX_DELETED_ROWS:
            df = df.where(f"NOT ({_deleted_rows_sql(snapshot, files)})").drop(FILE_SIZE_COL)
        elif by_size:
            deleted = deleted_rows_frame(spark, snapshot, files, key=FILE_SIZE_COL)
            assert deleted is not None
            right = F.broadcast(deleted) if total_deleted <= BROADCAST_MAX_DELETED_ROWS else deleted
            df = df.join(right, on=[FILE_SIZE_COL, ROW_INDEX_COL], how="left_anti").drop(FILE_SIZE_COL)
        else:
            deleted = deleted_rows_frame(spark, snapshot, files)
            assert deleted is not None
            df = df.join(F.broadcast(file_ids_frame(spark, snapshot, files)), on=FILE_PATH_COL, how="inner")
            right = F.broadcast(deleted) if total_deleted <= BROADCAST_MAX_DELETED_ROWS else deleted
            df = df.join(right, on=[FILE_ID_COL, ROW_INDEX_COL], how="left_anti").drop(FILE_ID_COL)
    if part_fields and not discover and not constants:
        df = df.join(F.broadcast(partition_values_frame(spark, snapshot, files)), on=FILE_PATH_COL, how="inner")
    return df.selectExpr(*logical, *([quote(FILE_PATH_COL), quote(ROW_INDEX_COL)] if keep_row_ids else []))


def _logical_column_sql(field: StructField, source: str) -> str:
    """``source AS name``, with a CAST only where the logical type differs from what the scan reads
    (nested field names under column mapping): the cast renames nested fields, values are unchanged."""
    logical_type = logical_spark_type(field)
    read_type = spark_schema(StructType((field,)), physical=True)[0].dataType
    column = quote(source)
    if logical_type != read_type:
        column = f"CAST({column} AS {spark_type_sql(logical_type)})"
    return f"{column} AS {quote(field.name)}"


def spark_type_sql(data_type: DataType) -> str:
    """Spark SQL text of a type, nested field names quoted (PySpark's ``simpleString`` leaves them bare)."""
    if isinstance(data_type, SparkStructType):
        fields = (
            f"{quote(f.name)}: {spark_type_sql(f.dataType)}{'' if f.nullable else ' NOT NULL'}" for f in data_type.fields
        )
        return f"STRUCT<{', '.join(fields)}>"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{spark_type_sql(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{spark_type_sql(data_type.keyType)}, {spark_type_sql(data_type.valueType)}>"
    return data_type.simpleString()


def scan_logical(
    spark: SparkSession,
    snapshot: Snapshot,
    files: Sequence[AddFile],
    columns: Collection[str] | None = None,
    keep_row_ids: bool = False,
    jvm: bool = False,
    hidden_columns: Sequence[str] = (),
    row_tracking: MaterializedColumns | None = None,
) -> DataFrame:
    """Live rows of ``files`` under logical column names, in schema order, DVs applied.

    ``columns`` limits the scan to those logical columns (DML verification reads only what
    the predicate needs); ``keep_row_ids`` keeps the file path and row index columns that
    address each row physically. On the Python plan files without a DV are read by a plain scan
    and pay nothing for the DVs of others (see :func:`_scan_group`). ``jvm`` reads every file
    through the JVM format in one scan when any has a DV, so the scan is split into tasks as a
    plain one would be (ignored with ``keep_row_ids``, which needs the Python plan's columns).
    ``hidden_columns``: physical BIGINT columns outside the schema, read under their own names
    after the table's (NULL in files without them): row tracking's materialized columns.
    ``row_tracking`` (with ``jvm``): read every file in one scan through the format that exposes
    ``_metadata.row_id`` (see :func:`metadata_row_tracking`).
    """
    logical = snapshot.schema
    wanted = [f for f in logical.fields if columns is None or f.name in columns]
    wanted += [StructField(name, PrimitiveType("long"), True, {}) for name in hidden_columns]
    if not files:
        empty = spark.createDataFrame([], spark_schema(StructType(tuple(wanted))))
        if keep_row_ids:
            empty = empty.withColumn(FILE_PATH_COL, F.lit(None).cast("string")).withColumn(
                ROW_INDEX_COL, F.lit(None).cast("long")
            )
        return empty
    clean = [add for add in files if add.deletion_vector is None]
    with_dv = [add for add in files if add.deletion_vector is not None]
    jvm = jvm and not keep_row_ids
    row_tracking = row_tracking if jvm else None
    if jvm and (with_dv or row_tracking is not None):
        # One scan of every file through the JVM format (files without a DV are listed as such):
        # a separate scan of the DV'd files would add tasks of its own, on two cores a third wave
        # (measured: a single 1-row DV cost 1.4x the plain scan that way).
        groups = [list(files)]
    else:
        groups = [clean, *size_unique_groups(with_dv)] if clean else size_unique_groups(with_dv)
    frames = [_scan_group(spark, snapshot, group, wanted, keep_row_ids, jvm, row_tracking) for group in groups]
    return reduce(lambda a, b: a.unionByName(b), frames)


def size_unique_groups(files: Sequence[AddFile], max_groups: int = 4) -> list[list[AddFile]]:
    """Split files into as few groups as possible in which no two files have the same size.

    Within such a group ``_metadata.file_size`` identifies a file, so deleted rows are matched on
    two longs (size, row index) instead of a path string per row. Sizes repeat rarely; files
    beyond ``max_groups`` collisions share a last group, which then falls back to path ids.
    """
    groups: list[list[AddFile]] = []
    sizes: list[set[int]] = []
    for add in files:
        for group, seen in zip(groups, sizes):
            if add.size not in seen:
                group.append(add)
                seen.add(add.size)
                break
        else:
            if len(groups) < max_groups:
                groups.append([add])
                sizes.append({add.size})
            else:
                groups[-1].append(add)
    return groups


def scan_snapshot(
    spark: SparkSession,
    snapshot: Snapshot,
    predicate: BoundPredicate | None = None,
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """Rows of a snapshot matching ``predicate``, with partition pruning and stats skipping from
    the log applied before Spark sees a file; ``columns`` (logical names) limits the output."""
    plan = plan_scan(snapshot, predicate, columns)
    tracking = metadata_row_tracking(spark, snapshot, plan.files)
    jvm = tracking is not None or _jvm_for(spark, plan.files)
    df = scan_logical(spark, snapshot, plan.files, columns=plan.needed, jvm=jvm, row_tracking=tracking)
    if predicate is not None:
        df = df.where(F.expr(predicate.sql))
    if plan.output is not None:
        df = df.select(*[F.col(quote(name)) for name in plan.output])
    return df


def read_snapshot_df(spark: SparkSession, snapshot: Snapshot, keep_row_ids: bool = False) -> DataFrame:
    """All live rows of a snapshot, logical column names, schema order; on a row-tracking table
    also ``_metadata.row_id`` and friends where the JVM reader serves the read (see
    :func:`metadata_row_tracking`)."""
    tracking = None if keep_row_ids else metadata_row_tracking(spark, snapshot, snapshot.files)
    jvm = not keep_row_ids and (tracking is not None or _jvm_for(spark, snapshot.files))
    return scan_logical(spark, snapshot, snapshot.files, keep_row_ids=keep_row_ids, jvm=jvm, row_tracking=tracking)


class RowTrackingMetadataWarning(UserWarning):
    """A read of a row-tracking table whose DataFrame cannot expose ``_metadata.row_id``."""


_ROW_TRACKING_WARNED: list[str] = []


def metadata_row_tracking(spark: SparkSession, snapshot: Snapshot, files: Sequence[AddFile]) -> MaterializedColumns | None:
    """The materialized columns when a user read of ``files`` goes through the JVM format's
    row-tracking subclass, so its DataFrame has Delta's ``_metadata.row_id``,
    ``_metadata.row_commit_version``, ``_metadata.base_row_id`` and
    ``_metadata.default_row_commit_version``; None for tables without row tracking enabled (there
    ``_metadata.row_id`` is Spark's "no such struct field", as with Delta).

    ``_metadata`` is a hidden column of one file scan: it survives projections and filters over
    it but not joins or unions, so the read must be a single scan through the JVM format, which
    also fills partition values where folders do not spell them (Delta's random prefixes under
    column mapping) instead of the usual join. Where it cannot be (the JVM reader is unavailable
    or ``dvengine.read.dvReader=python``, or a partition column of a type the format cannot fill
    in files outside Hive-style folders) the read is the usual one without those fields, and a
    warning (once per process) names ``read_row_tracking_df``, which gives the same values as
    plain columns on every plan."""
    columns = tracked_columns(snapshot)
    if columns is None or not files:
        return None
    part_types = {data_type.name for _, _, data_type in snapshot.partition_keys}
    if not part_types <= dv_format.CONSTANT_TYPES and not _discoverable_partitions(snapshot, files):
        reason = f"its partition column types {sorted(part_types)} are joined to the scan from the log"
    elif not dv_format.use_jvm_reader(spark):
        reason = "the JVM reader is not used in this session (jar missing or dvengine.read.dvReader=python)"
    else:
        return columns
    if not _ROW_TRACKING_WARNED:
        _ROW_TRACKING_WARNED.append(reason)
        warnings.warn(
            f"dvengine: this read of row-tracking table {snapshot.table_root} has no _metadata.row_id / "
            f"_metadata.row_commit_version ({reason}); dvengine.engine.spark.row_ids.read_row_tracking_df"
            "(spark, snapshot) gives them as the columns row_id / row_commit_version",
            RowTrackingMetadataWarning,
            stacklevel=3,
        )
    return None


def _jvm_for(spark: SparkSession, files: Sequence[AddFile]) -> bool:
    """Whether user reads (``toDF``/``scan``) apply these files' DVs with the JVM format; the
    conf key is consulted only when some file has a DV. DML's internal reads keep the Python
    plan, whose DV errors are typed on the driver before any job runs."""
    return any(add.deletion_vector is not None for add in files) and dv_format.use_jvm_reader(spark)


def logical_spark_type(field: StructField) -> DataType:
    """Spark type of a field under its logical (not physical) nested names."""
    return spark_schema(StructType((field,)))[0].dataType


def castable_spark_type(field: StructField) -> DataType:
    """:func:`logical_spark_type` with every nullability flag inside it loosened (Delta's
    ``asNullable``): what a value is CAST to before it is stored. Spark's analyzer refuses to cast a
    nullable nested field into a NOT NULL one whatever the rows hold, so casting to the column's own
    type would refuse a frame built in Python, or ``SET s = NULL``, with a raw AnalysisException;
    the NOT NULL fields are checked on the values instead, as Delta's invariant checker does."""
    return logical_spark_type(replace(field, type=as_nullable(field.type), nullable=True))
