"""Write a DataFrame as Parquet data files of a Delta table and describe them as ``add`` actions.

Approach (measured and argued in ``spec_notes/stats.md``): Spark's own Parquet writer, in the
JVM, writes into a private staging folder inside the table root (``_dvengine_staging_<uuid>``:
names starting with ``_`` are invisible to Delta readers), with ``partitionBy`` producing Spark's
Hive-style, Spark-escaped folders. The driver then reads each new file's footer (a few KB) for
stats and renames the file into place. No data crosses into Python, no second pass over the
data, and partition escaping is Spark's by construction. Spark's local file system never fsyncs,
so the driver fsyncs the new files (several at once) before it renames them: a commit never names
a file a power loss could leave empty. Files become part of the table only when a commit
references them; anything left behind by a failure is an orphan for VACUUM.

Tables Spark reaches through another Hadoop FileSystem (object stores, ``dvengine.spark.
localFileScheme``) get no staging folder and no rename: Spark's writer runs with dvengine's direct
commit protocol (files under their final names, each carrying the write's id) and the driver reads
the footers through the storage layer (``engine.spark.jvm_files``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.jvm_files import (
    COMMIT_PROTOCOL_CLASS,
    COMMIT_PROTOCOL_CONF,
    WRITE_ID_OPTION,
    delete_marked,
    new_write_id,
    read_footer,
    require_jvm_files,
    take_committed,
)
from dvengine.engine.spark.paths import HadoopNames, hadoop_names
from dvengine.errors import InvalidArgumentError
from dvengine.faults import DML_DATA_FILES_WRITTEN, fault_point
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import ROW_COMMIT_VERSION_COLUMN, ROW_ID_COLUMN, MaterializedColumns
from dvengine.protocol.schema import FIELD_ID_KEY, PHYSICAL_NAME_KEY, StructType
from dvengine.protocol.stats import FileStats
from dvengine.storage import join, resolve_data_path, storage_for
from dvengine.storage.durable import fsync_files, rename_into_place
from dvengine.writing.files import SPARK_STAGING_PREFIX, build_add_file, parse_partition_folders
from dvengine.writing.stats import stats_from_parquet_metadata

STAGING_PREFIX = SPARK_STAGING_PREFIX

# Session settings the files must be written with: INT64 microsecond timestamps (INT96 has no
# footer statistics and is deprecated), proleptic Gregorian dates as every Delta reader expects.
_WRITE_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
    "spark.sql.parquet.fieldId.write.enabled": "true",
}


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Temporarily set session options, restoring the caller's values afterwards."""
    previous: dict[str, str | None] = {}
    for key, value in settings.items():
        previous[key] = spark.conf.get(key, None)
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _physical_json(raw: Any, rename: bool = True) -> Any:
    """Spark type JSON for a Delta type JSON: physical names and Parquet field ids on struct fields.

    Nested fields are all made nullable: a cast may not narrow nullability, and an optional
    Parquet field reads the same for every reader.
    """
    if isinstance(raw, dict):
        kind = raw.get("type")
        if kind == "struct":
            fields = []
            for f in raw["fields"]:
                meta = f.get("metadata") or {}
                new_meta: dict[str, Any] = {}
                if rename and FIELD_ID_KEY in meta:
                    new_meta["parquet.field.id"] = int(meta[FIELD_ID_KEY])
                name = str(meta.get(PHYSICAL_NAME_KEY, f["name"])) if rename else str(f["name"])
                fields.append({"name": name, "type": _physical_json(f["type"], rename), "nullable": True, "metadata": new_meta})
            return {"type": "struct", "fields": fields}
        if kind == "array":
            return {**raw, "elementType": _physical_json(raw["elementType"], rename), "containsNull": True}
        if kind == "map":
            return {
                **raw,
                "keyType": _physical_json(raw["keyType"], rename),
                "valueType": _physical_json(raw["valueType"], rename),
                "valueContainsNull": True,
            }
    return raw


def _spark_type(raw: Any) -> T.DataType:
    wrapper = {"type": "struct", "fields": [{"name": "x", "type": raw, "nullable": True, "metadata": {}}]}
    return T.StructType.fromJson(wrapper).fields[0].dataType


def physical_columns(
    schema: StructType, df: DataFrame | None = None, materialized: MaterializedColumns | None = None
) -> list[Column]:
    """Columns (named like the table's) renamed to the physical schema, nested names included;
    with ``materialized``, then the internal stable id / commit version columns of ``df`` (those
    it has) under the materialized names."""
    out: list[Column] = []
    for logical in schema.fields:
        phys_type = _spark_type(_physical_json(logical.type.to_json()))
        same_type = _spark_type(_physical_json(logical.type.to_json(), rename=False))
        column = F.col(quote(logical.name))
        if phys_type != same_type:
            column = column.cast(phys_type)  # renames nested fields positionally
        metadata = {} if logical.field_id is None else {"parquet.field.id": logical.field_id}
        out.append(column.alias(logical.physical_name, metadata=metadata))
    if materialized is not None and df is not None:
        for internal, name in ((ROW_ID_COLUMN, materialized.row_id), (ROW_COMMIT_VERSION_COLUMN, materialized.row_commit_version)):
            if internal in df.columns:
                out.append(F.col(internal).cast("long").alias(name))
    return out


def _new_files(staging: str) -> list[str]:
    found: list[str] = []
    for directory, _, names in os.walk(staging):
        found.extend(os.path.join(directory, n) for n in names if n.endswith(".parquet") and not n.startswith((".", "_")))
    return sorted(found)


def write_parquet_files(
    df: DataFrame,
    table_root: str,
    schema: StructType,
    partition_columns: Sequence[str],
    num_indexed_cols: int = 32,
    materialized: MaterializedColumns | None = None,
) -> list[AddFile]:
    """Write ``df`` (columns named like ``schema``, any case) as data files; return their adds.

    ``partition_columns`` are logical names. The adds are not committed: the caller commits them
    (or deletes the files via :func:`delete_written_files` if it gives up). ``materialized``: the
    row tracking column names under which the internal stable id / commit version columns ``df``
    carries are stored (hidden columns outside the schema, as the local writer stores them).
    """
    spark = df.sparkSession
    for name in partition_columns:
        if schema.find(name) is None:
            raise InvalidArgumentError(f"partition column {name!r} is not in the schema {schema.field_names}")
    physical_parts = [schema.get(c).physical_name for c in partition_columns]
    part_types = [(schema.get(c).physical_name, schema.get(c).type) for c in partition_columns]
    time_zone = str(spark.conf.get("spark.sql.session.timeZone", "UTC"))

    names = hadoop_names(spark)
    if names.jvm_io(table_root):
        return _write_direct(df, table_root, schema, physical_parts, part_types, time_zone, num_indexed_cols, materialized)
    staging = os.path.join(table_root, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    adds: list[AddFile] = []
    try:
        writer = df.select(*physical_columns(schema, df, materialized)).write.mode("error").option("compression", "snappy")
        if physical_parts:
            writer = writer.partitionBy(*physical_parts)
        with session_conf(spark, _WRITE_CONF):
            writer.parquet(staging)
        staged: list[tuple[str, str, dict[str, str | None], FileStats]] = []
        for path in _new_files(staging):
            md = pq.read_metadata(path)
            if md.num_rows == 0:
                continue  # Spark writes an empty file for an empty input: it holds no rows, skip it
            relative = os.path.relpath(path, staging)
            rel_dir = os.path.dirname(relative)
            partition_values = parse_partition_folders(rel_dir, part_types, time_zone)
            staged.append((path, relative, partition_values, stats_from_parquet_metadata(md, schema, num_indexed_cols=num_indexed_cols)))
        # Spark's Hadoop local file system never fsyncs: the driver does, before the files get the
        # names a commit will use (spec_notes/crash-safety.md, "Power loss").
        fsync_files([path for path, _, _, _ in staged])
        for path, relative, partition_values, stats in staged:
            target = os.path.join(table_root, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            rename_into_place(path, target)
            st = os.stat(target)
            adds.append(build_add_file(relative, partition_values, st.st_size, int(st.st_mtime * 1000), stats))
    except BaseException:
        delete_written_files(table_root, adds)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    fault_point(DML_DATA_FILES_WRITTEN)
    return adds


def _write_direct(
    df: DataFrame,
    table_root: str,
    schema: StructType,
    physical_parts: Sequence[str],
    part_types: Sequence[tuple[str, Any]],
    time_zone: str,
    num_indexed_cols: int,
    materialized: MaterializedColumns | None = None,
) -> list[AddFile]:
    """Spark's writer straight into the table through Hadoop (no staging, no rename); the adds."""
    spark = df.sparkSession
    require_jvm_files(spark, table_root)
    names = hadoop_names(spark)
    write_id = new_write_id()
    root_raw = names.path(table_root)
    adds: list[AddFile] = []
    try:
        writer = df.select(*physical_columns(schema, df, materialized)).write.mode("append").option("compression", "snappy")
        writer = writer.option(WRITE_ID_OPTION, write_id)
        if physical_parts:
            writer = writer.partitionBy(*physical_parts)
        with session_conf(spark, {**_WRITE_CONF, COMMIT_PROTOCOL_CONF: COMMIT_PROTOCOL_CLASS}):
            writer.parquet(root_raw)
        for hadoop_path in sorted(take_committed(spark, write_id)):
            relative = _relative_to(hadoop_path, names, table_root)
            path = join(table_root, relative)
            footer = read_footer(path)
            if footer.metadata.num_rows == 0:
                storage_for(path).delete(path)  # an empty input's one empty file: no rows, not added
                continue
            rel_dir = relative.rsplit("/", 1)[0] if "/" in relative else ""
            partition_values = parse_partition_folders(rel_dir, list(part_types), time_zone)
            stats = stats_from_parquet_metadata(footer.metadata, schema, num_indexed_cols=num_indexed_cols)
            adds.append(build_add_file(relative, partition_values, footer.info.size, footer.info.modification_time_ms, stats))
    except BaseException:
        delete_marked(table_root, write_id)
        raise
    fault_point(DML_DATA_FILES_WRITTEN)
    return adds


def _relative_to(hadoop_path: str, names: HadoopNames, table_root: str) -> str:
    """The path below the table root of a file Hadoop names (``s3a://b/t/x=1/part-...``)."""
    root_raw = names.path(table_root).rstrip("/") + "/"
    _, raw_root = root_raw.split(":", 1)
    _, raw_file = hadoop_path.split(":", 1)
    raw_root = raw_root.lstrip("/")
    raw_file = raw_file.lstrip("/")
    if not raw_file.startswith(raw_root):
        raise InvalidArgumentError(f"Spark wrote {hadoop_path}, which is not under the table root {table_root}")
    return raw_file[len(raw_root):]


def delete_written_files(table_root: str, adds: Sequence[AddFile]) -> None:
    """Remove data files that were written but will never be committed (best effort cleanup)."""
    storage = storage_for(table_root)
    for add in adds:
        with contextlib.suppress(FileNotFoundError):
            storage.delete(resolve_data_path(table_root, add.path))
