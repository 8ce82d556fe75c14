"""Write Arrow rows as data files of a Delta table, in-process, with the same stats Spark's path gets.

Files are written under a hidden name, fsynced and renamed into place once complete, so a crash
(a kill or a power loss) leaves either nothing visible or a whole file (an orphan for VACUUM until a
commit references it; spec_notes/crash-safety.md). The fsync runs here, in the writing thread (a
Spark task's, when tasks write), long before the commit turn. On an
object store a file is one PUT under its final name, sent in the background; the commit that
names it waits for it (storage/pending.py).
Column mapping is honoured: columns get their physical names and Parquet field ids. Timestamps
are INT64 microseconds (never INT96), as every Delta reader expects. Partitioned rows are split
per partition value into Hive-style folders; readers take the values from ``partitionValues``.
Stats come from the written footer by the same code as for Spark-written files.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.engine.local.parquet_encoding import dictionary_columns
from dvengine.faults import DML_DATA_FILES_WRITTEN, armed_stages, fault_point
from dvengine.protocol.actions import AddFile
from dvengine.protocol.row_tracking import ROW_COMMIT_VERSION_COLUMN, ROW_ID_COLUMN, MaterializedColumns
from dvengine.protocol.schema import (
    PARQUET_FIELD_ID_KEY,
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
    serialize_partition_value,
    to_arrow_type,
)
from dvengine.read import relabel_by_position
from dvengine.storage import is_object_uri, join, pending, resolve_data_path, storage_for
from dvengine.storage.durable import fsync_file, rename_into_place, write_failed
from dvengine.writing.files import HIVE_DEFAULT_PARTITION, build_add_file, escape_partition_value
from dvengine.writing.stats import stats_from_parquet_metadata

ROWS_PER_FILE = 4_000_000
# How every data file is encoded, on a folder or an object store: microsecond timestamps (no INT96),
# no Arrow schema blob (the log holds the schema), snappy as Delta writers default to; dictionaries
# per column, chosen per file (parquet_encoding.py).
PARQUET_WRITE_OPTIONS: dict[str, object] = {
    "compression": "snappy",
    "coerce_timestamps": "us",
    "allow_truncated_timestamps": False,
    "use_deprecated_int96_timestamps": False,
    "store_schema": False,
}


def _physical_field(f: StructField) -> pa.Field:
    metadata = None if f.field_id is None else {PARQUET_FIELD_ID_KEY: str(f.field_id).encode()}
    return pa.field(f.physical_name, _physical_type(f.type), True, metadata=metadata)


def _physical_type(data_type: DataType) -> pa.DataType:
    """Physical names and field ids on struct fields at every depth, inside arrays and maps too
    (Delta writes a field id for every field of a mapped table; id-mode readers match on them)."""
    if isinstance(data_type, StructType):
        return pa.struct([_physical_field(f) for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", _physical_type(data_type.element_type), data_type.contains_null))
    if isinstance(data_type, MapType):
        return pa.map_(_physical_type(data_type.key_type), _physical_type(data_type.value_type))
    return to_arrow_type(data_type, physical=True)


def physical_arrow_schema(schema: StructType, partition_columns: Sequence[str]) -> pa.Schema:
    """The Arrow schema of a data file: physical names, field ids, partition columns left out."""
    parts = {c.lower() for c in partition_columns}
    return pa.schema([_physical_field(f) for f in schema.fields if f.name.lower() not in parts])


def _to_physical(
    rows: pa.Table, schema: StructType, partition_columns: Sequence[str], materialized: MaterializedColumns | None = None
) -> pa.Table:
    """Data columns under physical names; with ``materialized``, the internal stable row id and
    commit version columns ``rows`` carries go under the table's materialized column names
    (hidden columns outside the schema, PROTOCOL.md "Row Tracking"), and other extra columns drop."""
    target = physical_arrow_schema(schema, partition_columns)
    parts = {c.lower() for c in partition_columns}
    data_fields = [f for f in schema.fields if f.name.lower() not in parts]
    columns = []
    for f, arrow_field in zip(data_fields, target):
        column = rows.column(f.name)
        columns.append(relabel_by_position(column, arrow_field.type))
    if materialized is not None:
        for internal, name in ((ROW_ID_COLUMN, materialized.row_id), (ROW_COMMIT_VERSION_COLUMN, materialized.row_commit_version)):
            if internal in rows.column_names:
                columns.append(rows.column(internal).cast(pa.int64()))
                target = target.append(pa.field(name, pa.int64()))
    return pa.Table.from_arrays(columns, schema=target)


def _partition_folder(schema: StructType, partition_columns: Sequence[str], values: dict[str, object]) -> tuple[str, dict[str, str | None]]:
    """Relative folder (``p=v/q=w``) and ``partitionValues`` (physical keys) of one partition."""
    folders = []
    log_values: dict[str, str | None] = {}
    for name in partition_columns:
        f = schema.get(name)
        text = serialize_partition_value(values[f.name], f.type)
        log_values[f.physical_name] = text
        shown = HIVE_DEFAULT_PARTITION if text is None or text == "" else escape_partition_value(text)
        folders.append(f"{escape_partition_value(f.physical_name)}={shown}")
    return "/".join(folders), log_values


def _split_by_partition(rows: pa.Table, schema: StructType, partition_columns: Sequence[str]) -> list[tuple[dict[str, object], pa.Table]]:
    if not partition_columns:
        return [({}, rows)]
    names = [schema.get(c).name for c in partition_columns]
    keys = rows.select(names).group_by(names, use_threads=False).aggregate([])
    out = []
    for key in keys.to_pylist():
        mask = None
        for name in names:
            value = key[name]
            cond = pc.is_null(rows.column(name)) if value is None else pc.equal(rows.column(name), pa.scalar(value, rows.schema.field(name).type))
            mask = cond if mask is None else pc.and_(mask, cond)
        out.append((key, rows.filter(mask)))
    return out


def write_data_files(
    rows: pa.Table,
    table_root: str,
    schema: StructType,
    partition_columns: Sequence[str],
    num_indexed_cols: int = 32,
    *,
    fault_point_after: bool = True,
    materialized: MaterializedColumns | None = None,
    sink: Callable[[str, bytes], None] | None = None,
    name_tag: str = "",
) -> list[AddFile]:
    """Write ``rows`` (logical column names of ``schema``) as new data files; return their adds.

    Nothing is committed here; the caller records the files so a failed command removes them.
    ``fault_point_after``: announce ``DML_DATA_FILES_WRITTEN`` (crash tests kill the process
    there); off in Spark tasks, where the driver announces it once the job's files are in place.
    ``materialized``: the row tracking column names to store carried stable ids under (see
    :func:`_to_physical`); None drops them (appends, change data files).
    ``sink``: encode each file in memory and hand (absolute path, bytes) to it instead of writing
    (Spark tasks on tables reached through Hadoop: the JVM writes them). ``name_tag`` goes into
    every file name, so a command can find what failed task attempts wrote.
    """
    adds: list[AddFile] = []
    try:
        for values, part in _split_by_partition(rows, schema, partition_columns):
            if part.num_rows == 0:
                continue
            folder, log_values = _partition_folder(schema, partition_columns, values)
            physical = _to_physical(part, schema, partition_columns, materialized)
            for start in range(0, physical.num_rows, ROWS_PER_FILE):
                chunk = physical.slice(start, ROWS_PER_FILE)
                adds.append(_write_one(chunk, table_root, folder, log_values, schema, num_indexed_cols, sink, name_tag))
    except BaseException:
        remove_data_files(table_root, adds)
        raise
    if fault_point_after:
        if DML_DATA_FILES_WRITTEN in armed_stages():  # the stage promises the files exist: let their PUTs land
            pending.wait_for(resolve_data_path(table_root, a.path) for a in adds)
        fault_point(DML_DATA_FILES_WRITTEN)
    return adds


def _write_parquet(chunk: pa.Table, path: str, collected: list[pq.FileMetaData]) -> None:
    """``pq.write_table`` to the hidden ``path``; an I/O failure (Arrow's ``OSError``: EIO, ENOSPC)
    is a :class:`StorageWriteError` naming the file, like a failed fsync or rename after it."""
    try:
        pq.write_table(chunk, path, metadata_collector=collected, use_dictionary=dictionary_columns(chunk), **PARQUET_WRITE_OPTIONS)
    except OSError as exc:
        raise write_failed("write", path, exc) from exc


def _write_one(
    chunk: pa.Table, table_root: str, folder: str, log_values: dict[str, str | None], schema: StructType, num_indexed_cols: int,
    sink: Callable[[str, bytes], None] | None = None, name_tag: str = "",
) -> AddFile:
    name = f"part-00000-{name_tag + '-' if name_tag else ''}{uuid.uuid4()}.c000.snappy.parquet"
    relative = f"{folder}/{name}" if folder else name
    if sink is not None or is_object_uri(table_root):
        return _write_one_to_store(chunk, table_root, relative, log_values, schema, num_indexed_cols, sink)
    target = os.path.join(table_root, *relative.split("/"))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    hidden = os.path.join(os.path.dirname(target), f".{name}.tmp")
    collected: list[pq.FileMetaData] = []
    try:
        _write_parquet(chunk, hidden, collected)
        fsync_file(hidden)  # before the name a commit will use exists: never a committed empty file
        rename_into_place(hidden, target)
    except BaseException:
        for path in (hidden, target):
            if os.path.exists(path):
                os.unlink(path)
        raise
    metadata = collected[0] if collected else pq.read_metadata(target)
    stats = stats_from_parquet_metadata(metadata, schema, num_indexed_cols=num_indexed_cols)
    st = os.stat(target)
    return build_add_file(relative, log_values, st.st_size, int(st.st_mtime * 1000), stats)


def _write_one_to_store(
    chunk: pa.Table, table_root: str, relative: str, log_values: dict[str, str | None], schema: StructType,
    num_indexed_cols: int, sink: Callable[[str, bytes], None] | None = None,
) -> AddFile:
    """Object stores: encode in memory, then one PUT under the final unique name (no rename on a
    store), started in the background: the stats, the add action and the rest of the command's
    commit are built while it is under way, and the commit waits for it before it is sent
    (storage/pending.py). With ``sink``, hand the bytes to it instead."""
    buffer = pa.BufferOutputStream()
    collected: list[pq.FileMetaData] = []
    pq.write_table(chunk, buffer, metadata_collector=collected, use_dictionary=dictionary_columns(chunk), **PARQUET_WRITE_OPTIONS)
    data = buffer.getvalue().to_pybytes()
    if sink is not None:
        sink(resolve_data_path(table_root, relative), data)
    else:
        storage_for(table_root).put_new_in_background(join(table_root, relative), data)
    stats = stats_from_parquet_metadata(collected[0], schema, num_indexed_cols=num_indexed_cols)
    return build_add_file(relative, log_values, len(data), int(time.time() * 1000), stats)


def remove_data_files(table_root: str, adds: Sequence[AddFile]) -> None:
    """Delete files written by a call that failed part-way (its own files only)."""
    storage = storage_for(table_root)
    for add in adds:
        path = resolve_data_path(table_root, add.path)
        with contextlib.suppress(FileNotFoundError):
            storage.delete(path)
