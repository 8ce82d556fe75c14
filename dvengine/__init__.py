"""dvengine: row-level DELETE, UPDATE and MERGE on Delta Lake tables with deletion vectors, on Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dvengine.table import DeltaTable

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
    """Create or append to a table from a Spark DataFrame, pyarrow Table or pandas DataFrame; return the version.

    ``mode``: "error" (the default: fail if a table exists), "append" or "overwrite". New tables get
    deletion vectors enabled unless ``configuration`` sets ``delta.enableDeletionVectors`` to "false".
    Imported lazily so that ``import dvengine`` does not load pyspark for Arrow-only use.
    """
    from dvengine.engine.spark.write_api import write as write_table

    return write_table(data, path, mode=mode, partitionBy=partitionBy, configuration=configuration, spark=spark)


__all__ = ["DeltaTable", "__version__", "write"]
