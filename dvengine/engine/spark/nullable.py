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
from pyspark.sql import functions as F
from pyspark.sql.types import _parse_datatype_json_value

from dvengine.engine.spark.identifiers import quote


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


def with_nullable_fields(frame: DataFrame) -> DataFrame:
    """``frame`` with the fields *inside* its columns made nullable by a CAST (NOT NULL -> nullable,
    which Spark allows), rows untouched and the plan kept (no RDD round trip, unlike
    :func:`as_nullable`, whose re-encoding some plans refuse). For collecting to Arrow: pyspark's
    ``toArrow`` casts to the frame's schema, and a NOT NULL field under a NULL struct (legal in
    Spark) makes that cast raise ArrowInvalid. Top-level flags stay: a NOT NULL column holds no NULL."""
    columns = []
    changed = False
    for field in frame.schema.fields:
        column = F.col(quote(field.name))
        raw = field.dataType.jsonValue()
        relaxed = _relax(raw)
        if relaxed == raw:
            columns.append(column)
            continue
        changed = True
        columns.append(column.cast(_parse_datatype_json_value(relaxed)).alias(field.name))
    return frame.select(*columns) if changed else frame
