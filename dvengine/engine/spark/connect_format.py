"""``format("delta")`` reads and writes for Spark Connect sessions.

A Connect client builds its reads and writes as protobuf plans that the server resolves; the
server knows no ``delta`` source (no Delta jar), so ``spark.read.format("delta").load(p)`` fails
there. As for classic sessions (:mod:`dvengine.engine.spark.delta_format`), PySpark's Connect
``DataFrameReader.load`` and ``DataFrameWriter.save`` are wrapped once per process and, for the
format ``delta`` on a registered session, served by dvengine: the read returns the same
DV-applying plan as ``DeltaTable.toDF()`` (built from DataFrame operations only), the write goes
through ``dvengine.write``. The builders' state is read from the client objects, where Connect
keeps it (``_format``/``_options`` of the reader, the ``WriteOperation`` of the writer). Other
formats and unregistered sessions go to PySpark's own methods untouched.

Importing Connect's modules needs grpc, so the hooks are installed only when a Connect session
is registered or a Connect builder is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dvengine.commands.source_options import parse_read_options, parse_write_options
from dvengine.engine.spark.delta_format import (
    FORMAT_NAME,
    apply_load_arguments,
    apply_save_arguments,
    is_registered,
    one_table_path,
    read_delta,
    save_delta,
    wrap_load_and_save,
)
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError

_ORIGINALS: dict[str, Callable[..., Any]] = {}


def _load(self: Any, path: Any = None, format: str | None = None, schema: Any = None, **options: Any) -> Any:
    apply_load_arguments(self, format, schema, options)
    spark = self._client
    if str(self._format or "").lower() == FORMAT_NAME and is_registered(spark):
        path = one_table_path(path)
        if self._schema:
            raise InvalidArgumentError("format('delta') reads take the table's schema; remove .schema(...) from the read")
        return read_delta(spark, parse_read_options(dict(self._options), path))
    return _ORIGINALS["load"](self, path)


def _save(
    self: Any, path: str | None = None, format: str | None = None, mode: str | None = None,
    partitionBy: Any = None, **options: Any,
) -> None:
    apply_save_arguments(self, format, mode, partitionBy, options)
    write = self._write
    spark = self._spark
    if str(write.source or "").lower() == FORMAT_NAME and is_registered(spark):
        if write.bucket_cols:
            raise UnsupportedFeatureError("Delta tables cannot be bucketed: remove bucketBy(...) from the write")
        if write.clustering_cols:
            raise UnsupportedFeatureError("clusterBy (liquid clustering) is not supported by dvengine's format('delta')")
        from pyspark.sql.connect.dataframe import DataFrame

        options_now = {k: str(v) for k, v in write.options.items() if v is not None}
        request = parse_write_options(
            options_now, path, write.mode or "error", list(write.partitioning_cols) or None
        )
        save_delta(DataFrame(self._df, spark), request)
        return
    _ORIGINALS["save"](self, path)


def install_connect_hooks() -> None:
    """Wrap Connect's reader/writer once per process (idempotent)."""
    from pyspark.sql.connect.readwriter import DataFrameReader, DataFrameWriter

    wrap_load_and_save(_ORIGINALS, DataFrameReader, DataFrameWriter, _load, _save)


__all__ = ["install_connect_hooks"]
