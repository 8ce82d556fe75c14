"""Coarse SQL type families used for type checking and for comparing values during skipping.

Spark's type coercion rules are large; predicates only need to know which *family* a value
belongs to (a number, a string, a date ...) to reject obvious mistakes and to decide whether two
values can be ordered against each other. Finer distinctions (int vs long) never change whether
a comparison is meaningful, so they are folded together here.
"""

from __future__ import annotations

from enum import Enum

from dvengine.protocol.schema import DataType, DecimalType, PrimitiveType

_NUMERIC = frozenset({"long", "integer", "short", "byte", "float", "double"})


class Kind(Enum):
    NUMERIC = "numeric"
    STRING = "string"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMP_NTZ = "timestamp_ntz"
    BINARY = "binary"
    COMPLEX = "complex"
    NULL = "null"
    UNKNOWN = "unknown"


def kind_of(data_type: DataType) -> Kind:
    """The family of a Delta schema type."""
    if isinstance(data_type, DecimalType):
        return Kind.NUMERIC
    if isinstance(data_type, PrimitiveType):
        name = data_type.name
        if name in _NUMERIC:
            return Kind.NUMERIC
        return {
            "string": Kind.STRING,
            "boolean": Kind.BOOLEAN,
            "date": Kind.DATE,
            "timestamp": Kind.TIMESTAMP,
            "timestamp_ntz": Kind.TIMESTAMP_NTZ,
            "binary": Kind.BINARY,
        }.get(name, Kind.UNKNOWN)
    return Kind.COMPLEX


def is_temporal(kind: Kind) -> bool:
    return kind in (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ)


def is_integral(data_type: DataType | None) -> bool:
    return isinstance(data_type, PrimitiveType) and data_type.name in ("long", "integer", "short", "byte")
