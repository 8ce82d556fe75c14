"""A DataFrame with every column nullable, its data untouched (Delta's ``schema.asNullable``).

Delta stores a table created from a query with all columns nullable
(``ImplicitMetadataOperation.updateMetadata``), while Spark marks literals and many expressions NOT
NULL. ``DataFrame.to(nullable_schema)`` keeps the input attributes' nullability, so the schema is
re-applied in the JVM (``createDataFrame(RDD[Row], StructType)``): rows stay in the JVM, no Python
serialisation.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame


def _relax(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (True if k in ("nullable", "containsNull", "valueContainsNull") else _relax(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_relax(v) for v in node]
    return node


def as_nullable(frame: DataFrame) -> DataFrame:
    raw = json.loads(frame.schema.json())
    relaxed = _relax(raw)
    if relaxed == raw:
        return frame
    spark = frame.sparkSession
    jvm = spark._jvm
    assert jvm is not None
    schema = jvm.org.apache.spark.sql.types.DataType.fromJson(json.dumps(relaxed))
    return DataFrame(spark._jsparkSession.createDataFrame(frame._jdf.rdd(), schema), spark)
