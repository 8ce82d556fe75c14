"""Spark tasks on tables reached through Hadoop's FileSystem (object stores, any Hadoop scheme).

Python workers cannot open an ``s3a://`` / ``abfss://`` / ``hdfs://`` file the way the JVM does:
pyarrow's HadoopFileSystem needs libhdfs (not shipped with pyspark), and dvengine's own store
client (obstore) serves s3/gs/az but no other Hadoop scheme and none of the cluster's Hadoop
settings. So on such tables (spec_notes/storage.md, "Spark on object stores"):

- Python tasks read nothing from the table: rows arrive from Spark's scans, and the old DVs of the
  candidate files are loaded on the driver (its storage layer) and shipped with the task;
- the files a Python task encodes (DV files, new data files) travel back to the JVM as rows of
  bytes, and ``io.dvengine.spark.HadoopFileWriter`` (the SQL function ``dvengine_write_file``)
  writes each one through Hadoop's FileSystem under its final unique name;
- Spark's own Parquet writer runs with ``io.dvengine.spark.DirectCommitProtocol``: files go
  straight to their final names in the table or partition folder, no ``_temporary``, no rename.

Every file name a command writes this way carries the command's write id, so a failed command
lists the table and deletes what any task attempt left (a killed one leaves orphans for VACUUM).
"""

from __future__ import annotations

import contextlib
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from dvengine.engine.spark.jvm_reader import is_connect, jvm_reader_loadable
from dvengine.errors import SparkEnvironmentError
from dvengine.storage import FileInfo, storage_for

WRITER_FUNCTION = "dvengine_write_file"
WRITER_CLASS = "io.dvengine.spark.HadoopFileWriter"
COMMIT_PROTOCOL_CLASS = "io.dvengine.spark.DirectCommitProtocol"
COMMIT_PROTOCOL_CONF = "spark.sql.sources.commitProtocolClass"
WRITE_ID_OPTION = "dvengine.write.id"
# Result rows of Python tasks that carry a file for the JVM to write (file_uri = its Hadoop path).
KIND_BLOB = "blob"


def new_write_id() -> str:
    """A marker for every file name one command writes through Spark (``dvw`` + 16 hex digits)."""
    return f"dvw{uuid.uuid4().hex[:16]}"


def require_jvm_files(spark: SparkSession, table_root: str) -> None:
    """The jar's classes must load in this (classic) session: they do the Hadoop writes."""
    if is_connect(spark):
        raise SparkEnvironmentError(
            f"{table_root}: Spark jobs on tables reached through Hadoop's FileSystem need a classic SparkSession "
            "(Spark Connect is not supported for them yet); open the table without a session or pass engine='local'"
        )
    if not jvm_reader_loadable(spark, warn=False):
        raise SparkEnvironmentError(
            f"{table_root}: Spark jobs on this table write through dvengine's JVM classes ({WRITER_CLASS}), which "
            "this session cannot load; start it with spark.jars pointing at dvengine-spark.jar "
            "(dvengine.configure_spark_with_dvengine(builder))"
        )


def write_blobs(spark: SparkSession, results: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``results`` (rows of a Python task, a ``kind`` column and a ``payload`` column) with every
    ``blob`` row's payload written through Hadoop's FileSystem by the JVM, in the same task.

    The function is registered per call, so the session's Hadoop configuration at this moment is
    what the executors use. The written length replaces the payload of blob rows."""
    jvm: Any = spark._jvm
    jvm.io.dvengine.spark.HadoopFileWriter.register(spark._jsparkSession)
    kept = [c for c in columns if c not in ("payload", "n")]
    return results.selectExpr(
        *kept,
        f"CASE WHEN kind = '{KIND_BLOB}' THEN {WRITER_FUNCTION}(file_uri, payload) ELSE n END AS n",
        f"CASE WHEN kind = '{KIND_BLOB}' THEN NULL ELSE payload END AS payload",
    )


def take_committed(spark: SparkSession, write_id: str) -> list[str]:
    """The Hadoop paths the direct commit protocol committed for ``write_id`` (taken once)."""
    jvm: Any = spark._jvm
    return [str(p) for p in jvm.io.dvengine.spark.DirectCommitProtocol.takeCommitted(write_id)]


def delete_marked(table_root: str, write_id: str) -> None:
    """Delete every file under the table whose name carries ``write_id`` (a failed command's files)."""
    storage = storage_for(table_root)
    for info in storage.list_files(table_root):
        if write_id in info.path.rsplit("/", 1)[-1]:
            with contextlib.suppress(FileNotFoundError):
                storage.delete(info.path)


@dataclass(frozen=True, slots=True)
class Footer:
    metadata: pq.FileMetaData
    info: FileInfo


def read_footer(path: str) -> Footer:
    """A Parquet file's footer through the storage layer in two ranged reads (length, then footer),
    never the whole file: the driver needs only row counts and statistics."""
    storage = storage_for(path)
    info = storage.head(path)
    tail = storage.read_range(path, max(0, info.size - 8), 8)
    if len(tail) < 8 or tail[4:] != b"PAR1":
        raise pa.ArrowInvalid(f"{path} is not a Parquet file (no PAR1 trailer)")
    (length,) = struct.unpack("<i", tail[:4])
    footer = storage.read_range(path, info.size - 8 - length, length)
    # A file of magic + footer + trailer parses as the original's metadata (offsets are not followed).
    metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + footer + tail))
    return Footer(metadata, info)


__all__ = [
    "COMMIT_PROTOCOL_CLASS",
    "COMMIT_PROTOCOL_CONF",
    "KIND_BLOB",
    "WRITE_ID_OPTION",
    "Footer",
    "delete_marked",
    "new_write_id",
    "read_footer",
    "require_jvm_files",
    "take_committed",
    "write_blobs",
]
