"""to_spark_sql round-trips through Spark's own parser and agrees with DuckDB (one small job)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot

from dvengine.expressions import parse_predicate, to_spark_sql
from dvengine.protocol.schema import PrimitiveType, StructField, StructType

SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long")),
        StructField("name", PrimitiveType("string")),
        StructField("d", PrimitiveType("date")),
        StructField("x", PrimitiveType("double")),
    )
)
PREDICATES = [
    "id < 3 AND name IN ('a', 'b')",
    "NOT (id = 1 OR name <> 'c')",
    "name LIKE 'b%' OR d >= DATE '2024-01-03'",
    "id NOT IN (1, NULL)",
    "id BETWEEN 2 AND 4 AND x IS NOT NULL",
    "x * 2 > 3 OR name IS NULL",
    "name = 'it''s' OR name = 'o\\'k'",
]


def test_to_spark_sql_matches_duckdb(spark: Any) -> None:
    rows = [
        (1, "a", dt.date(2024, 1, 1), 0.5),
        (2, "b", dt.date(2024, 1, 2), None),
        (3, None, dt.date(2024, 1, 3), 2.0),
        (4, "c", None, 1.5),
        (5, "its", dt.date(2024, 1, 5), 3.0),
        (6, "o'k", dt.date(2024, 1, 6), -1.0),
    ]
    df = spark.createDataFrame(rows, "c_id long, c_name string, c_d date, c_x double")
    rename = {"id": "c_id", "name": "c_name", "d": "c_d", "x": "c_x"}
    table = pa.Table.from_pylist([dict(zip(["id", "name", "d", "x"], r)) for r in rows])
    con = duckdb.connect()
    con.register("t", table)
    for text in PREDICATES:
        bound = parse_predicate(text, SCHEMA)
        got = sorted(r[0] for r in df.where(to_spark_sql(bound, rename)).select("c_id").collect())
        condition = sqlglot.transpile(bound.sql, read="spark", write="duckdb")[0]
        expected = sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {condition}").fetchall())
        assert got == expected, (text, to_spark_sql(bound, rename))
    con.close()
