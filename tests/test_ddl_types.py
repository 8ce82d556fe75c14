"""Spark SQL type strings parsed without Spark agree with Spark's own parser.

Truth: pyspark's ``_parse_datatype_string`` (Spark's DDL parser in the JVM), converted through
the type's JSON; the builder relies on ``parse_ddl_type`` when no session exists.
"""

from __future__ import annotations

from typing import Any

import pytest

from dvengine.errors import SchemaError
from dvengine.protocol.ddl import from_spark_type, parse_ddl_type

TYPE_STRINGS = [
    "INT", "integer", "bigint", "LONG", "smallint", "short", "tinyint", "byte", "string", "varchar(10)",
    "char(3)", "boolean", "float", "real", "double", "date", "timestamp", "timestamp_ntz", "timestamp_ltz",
    "binary", "decimal", "decimal(10,2)", "dec(5)", "numeric(38,38)", "array<int>", "map<string,array<double>>",
    "struct<a:int,b:string>", "struct<a: int NOT NULL, `b c`: array<struct<d:bigint>>>",
    "struct<a: int COMMENT 'it\\'s', b: string NOT NULL COMMENT \"q\", c: map<int, struct<d: int COMMENT 'e'>>>",
]


@pytest.mark.parametrize("text", TYPE_STRINGS)
def test_matches_spark_parser(spark: Any, text: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    assert parse_ddl_type(text) == from_spark_type(_parse_datatype_string(text))


@pytest.mark.parametrize("text", ["1", "", "int>", "decimal(40,2)", "map<int>", "array<nope>", "struct<a int"])
def test_refused_with_the_text(text: str) -> None:
    with pytest.raises(SchemaError, match="cannot parse data type"):
        parse_ddl_type(text)
