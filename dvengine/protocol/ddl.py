"""Column types given the way delta-spark's table builder accepts them, turned into Delta types.

``DeltaTableBuilder.addColumn(name, dataType)`` takes a Spark SQL type string (``"INT"``,
``"decimal(10,2)"``, ``"array<struct<a:int,b:string>>"``) or a pyspark ``DataType``. Without a
SparkSession there is no Spark parser to ask, so the type grammar is parsed here; pyspark types
are converted through their ``jsonValue()``, which is exactly the JSON Delta stores in
``schemaString`` (so no pyspark import is needed). Unknown type names raise
:class:`~dvengine.errors.SchemaError` naming the text, as Spark's ParseException would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dvengine.errors import SchemaError
from dvengine.protocol.schema import (
    ArrayType,
    DataType,
    DecimalType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    parse_data_type,
)

# Spark SQL type keywords (case-insensitive) -> Delta primitive names.
_ALIASES = {
    "string": "string",
    "varchar": "string",
    "char": "string",
    "int": "integer",
    "integer": "integer",
    "bigint": "long",
    "long": "long",
    "smallint": "short",
    "short": "short",
    "tinyint": "byte",
    "byte": "byte",
    "float": "float",
    "real": "float",
    "double": "double",
    "boolean": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
}
_TOKEN = re.compile(r"""\s*(`(?:[^`]|``)+`|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])""")
# Spark SQL string escapes (spark.sql.parser.escapedStringLiterals=false): a backslash escapes the next character.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            match = _TOKEN.match(text, pos)
            if match is None:
                raise self.error(f"unexpected character {text[pos:].strip()[:1]!r}")
            self.tokens.append(match.group(1))
            pos = match.end()
        self.pos = 0

    def error(self, why: str) -> SchemaError:
        return SchemaError(f"cannot parse data type {self.text!r}: {why}")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end" + (f", expected {expected!r}" if expected else ""))
        if expected is not None and token.lower() != expected:
            raise self.error(f"expected {expected!r}, found {token!r}")
        self.pos += 1
        return token

    def string(self) -> str:
        """A quoted string literal's text, Spark's escapes applied."""
        token = self.take()
        if token[:1] not in ("'", '"'):
            raise self.error(f"expected a quoted string, found {token!r}")
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), token[1:-1])

    def number(self) -> int:
        token = self.take()
        if not token.isdigit():
            raise self.error(f"expected a number, found {token!r}")
        return int(token)

    def data_type(self) -> DataType:
        word = self.take().lower()
        if word in ("decimal", "dec", "numeric"):
            if self.peek() != "(":
                return DecimalType(10, 0)
            self.take("(")
            precision = self.number()
            scale = 0
            if self.peek() == ",":
                self.take(",")
                scale = self.number()
            self.take(")")
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise self.error(f"decimal({precision},{scale}) is out of range (precision 1..38, scale 0..precision)")
            return DecimalType(precision, scale)
        if word in ("varchar", "char"):
            if self.peek() == "(":
                self.take("(")
                self.number()
                self.take(")")
            return PrimitiveType("string")
        if word == "array":
            self.take("<")
            element = self.data_type()
            self.take(">")
            return ArrayType(element, True)
        if word == "map":
            self.take("<")
            key = self.data_type()
            self.take(",")
            value = self.data_type()
            self.take(">")
            return MapType(key, value, True)
        if word == "struct":
            self.take("<")
            fields: list[StructField] = []
            while self.peek() != ">":
                if fields:
                    self.take(",")
                name = self.take()
                if name.startswith("`"):
                    name = name[1:-1].replace("``", "`")
                if self.peek() == ":":
                    self.take(":")
                nullable = True
                field_type = self.data_type()
                if (self.peek() or "").lower() == "not":
                    self.take("not")
                    self.take("null")
                    nullable = False
                metadata: dict[str, Any] = {}
                if (self.peek() or "").lower() == "comment":  # Spark's complexColType: ... [NOT NULL] [COMMENT 'text']
                    self.take("comment")
                    metadata["comment"] = self.string()
                fields.append(StructField(name, field_type, nullable, metadata))
            self.take(">")
            return StructType(tuple(fields))
        if word in _ALIASES:
            return PrimitiveType(_ALIASES[word])
        raise self.error(f"unknown type {word!r}")


def parse_ddl_type(text: str) -> DataType:
    """A Spark SQL type string as a Delta type; SchemaError naming the text if it is not one."""
    parser = _Parser(text)
    if not parser.tokens:
        raise parser.error("empty type")
    result = parser.data_type()
    if parser.peek() is not None:
        raise parser.error(f"unexpected {parser.peek()!r} after the type")
    return result


_CHAR_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")


def _strings_for_char_varchar(raw: Any) -> Any:
    """Spark's CHAR(n)/VARCHAR(n) are stored by Delta as ``string`` (the length is not a log type)."""
    if isinstance(raw, str):
        return "string" if _CHAR_VARCHAR.match(raw) else raw
    if isinstance(raw, list):
        return [_strings_for_char_varchar(v) for v in raw]
    if isinstance(raw, dict):
        return {k: (_strings_for_char_varchar(v) if k in ("type", "elementType", "keyType", "valueType", "fields") else v)
                for k, v in raw.items()}
    return raw


def from_spark_type(data_type: Any) -> DataType:
    """A pyspark ``DataType`` (duck-typed through ``jsonValue()``) as a Delta type."""
    try:
        raw = data_type.jsonValue()
    except AttributeError:
        raise TypeError(f"expected a pyspark DataType, got {type(data_type).__name__}: {data_type!r}") from None
    return parse_data_type(_strings_for_char_varchar(json.loads(json.dumps(raw))))


def from_spark_field(spark_field: Any) -> StructField:
    """A pyspark ``StructField`` as a Delta field, keeping its metadata (comments)."""
    return StructField(
        str(spark_field.name),
        from_spark_type(spark_field.dataType),
        bool(spark_field.nullable),
        dict(spark_field.metadata or {}),
    )
