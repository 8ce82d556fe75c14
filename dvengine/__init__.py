"""dvengine: row-level DELETE, UPDATE and MERGE on Delta Lake tables with deletion vectors, on Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvengine.table import DeltaTable
from dvengine.table_builder import DeltaTableBuilder, IdentityGenerator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__version__ = "0.1.0"


def write(
    data: Any,
    path: str,
    mode: str = "error",
    partitionBy: Sequence[str] | None = None,
    configuration: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
) -> int:
    """Create, append to or overwrite a table; returns the committed version.

    ``data``: a Spark DataFrame, or Arrow data (pyarrow Table / RecordBatch, pandas DataFrame).
    Arrow data is written in-process without a JVM unless a ``spark`` session is given.
    ``mode``: "error" (the default: fail if a table exists), "append" or "overwrite". New tables get
    deletion vectors enabled unless ``configuration`` sets ``delta.enableDeletionVectors`` to "false".
    """
    from dvengine.engine.local.write_api import as_arrow_table, write_arrow
    from dvengine.storage import normalize_table_path

    arrow = as_arrow_table(data)
    if arrow is not None and spark is None:
        parts = [partitionBy] if isinstance(partitionBy, str) else partitionBy
        return write_arrow(arrow, normalize_table_path(path), mode, parts, configuration)
    from dvengine.engine.spark.write_api import write as write_table

    return write_table(data, path, mode=mode, partitionBy=partitionBy, configuration=configuration, spark=spark)


__all__ = ["DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "__version__", "write"]
