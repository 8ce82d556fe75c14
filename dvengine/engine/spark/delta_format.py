"""``spark.read.format("delta")`` and ``df.write.format("delta")`` on dvengine, per SparkSession.

How Spark resolves a format name: ``DataSource.lookupDataSource`` looks for a JVM
``DataSourceRegister`` with that short name, then a class of that name, then a Python data
source registered with ``spark.dataSource.register``. A Python data source *can* take the name
"delta" when no Delta jar is on the classpath, and reads work (measured on pyspark 4.3), but it
falls short in two ways that matter here: ``partitionBy`` never reaches a Python writer (Spark
refuses it: "The provided partitioning ... do not match the existing table's"), and only
``append`` / ``overwrite`` are accepted (``error`` and ``ignore`` raise
UNSUPPORTED_DATA_SOURCE_SAVE_MODE). Its reads also stream every row through Python workers as
Arrow batches, while :func:`read_snapshot_df` builds a plain JVM plan (Parquet scan plus an
anti-join on deleted row indexes).

So the format is served one level up, in PySpark's own ``DataFrameReader.load`` and
``DataFrameWriter.save``: both are wrapped once (process-wide) and, when the format set on the
JVM reader/writer is ``delta`` *and* the session was registered (conf key
:data:`CONF_ENABLED`), the call goes to dvengine; otherwise to PySpark's original method, so
other formats and unregistered sessions behave exactly as before. Everything the user set
(format, options, mode, partitionBy, bucketing) is read back from the JVM builder, where it
lives (Spark 4 exposes those fields as accessors), so ``mode(...)`` before ``format(...)`` and
the keyword forms of ``load``/``save`` all work. ``saveAsTable`` and ``spark.table`` are served
on dvengine's catalog by :mod:`dvengine.engine.spark.catalog_routes`. Not covered: Scala/Java
and SQL callers, Spark Connect clients, streaming (``readStream``/``writeStream``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pyspark.sql import DataFrame, DataFrameReader, DataFrameWriter, SparkSession

from dvengine.changes.options import read_change_feed_options
from dvengine.commands.options import session_conf
from dvengine.commands.source_options import ReadRequest, WriteRequest, parse_read_options, parse_write_options
from dvengine.engine.local.auto_compaction import after_commit
from dvengine.engine.spark.changes import changes_frame
from dvengine.engine.spark.reader import read_snapshot_df
from dvengine.engine.spark.write_api import write as write_table
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.log import load_snapshot, table_exists
from dvengine.storage import normalize_table_path

CONF_ENABLED = "dvengine.deltaFormat.enabled"
FORMAT_NAME = "delta"

_ORIGINALS: dict[str, Callable[..., Any]] = {}


# --- reading the builder's state back from the JVM -----------------------------------------------


def _scala_to_python(spark: SparkSession, value: Any) -> Any:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return jvm.scala.jdk.javaapi.CollectionConverters.asJava(value)


def _options(spark: SparkSession, builder: Any) -> dict[str, str]:
    """The options set on a JVM DataFrameReader/Writer, keys as the user spelled them."""
    java_map = _scala_to_python(spark, builder.extraOptions().originalMap())
    return {str(k): str(v) for k, v in dict(java_map).items()}


def _defined(option: Any) -> bool:
    return bool(option.isDefined())


def _is_delta(builder: Any) -> bool:
    return str(builder.source()).lower() == FORMAT_NAME


def is_registered(spark: SparkSession) -> bool:
    return str(session_conf(spark)(CONF_ENABLED) or "false").lower() == "true"


# --- reads ------------------------------------------------------------------------------------------


def read_request(spark: SparkSession, jreader: Any, path: str | None) -> ReadRequest:
    if _defined(jreader.userSpecifiedSchema()):
        raise InvalidArgumentError("format('delta') reads take the table's schema; remove .schema(...) from the read")
    return parse_read_options(_options(spark, jreader), path)


def session_timestamp(spark: SparkSession, text: str) -> str | dt.datetime:
    """A ``timestampAsOf`` string as Delta reads it: without an offset, in the session time zone
    (``spark.sql.session.timeZone``), not in UTC. Text that is not ISO-8601 is returned as is, for
    the log's timestamp parser to accept or reject with a typed error."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return text
    if parsed.tzinfo is not None:
        return parsed
    zone = str(spark.conf.get("spark.sql.session.timeZone", "UTC"))
    try:
        return parsed.replace(tzinfo=ZoneInfo(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgumentError(f"spark.sql.session.timeZone {zone!r} is not a time zone name Python knows") from None


def read_delta(spark: SparkSession, request: ReadRequest) -> DataFrame:
    """The table (at a version / timestamp) as the same DV-applying plan as ``DeltaTable.toDF()``,
    or its change data feed when the options ask for it (``readChangeFeed``)."""
    feed = read_change_feed_options(normalize_table_path(request.path), request.options)
    if feed is not None:
        return changes_frame(spark, feed)
    timestamp = None if request.timestamp is None else session_timestamp(spark, request.timestamp)
    snapshot = load_snapshot(normalize_table_path(request.path), version=request.version, timestamp=timestamp)
    return read_snapshot_df(spark, snapshot)


def apply_load_arguments(reader: Any, format: str | None, schema: Any, options: dict[str, Any]) -> None:
    """What PySpark's ``load(path, format, schema, **options)`` does to the reader before it
    loads, done here because the hook decides on the format only after these are applied
    (classic and Connect readers alike)."""
    if format is not None:
        reader.format(format)
    if schema is not None:
        reader.schema(schema)
    if options:
        reader.options(**options)


def apply_save_arguments(writer: Any, format: str | None, mode: str | None, partition_by: Any, options: dict[str, Any]) -> None:
    """What PySpark's ``save(path, format, mode, partitionBy, **options)`` does to the writer
    first, for the same reason as :func:`apply_load_arguments`."""
    writer.mode(mode).options(**options)
    if partition_by is not None:
        writer.partitionBy(partition_by)
    if format is not None:
        writer.format(format)


def one_table_path(path: Any) -> str | None:
    """A Delta read names one table: PySpark's ``load`` also takes a list of paths, dvengine does not."""
    if path is not None and not isinstance(path, str):
        raise InvalidArgumentError(f"format('delta').load() takes one table path, got {path!r}")
    return path


def _load(
    self: DataFrameReader, path: Any = None, format: str | None = None, schema: Any = None, **options: Any
) -> DataFrame:
    apply_load_arguments(self, format, schema, options)
    spark = self._spark
    if _is_delta(self._jreader) and is_registered(spark):
        return read_delta(spark, read_request(spark, self._jreader, one_table_path(path)))
    result: DataFrame = _ORIGINALS["load"](self, path)
    return result


# --- writes -----------------------------------------------------------------------------------------


def write_request(spark: SparkSession, jwrite: Any, path: str | None) -> WriteRequest:
    if _defined(jwrite.bucketColumnNames()):
        raise UnsupportedFeatureError("Delta tables cannot be bucketed: remove bucketBy(...) from the write")
    if _defined(jwrite.clusteringColumns()):
        raise UnsupportedFeatureError("clusterBy (liquid clustering) is not supported by dvengine's format('delta')")
    parts_option = jwrite.partitioningColumns()
    partition_by = [str(c) for c in _scala_to_python(spark, parts_option.get())] if _defined(parts_option) else None
    return parse_write_options(_options(spark, jwrite), path, str(jwrite.curmode().name()), partition_by)


def save_delta(df: DataFrame, request: WriteRequest) -> int | None:
    """Write through dvengine's write path; the committed version, or None when ``ignore`` skipped it.

    Auto compaction runs after the write as after ``dvengine.write`` (Delta's post-commit hook
    follows every write, not only DML), with the session's ``autoCompact`` confs."""
    root = normalize_table_path(request.path)
    mode = request.mode
    if mode == "ignore":
        if table_exists(root):
            return None
        mode = "error"
    session = df.sparkSession
    version = write_table(
        df, root, mode=mode, partitionBy=list(request.partition_by) if request.partition_by is not None else None,
        spark=session, mergeSchema=request.merge_schema, overwriteSchema=request.overwrite_schema,
        replaceWhere=request.replace_where, txnAppId=request.txn_app_id, txnVersion=request.txn_version,
        configuration=request.configuration, partitionOverwriteMode=request.partition_overwrite_mode,
        userMetadata=request.user_metadata, dataChange=request.data_change,
    )
    after_commit(session_conf(session), root, version)
    return version


def _save(
    self: DataFrameWriter,
    path: str | None = None,
    format: str | None = None,
    mode: str | None = None,
    partitionBy: Any = None,
    **options: Any,
) -> None:
    apply_save_arguments(self, format, mode, partitionBy, options)
    spark = self._spark
    if _is_delta(self._jwrite) and is_registered(spark):
        save_delta(self._df, write_request(spark, self._jwrite, path))
        return
    _ORIGINALS["save"](self, path)


# --- registration -----------------------------------------------------------------------------------


def install_hooks() -> None:
    """Wrap PySpark's load/save once per process (idempotent); unregistered sessions are untouched.
    (``session.register`` / ``configure_spark_with_dvengine`` also install
    :mod:`dvengine.engine.spark.catalog_routes`, which builds on this module.)"""
    wrap_load_and_save(_ORIGINALS, DataFrameReader, DataFrameWriter, _load, _save)


def wrap_load_and_save(
    originals: dict[str, Callable[..., Any]], reader: type, writer: type,
    load: Callable[..., Any], save: Callable[..., Any],
) -> None:
    """Replace ``reader.load`` / ``writer.save`` once, keeping the originals for what is not Delta
    (classic PySpark's and Spark Connect's reader/writer classes both go through here)."""
    if "load" not in originals:
        originals["load"] = reader.load  # type: ignore[attr-defined]
        reader.load = load  # type: ignore[attr-defined]
    if "save" not in originals:
        originals["save"] = writer.save  # type: ignore[attr-defined]
        writer.save = save  # type: ignore[attr-defined]


def register(spark: SparkSession) -> None:
    """Serve ``format("delta")`` reads and writes of this session with dvengine."""
    install_hooks()
    spark.conf.set(CONF_ENABLED, "true")


__all__ = ["CONF_ENABLED", "install_hooks", "is_registered", "read_delta", "register", "save_delta", "session_timestamp"]
