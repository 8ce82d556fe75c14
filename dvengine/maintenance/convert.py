"""CONVERT TO DELTA for a folder of plain Parquet files (unpartitioned or Hive-partitioned).

The Parquet files stay where they are; version 0 of a new log lists each one in an ``add``
action with stats read from its footer (no data is read). The schema is the union of the files'
columns (a column with two different types in two files is refused, naming both files), followed
by the partition columns of ``partitionSchema``, whose folder values (``col=value``, Hive
escaping, ``__HIVE_DEFAULT_PARTITION__`` for null) must parse as the declared types. As Delta
does, a folder that is a Delta table already is returned as is, hidden names (``_``/``.``) are
skipped, and partition folders without a ``partitionSchema`` are an error. New tables get
dvengine's defaults (deletion vectors enabled), as ``dvengine.write`` gives them.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import (
    DataFileError,
    InvalidArgumentError,
    SchemaError,
    SchemaMismatchError,
    TableNotFoundError,
    UnsupportedStorageError,
)
from dvengine.log import table_exists
from dvengine.protocol.actions import AddFile, Metadata
from dvengine.protocol.features import check_writable
from dvengine.protocol.nested_not_null import as_nullable
from dvengine.protocol.schema import (
    DataType,
    DecimalType,
    PrimitiveType,
    StructField,
    StructType,
    from_arrow_schema,
    parse_data_type,
    parse_partition_value,
    serialize_partition_value,
)
from dvengine.storage import is_object_uri, normalize_table_path
from dvengine.writing.files import HIVE_DEFAULT_PARTITION, build_add_file
from dvengine.writing.schema_checks import DEFAULT_NEW_TABLE_CONFIGURATION, new_table_protocol
from dvengine.writing.stats import num_indexed_cols, stats_from_parquet_metadata

_IDENTIFIER = re.compile(r"^\s*parquet\s*\.\s*`(?P<path>[^`]+)`\s*$", re.IGNORECASE)
_DDL_TYPES = {
    "int": "integer", "integer": "integer", "bigint": "long", "long": "long", "smallint": "short",
    "short": "short", "tinyint": "byte", "byte": "byte", "string": "string", "boolean": "boolean",
    "double": "double", "float": "float", "real": "float", "date": "date", "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz", "binary": "binary",
}  # fmt: skip
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$", re.IGNORECASE)


def parse_identifier(identifier: str) -> str:
    """The folder of ``parquet.`/path```, the only identifier form a path-based convert accepts."""
    if not isinstance(identifier, str):
        raise TypeError(f"identifier must be a string like \"parquet.`/path`\", got {type(identifier).__name__}")
    match = _IDENTIFIER.match(identifier)
    if match is None:
        raise InvalidArgumentError(
            f"CONVERT TO DELTA identifier {identifier!r} is not of the form parquet.`/path/to/table` "
            "(only path-based Parquet tables are supported)"
        )
    return match.group("path")


def _ddl_type(text: str, column: str) -> DataType:
    lowered = text.strip().lower()
    if lowered in _DDL_TYPES:
        return PrimitiveType(_DDL_TYPES[lowered])
    match = _DECIMAL.match(lowered)
    if match:
        return DecimalType(int(match.group(1)), int(match.group(2)))
    raise InvalidArgumentError(f"partitionSchema: column {column!r} has unsupported type {text.strip()!r}")


def parse_partition_schema(partition_schema: Any) -> list[StructField]:
    """Partition columns from a DDL string (``"part int, day date"``) or a pyspark StructType."""
    if partition_schema is None:
        return []
    if isinstance(partition_schema, str):
        fields = []
        for item in filter(None, (p.strip() for p in re.split(r",(?![^(]*\))", partition_schema))):
            name, _, type_text = item.partition(" ")
            if not type_text.strip():
                raise InvalidArgumentError(f"partitionSchema {partition_schema!r}: {item!r} is not '<column> <type>'")
            fields.append(StructField(name.strip("`"), _ddl_type(type_text, name)))
        if not fields:
            raise InvalidArgumentError(f"partitionSchema {partition_schema!r} declares no column")
        return fields
    to_json = getattr(partition_schema, "json", None)
    if type(partition_schema).__name__ != "StructType" or not callable(to_json):
        raise TypeError(f"partitionSchema must be a DDL string or a pyspark StructType, got {type(partition_schema).__name__}")
    parsed = parse_data_type(json.loads(to_json()))
    if not isinstance(parsed, StructType):
        raise TypeError("partitionSchema must be a struct type")
    return list(parsed.fields)


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def list_parquet_files(root: str) -> list[str]:
    """Relative paths (``/``-separated) of the data files under ``root``, hidden names skipped."""
    found = []
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _hidden(d) or ("=" in d and not d.startswith("_delta_log")))
        for name in sorted(names):
            if not _hidden(name):
                found.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return found


def _partition_values(relative: str, columns: Sequence[StructField]) -> dict[str, str | None]:
    folders = relative.split("/")[:-1]
    if len(folders) != len(columns):
        raise SchemaMismatchError(
            f"file {relative} sits in {len(folders)} folder level(s) but partitionSchema declares "
            f"{len(columns)} partition column(s) {[c.name for c in columns]}"
        )
    values: dict[str, str | None] = {}
    for folder, f in zip(folders, columns):
        key, sep, raw = folder.partition("=")
        if not sep or unquote(key).lower() != f.name.lower():
            raise SchemaMismatchError(f"file {relative}: folder {folder!r} does not name partition column {f.name!r}")
        text = unquote(raw)
        if text == HIVE_DEFAULT_PARTITION:
            values[f.name] = None
            continue
        try:
            value = parse_partition_value(text, f.type)
        except (ValueError, ArithmeticError, SchemaError) as exc:
            raise SchemaMismatchError(
                f"file {relative}: partition value {text!r} of column {f.name!r} is not a valid {f.type.simple_string()} ({exc})"
            ) from exc
        values[f.name] = serialize_partition_value(value, f.type)
    return values


def _merge_schemas(footers: list[tuple[str, pq.FileMetaData]]) -> StructType:
    merged: dict[str, tuple[StructField, str]] = {}
    order: list[str] = []
    for relative, md in footers:
        for f in from_arrow_schema(_arrow_schema(md)).fields:
            # Delta merges the files' schemas ``asNullable`` (ConvertUtils.mergeSchemasInParallel):
            # a Parquet file's required fields are no table constraint, and an array element or
            # map value flag would be a NOT NULL no writer can enforce (protocol/nested_not_null.py)
            f = StructField(f.name, as_nullable(f.type), True)
            seen = merged.get(f.name.lower())
            if seen is None:
                merged[f.name.lower()] = (f, relative)
                order.append(f.name.lower())
            elif seen[0].type != f.type:
                raise SchemaMismatchError(
                    f"column {f.name!r} is {seen[0].type.simple_string()} in {seen[1]} but {f.type.simple_string()} in {relative}"
                )
    return StructType(tuple(merged[k][0] for k in order))


def _arrow_schema(md: pq.FileMetaData) -> pa.Schema:
    """The file's columns as Delta would type them: timestamps in microseconds; INT96 ones (Spark's
    default for TIMESTAMP, always UTC-normalized) as ``timestamp``, not ``timestamp_ntz``."""
    int96 = {
        md.schema.column(j).path.split(".")[0] for j in range(md.num_columns) if md.schema.column(j).physical_type == "INT96"
    }
    fields = []
    for f in md.schema.to_arrow_schema():
        t = f.type
        if pa.types.is_timestamp(t):
            t = pa.timestamp("us", tz="UTC" if t.tz is not None or f.name in int96 else None)
        elif pa.types.is_large_string(t):
            t = pa.string()
        fields.append(pa.field(f.name, t, True))
    return pa.schema(fields)


def convert_to_delta(identifier: str, partition_schema: Any = None, conf: ConfLookup | None = None) -> str:
    """Convert the Parquet folder named by ``identifier``; returns the table root."""
    root = normalize_table_path(parse_identifier(identifier))
    partition_fields = parse_partition_schema(partition_schema)
    if table_exists(root):
        return root  # Delta: converting a Delta table is a no-op
    if is_object_uri(root):
        raise UnsupportedStorageError(f"CONVERT TO DELTA of {root}: converting Parquet on an object store is not implemented yet")
    if not os.path.isdir(root):
        raise TableNotFoundError(f"CONVERT TO DELTA: {root} is not a folder")
    files = list_parquet_files(root)
    if not files:
        raise InvalidArgumentError(f"CONVERT TO DELTA: {root} holds no Parquet file; nothing was written")
    footers = []
    for relative in files:
        try:
            footers.append((relative, pq.read_metadata(os.path.join(root, *relative.split("/")))))
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"CONVERT TO DELTA: {relative} in {root} is not a readable Parquet file: {exc}") from exc
    values = {relative: _partition_values(relative, partition_fields) for relative in files}
    data_schema = _merge_schemas(footers)
    data_names = {d.name.lower() for d in data_schema.fields}
    clash = sorted(f.name for f in partition_fields if f.name.lower() in data_names)
    if clash:
        raise SchemaMismatchError(f"partition column(s) {clash} also appear as columns inside the Parquet files")
    schema = StructType(data_schema.fields + tuple(partition_fields))
    config = dict(DEFAULT_NEW_TABLE_CONFIGURATION)
    indexed = num_indexed_cols(config)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema.to_json_string(),
        partition_columns=tuple(f.name for f in partition_fields),
        configuration=config,
        created_time=int(time.time() * 1000),
    )
    protocol = new_table_protocol(schema, config)
    check_writable(protocol, metadata)
    adds: list[AddFile] = []
    for relative, md in footers:
        st = os.stat(os.path.join(root, *relative.split("/")))
        stats = stats_from_parquet_metadata(md, schema, num_indexed_cols=indexed)
        adds.append(build_add_file(relative, values[relative], st.st_size, int(st.st_mtime * 1000), stats))
    params: dict[str, ParameterValue] = {  # DeltaOperations.Convert
        "numFiles": len(adds),
        "partitionedBy": delta_json([f.name for f in partition_fields]),
        "collectStats": True,
        "sourceFormat": "parquet",
    }
    txn = Transaction(root, None, "CONVERT", params, conf=conf)
    txn.update_protocol(protocol)
    txn.update_metadata(metadata)
    txn.add_actions(adds)
    txn.commit({"numConvertedFiles": len(adds)})
    return root
