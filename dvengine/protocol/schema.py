"""Delta table schemas: parsing ``schemaString``, typed fields, and conversion to Arrow.

The log stores the schema as Spark-style JSON. Everything that needs column types (binding
predicates, parsing partition values, building Arrow schemas, collecting stats) goes through
these classes so that a type is interpreted one way only. Column mapping is modelled here too
because it is a property of a field: a logical name users see and a physical name in Parquet.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow as pa

from dvengine.errors import SchemaError

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
PARQUET_FIELD_ID_KEY = b"PARQUET:field_id"

PRIMITIVE_NAMES = (
    "string",
    "long",
    "integer",
    "short",
    "byte",
    "float",
    "double",
    "boolean",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
)
NUMERIC_NAMES = ("long", "integer", "short", "byte", "float", "double")
INTEGRAL_NAMES = ("long", "integer", "short", "byte")


@dataclass(frozen=True, slots=True)
class PrimitiveType:
    name: str

    def to_json(self) -> Any:
        return self.name

    def simple_string(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class DecimalType:
    precision: int
    scale: int

    @property
    def name(self) -> str:
        return "decimal"

    def to_json(self) -> Any:
        return f"decimal({self.precision},{self.scale})"

    def simple_string(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True, slots=True)
class ArrayType:
    element_type: DataType
    contains_null: bool = True

    @property
    def name(self) -> str:
        return "array"

    def to_json(self) -> Any:
        return {"type": "array", "elementType": self.element_type.to_json(), "containsNull": self.contains_null}

    def simple_string(self) -> str:
        return f"array<{self.element_type.simple_string()}>"


@dataclass(frozen=True, slots=True)
class MapType:
    key_type: DataType
    value_type: DataType
    value_contains_null: bool = True

    @property
    def name(self) -> str:
        return "map"

    def to_json(self) -> Any:
        return {
            "type": "map",
            "keyType": self.key_type.to_json(),
            "valueType": self.value_type.to_json(),
            "valueContainsNull": self.value_contains_null,
        }

    def simple_string(self) -> str:
        return f"map<{self.key_type.simple_string()},{self.value_type.simple_string()}>"


@dataclass(frozen=True, slots=True)
class StructField:
    name: str
    type: DataType
    nullable: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def physical_name(self) -> str:
        """Name of the column inside Parquet files: the mapped name when column mapping is on."""
        value = self.metadata.get(PHYSICAL_NAME_KEY)
        return self.name if value is None else str(value)

    @property
    def field_id(self) -> int | None:
        value = self.metadata.get(FIELD_ID_KEY)
        return None if value is None else int(value)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.to_json(), "nullable": self.nullable, "metadata": dict(self.metadata)}


@dataclass(frozen=True, slots=True)
class StructType:
    fields: tuple[StructField, ...]

    @property
    def name(self) -> str:
        return "struct"

    def to_json(self) -> Any:
        return {"type": "struct", "fields": [f.to_json() for f in self.fields]}

    def to_json_string(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    def simple_string(self) -> str:
        return "struct<" + ",".join(f"{f.name}:{f.type.simple_string()}" for f in self.fields) + ">"

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def __iter__(self) -> Iterator[StructField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def find(self, name: str) -> StructField | None:
        """Case-insensitive lookup, as Spark and Delta resolve column names by default."""
        lowered = name.lower()
        for f in self.fields:
            if f.name.lower() == lowered:
                return f
        return None

    def get(self, name: str) -> StructField:
        found = self.find(name)
        if found is None:
            raise SchemaError(f"column '{name}' is not in the schema; columns are {self.field_names}")
        return found


DataType: TypeAlias = PrimitiveType | DecimalType | ArrayType | MapType | StructType


def parse_data_type(raw: Any) -> DataType:
    if isinstance(raw, str):
        if raw in PRIMITIVE_NAMES:
            return PrimitiveType(raw)
        if raw.startswith("decimal"):
            inner = raw[len("decimal") :].strip("() ")
            if not inner:
                return DecimalType(10, 0)
            precision, scale = (int(p) for p in inner.split(","))
            return DecimalType(precision, scale)
        if raw == "void":
            return PrimitiveType("string")
        raise SchemaError(f"unknown Delta data type {raw!r}")
    if isinstance(raw, Mapping):
        kind = raw.get("type")
        if kind == "struct":
            return StructType(tuple(parse_field(f) for f in raw.get("fields", [])))
        if kind == "array":
            return ArrayType(parse_data_type(raw["elementType"]), bool(raw.get("containsNull", True)))
        if kind == "map":
            return MapType(
                parse_data_type(raw["keyType"]),
                parse_data_type(raw["valueType"]),
                bool(raw.get("valueContainsNull", True)),
            )
    raise SchemaError(f"cannot parse Delta data type {raw!r}")


def parse_field(raw: Mapping[str, Any]) -> StructField:
    try:
        return StructField(
            name=str(raw["name"]),
            type=parse_data_type(raw["type"]),
            nullable=bool(raw.get("nullable", True)),
            metadata=dict(raw.get("metadata") or {}),
        )
    except KeyError as exc:
        raise SchemaError(f"schema field is missing {exc}: {raw}") from None


def parse_schema(schema_string: str) -> StructType:
    try:
        raw = json.loads(schema_string)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"schemaString is not valid JSON: {exc}") from None
    parsed = parse_data_type(raw)
    if not isinstance(parsed, StructType):
        raise SchemaError("schemaString must describe a struct")
    return parsed


# --- Arrow conversion ------------------------------------------------------------------------

_ARROW_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def to_arrow_type(data_type: DataType, physical: bool = False) -> pa.DataType:
    """Arrow type for a Delta type; ``physical`` uses mapped names for nested struct fields."""
    if isinstance(data_type, PrimitiveType):
        return _ARROW_PRIMITIVES[data_type.name]
    if isinstance(data_type, DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", to_arrow_type(data_type.element_type, physical), data_type.contains_null))
    if isinstance(data_type, MapType):
        return pa.map_(to_arrow_type(data_type.key_type, physical), to_arrow_type(data_type.value_type, physical))
    return pa.struct([to_arrow_field(f, physical) for f in data_type.fields])


def to_arrow_field(f: StructField, physical: bool = False) -> pa.Field:
    name = f.physical_name if physical else f.name
    return pa.field(name, to_arrow_type(f.type, physical), f.nullable)


def to_arrow_schema(schema: StructType, physical: bool = False) -> pa.Schema:
    return pa.schema([to_arrow_field(f, physical) for f in schema.fields])


_FROM_ARROW: list[tuple[Any, str]] = [
    (pa.types.is_int64, "long"),
    (pa.types.is_int32, "integer"),
    (pa.types.is_int16, "short"),
    (pa.types.is_int8, "byte"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_date32, "date"),
]


def holds_struct(data_type: DataType) -> bool:
    """Whether ``data_type`` is a struct or holds one in an array element or a map key / value
    (where a struct's fields need matching by name or position, not a plain cast)."""
    if isinstance(data_type, StructType):
        return True
    if isinstance(data_type, ArrayType):
        return holds_struct(data_type.element_type)
    if isinstance(data_type, MapType):
        return holds_struct(data_type.key_type) or holds_struct(data_type.value_type)
    return False


def conform_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (columns already in ``schema``'s order) with ``schema``, casting only the columns
    whose type differs.

    A whole-table ``cast`` also casts columns of the very same type, and Arrow's cast refuses a
    struct column whose NOT NULL field holds NULLs under NULL parents ("nulls in input cannot be
    viewed as non-nullable"), which is how such a column looks wherever the struct itself is NULL.
    Delta's writer refuses a NULL struct above a NOT NULL field (engine/local/not_null.py), but
    other writers (delta-rs) write such rows, and reads and copy-on-write rewrites of them must not
    fail, so a whole-table cast would fail on rows a table may hold."""
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(table.columns, schema, strict=True)]
    return pa.Table.from_arrays(columns, schema=schema)


def from_arrow_type(arrow_type: pa.DataType) -> DataType:
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_string_view(arrow_type):
        return PrimitiveType("string")
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return PrimitiveType("binary")
    if pa.types.is_timestamp(arrow_type):
        return PrimitiveType("timestamp" if arrow_type.tz is not None else "timestamp_ntz")
    if pa.types.is_decimal(arrow_type):
        return DecimalType(arrow_type.precision, arrow_type.scale)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return ArrayType(from_arrow_type(arrow_type.value_type), arrow_type.value_field.nullable)
    if pa.types.is_map(arrow_type):
        return MapType(from_arrow_type(arrow_type.key_type), from_arrow_type(arrow_type.item_type), True)
    if pa.types.is_struct(arrow_type):
        return StructType(tuple(from_arrow_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)))
    for predicate, name in _FROM_ARROW:
        if predicate(arrow_type):
            return PrimitiveType(name)
    raise SchemaError(f"Arrow type {arrow_type} has no Delta equivalent")


def from_arrow_field(f: pa.Field) -> StructField:
    return StructField(f.name, from_arrow_type(f.type), f.nullable, {})


def from_arrow_schema(schema: pa.Schema) -> StructType:
    return StructType(tuple(from_arrow_field(schema.field(i)) for i in range(len(schema))))


# --- partition values --------------------------------------------------------------------------

PartitionValue: TypeAlias = (
    str | int | float | bool | bytes | dt.date | dt.datetime | decimal.Decimal | None
)


def parse_partition_value(raw: str | None, data_type: DataType) -> PartitionValue:
    """Turn the string the log stores for a partition value into a typed Python value.

    An empty string or null means NULL for every type (Spark writes ``__HIVE_DEFAULT_PARTITION__``
    as the folder name but null in the log), except that a logged ``""`` of a *string* column reads
    as ``''``: PROTOCOL.md says "an empty string for any type translates to a null partition
    value", but Delta Spark reads the value with ``Cast(Literal(""), StringType)``
    (``TahoeFileIndex.getPartitionValuesRow``) and delta-rs also gives ``''``, so dvengine reads what
    they read. No writer that follows Spark logs ``""`` (see :func:`serialize_partition_value`).
    """
    if raw is None:
        return None
    if not isinstance(data_type, (PrimitiveType, DecimalType)):
        raise SchemaError(f"partition columns must be primitive, got {data_type.simple_string()}")
    name = data_type.name
    if name == "string":
        return raw
    if raw == "":
        return None
    try:
        if name in INTEGRAL_NAMES:
            return int(raw)
        if name in ("float", "double"):
            return float(raw)
        if name == "boolean":
            return raw.lower() == "true"
        if name == "binary":
            return raw.encode("latin-1")
        if name == "date":
            return dt.date.fromisoformat(raw)
        if name == "decimal":
            return decimal.Decimal(raw)
        if name in ("timestamp", "timestamp_ntz"):
            text = raw.replace("Z", "+00:00")
            value = dt.datetime.fromisoformat(text)
            if name == "timestamp":
                return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
            return value.replace(tzinfo=None)
    except ValueError as exc:
        raise SchemaError(f"partition value {raw!r} is not a valid {name}: {exc}") from None
    raise SchemaError(f"unsupported partition column type {name}")


def serialize_partition_value(value: Any, data_type: DataType) -> str | None:
    """The log's string form of a partition value (inverse of :func:`parse_partition_value`). An
    empty string is null, as Spark's partitioned writes make it (FileFormatWriter names null and
    empty values ``__HIVE_DEFAULT_PARTITION__``, and Delta's commit protocol logs that folder as
    null, so the row reads back NULL in Delta); the protocol, too, gives a logged ``""`` no meaning
    but NULL. Before, dvengine logged ``""`` under a ``__HIVE_DEFAULT_PARTITION__`` folder."""
    if value is None or (isinstance(value, str) and value == "" and data_type.name == "string"):
        return None
    name = data_type.name
    if name == "boolean":
        return "true" if value else "false"
    if name == "binary":
        return bytes(value).decode("latin-1")
    if isinstance(value, dt.datetime):
        moment: dt.datetime = value
        if name == "timestamp":
            if moment.tzinfo is not None:
                moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
            return moment.isoformat(sep="T", timespec="microseconds") + "Z"
        return moment.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and name in ("float", "double"):
        return repr(value)
    return str(value)
