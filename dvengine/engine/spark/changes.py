"""The change data feed as a Spark DataFrame.

The feed is computed on the driver by ``dvengine.changes`` (it is a log walk plus reads of the
changed rows only, usually small next to the table) and handed to Spark as Arrow.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession


def changes_frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    return spark.createDataFrame(rows)
