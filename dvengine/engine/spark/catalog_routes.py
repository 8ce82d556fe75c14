"""``df.write.saveAsTable(name, format="delta")`` and ``spark.table(name)`` / ``spark.read.table(name)``
on dvengine's catalog, for PySpark callers of a registered session.

Spark serves both in the JVM: ``saveAsTable`` looks up a data source named ``delta``
(``DataSource.lookupDataSource``; without Delta's jar: DATA_SOURCE_NOT_FOUND) and ``table``
resolves the name in Spark's session catalog, which does not know dvengine's tables (they are
kept in dvengine's catalog file in the warehouse, ``dvengine.storage.catalog``, as the builders'
``tableName`` and ``dvengine.sql``'s CREATE TABLE register them). Like ``format("delta")``
load/save (:mod:`dvengine.engine.spark.delta_format`), the PySpark methods are wrapped once per
process and act only on registered sessions:
- ``saveAsTable`` with format delta writes through dvengine to the name's registered location,
  or, for a new name, to the warehouse's default location and registers it; the save mode,
  ``partitionBy`` and options (``mergeSchema``, ``overwriteSchema``, ``replaceWhere``, ...) are
  those of ``format("delta").save(path)``, so ``error`` on an existing table raises as Delta does.
- ``table(name)`` reads a name registered in dvengine's catalog with the DV-applying plan of
  ``DeltaTable.forName(spark, name).toDF()``; any other name goes to Spark unchanged.
SQL text run by Spark itself (``spark.sql("SELECT * FROM name")``, ``CREATE TABLE ... USING
delta``) still cannot see these tables: use ``dvengine.sql``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, DataFrameWriter, SparkSession

from dvengine.commands.options import session_conf
from dvengine.commands.source_options import ReadRequest
from dvengine.engine.spark.delta_format import _is_delta, is_registered, read_delta, save_delta, write_request
from dvengine.errors import InvalidArgumentError
from dvengine.storage import catalog, normalize_table_path

_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _warehouse(spark: SparkSession) -> str | None:
    value = session_conf(spark)(catalog.WAREHOUSE_OVERRIDE_CONF) or spark.conf.get(catalog.WAREHOUSE_CONF, None)
    return None if value is None else str(value)


def save_as_table(df: DataFrame, jwrite: Any, name: str) -> None:
    """Write ``df`` as Delta table ``name`` through dvengine (see the module docstring)."""
    spark = df.sparkSession
    warehouse = _warehouse(spark)
    registered = catalog.lookup_table(name, warehouse)
    root = normalize_table_path(registered if registered is not None else catalog.default_location(name, warehouse))
    save_delta(df, write_request(spark, jwrite, root))
    if registered is None:
        catalog.register_table(name, root, warehouse)


def _save_as_table(
    self: DataFrameWriter, name: str, format: str | None = None, mode: str | None = None,
    partitionBy: Any = None, **options: Any,
) -> None:
    if format is not None:
        self.format(format)
    if _is_delta(self._jwrite) and is_registered(self._spark):
        self.mode(mode).options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        save_as_table(self._df, self._jwrite, name)
        return
    _ORIGINALS["saveAsTable"](self, name, None, mode, partitionBy, **options)


def _registered_location(spark: SparkSession, name: Any) -> str | None:
    if not isinstance(name, str) or not is_registered(spark):
        return None
    try:
        return catalog.lookup_table(name, _warehouse(spark))
    except InvalidArgumentError:  # not a one- or two-part name dvengine's catalog can hold: Spark decides
        return None


def _session_table(self: SparkSession, tableName: str) -> DataFrame:
    location = _registered_location(self, tableName)
    if location is not None:
        return read_delta(self, ReadRequest(location, None, None, {}))
    result: DataFrame = _ORIGINALS["table"](self, tableName)
    return result


def _reader_table(self: DataFrameReader, tableName: str) -> DataFrame:
    location = _registered_location(self._spark, tableName)
    if location is not None:
        return read_delta(self._spark, ReadRequest(location, None, None, {}))
    result: DataFrame = _ORIGINALS["read.table"](self, tableName)
    return result


def install_catalog_hooks() -> None:
    """Wrap ``DataFrameWriter.saveAsTable``, ``SparkSession.table`` and ``DataFrameReader.table``
    once per process (idempotent); unregistered sessions and other names are untouched."""
    if "saveAsTable" not in _ORIGINALS:
        _ORIGINALS["saveAsTable"] = DataFrameWriter.saveAsTable
        DataFrameWriter.saveAsTable = _save_as_table  # type: ignore[method-assign]
    if "table" not in _ORIGINALS:
        _ORIGINALS["table"] = SparkSession.table
        SparkSession.table = _session_table  # type: ignore[method-assign]
    if "read.table" not in _ORIGINALS:
        _ORIGINALS["read.table"] = DataFrameReader.table
        DataFrameReader.table = _reader_table  # type: ignore[method-assign]
