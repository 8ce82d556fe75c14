"""Schema rules for writes: does the data fit the table, and what does a new table look like?

All checks run before a single file is written, so a rejected write leaves nothing behind.
Names resolve case-insensitively (Spark's default); types must match exactly, nested field
names and all, unless the write asks for schema evolution (``mergeSchema``, see
:mod:`dvengine.writing.schema_merge`); dvengine does no implicit casts beyond those rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dvengine.commit import in_commit_timestamps
from dvengine.errors import InvalidArgumentError, SchemaMismatchError, SchemaViolationError
from dvengine.log import checkpoint_v2
from dvengine.protocol import row_tracking, type_widening
from dvengine.protocol.actions import Protocol
from dvengine.protocol.features import DELETION_VECTORS, ENABLE_CHANGE_DATA_FEED, TIMESTAMP_NTZ, with_change_data_feed
from dvengine.protocol.mapping_modes import NONE, max_column_id, requested_mode, with_column_mapping
from dvengine.protocol.schema import ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructType
from dvengine.writing.defaults import has_default
from dvengine.writing.generated import GENERATED_COLUMNS, GENERATION_EXPRESSION
from dvengine.writing.identity import IDENTITY_COLUMNS, is_identity
from dvengine.writing.properties import validate_table_properties

ENABLE_DVS = "delta.enableDeletionVectors"
DEFAULT_NEW_TABLE_CONFIGURATION: Mapping[str, str] = {ENABLE_DVS: "true"}


def type_signature(data_type: DataType) -> str:
    """A type's identity for matching: structure, case-folded names, no nullability or metadata."""
    if isinstance(data_type, StructType):
        return "struct<" + ",".join(f"{f.name.lower()}:{type_signature(f.type)}" for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"array<{type_signature(data_type.element_type)}>"
    if isinstance(data_type, MapType):
        return f"map<{type_signature(data_type.key_type)},{type_signature(data_type.value_type)}>"
    return data_type.simple_string()


def check_distinct_column_names(schema: StructType, prefix: str = "") -> None:
    """SchemaMismatchError naming both columns when two names (at any struct level) differ only by case.

    Delta and Spark resolve names case-insensitively, so ``a`` and ``A`` would be one column to
    every reader and every condition; such data is refused before a file is written.
    """
    seen: dict[str, str] = {}
    for f in schema.fields:
        other = seen.get(f.name.lower())
        if other is not None:
            first, second = prefix + other, prefix + f.name
            what = (
                "the same name twice"
                if other == f.name
                else "the same column twice, as Delta column names are case-insensitive"
            )
            raise SchemaMismatchError(
                f"the data has columns {first!r} and {second!r}: {what}; rename one of them (nothing was written)"
            )
        seen[f.name.lower()] = f.name
        if isinstance(f.type, StructType):
            check_distinct_column_names(f.type, f"{prefix}{f.name}.")


def match_columns(table: StructType, data: StructType) -> list[tuple[str, str]]:
    """(data column, table column) pairs in table order; SchemaMismatchError unless they match 1:1."""
    check_distinct_column_names(data)
    by_lower = {name.lower(): name for name in data.field_names}
    missing = [f.name for f in table.fields if f.name.lower() not in by_lower]
    table_names = {f.name.lower() for f in table.fields}
    extra = [n for n in data.field_names if n.lower() not in table_names]
    if missing or extra:
        raise SchemaMismatchError(
            f"the data's columns do not match the table's: missing {missing}, not in the table {extra}; "
            f"table schema is {table.simple_string()}"
        )
    pairs: list[tuple[str, str]] = []
    mismatched: list[str] = []
    for f in table.fields:
        data_name = by_lower[f.name.lower()]
        data_type = data.get(data_name).type
        if type_signature(data_type) != type_signature(f.type):
            mismatched.append(f"{f.name}: table {f.type.simple_string()}, data {data_type.simple_string()}")
        pairs.append((data_name, f.name))
    if mismatched:
        raise SchemaMismatchError("column types differ (cast the data first): " + "; ".join(mismatched))
    return pairs


def match_columns_filling_nulls(table: StructType, data: StructType) -> list[tuple[str | None, str]]:
    """(data column or None, table column) pairs in table order: :func:`match_columns`, except that
    nullable table columns the data lacks pair with None and are written as NULL (generated
    columns: computed by the write paths, NOT NULL or not; so are identity columns and columns with
    a DEFAULT).

    Delta's schema enforcement refuses data with columns the table lacks, not data lacking table
    columns: an append of ``(id)`` to a table ``(id, note)`` writes ``note = NULL``. A NOT NULL
    column cannot be filled so: SchemaViolationError naming it (Delta: DELTA_NOT_NULL_CONSTRAINT_VIOLATED).
    """
    check_distinct_column_names(data)
    present = {n.lower() for n in data.field_names}
    missing = [f for f in table.fields if f.name.lower() not in present]
    not_null = [
        f.name for f in missing
        if not f.nullable and GENERATION_EXPRESSION not in f.metadata and not is_identity(f) and not has_default(f)
    ]
    if not_null:
        raise SchemaViolationError(
            f"NOT NULL constraint violated: the data lacks the NOT NULL column(s) {not_null}, which would be "
            "written as NULL; nothing was written"
        )
    if not missing:
        return list(match_columns(table, data))
    kept = StructType(tuple(f for f in table.fields if f.name.lower() in present))
    matched = dict((t, d) for d, t in match_columns(kept, data)) if kept.fields else {}
    if not kept.fields and data.fields:
        match_columns(kept, data)  # the data's columns are all unknown: the same error as a mismatch
    return [(matched.get(f.name), f.name) for f in table.fields]


def not_null_paths(schema: StructType, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Logical paths of NOT NULL fields reachable through structs (arrays/maps are not inspected)."""
    out: list[tuple[str, ...]] = []
    for f in schema.fields:
        path = (*prefix, f.name)
        if not f.nullable:
            out.append(path)
        if isinstance(f.type, StructType):
            out.extend(not_null_paths(f.type, path))
    return out


def resolve_partition_columns(schema: StructType, partition_by: Sequence[str]) -> tuple[str, ...]:
    """Partition columns spelled as in the schema; they must be distinct primitive top-level columns."""
    resolved: list[str] = []
    for name in partition_by:
        found = schema.find(name)
        if found is None:
            raise InvalidArgumentError(f"partition column {name!r} is not in the data; columns are {schema.field_names}")
        if not isinstance(found.type, (PrimitiveType, DecimalType)) or found.type.name == "binary":
            raise InvalidArgumentError(
                f"partition column {found.name!r} has type {found.type.simple_string()}; only atomic, non-binary "
                "types can partition a table"
            )
        if found.name in resolved:
            raise InvalidArgumentError(f"partition column {found.name!r} is listed twice")
        resolved.append(found.name)
    if resolved and len(resolved) == len(schema.fields):
        raise InvalidArgumentError("a table cannot be partitioned by all of its columns: no data columns would remain")
    return tuple(resolved)


def uses_timestamp_ntz(data_type: DataType) -> bool:
    if isinstance(data_type, StructType):
        return any(uses_timestamp_ntz(f.type) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return uses_timestamp_ntz(data_type.element_type)
    if isinstance(data_type, MapType):
        return uses_timestamp_ntz(data_type.key_type) or uses_timestamp_ntz(data_type.value_type)
    return data_type.name == "timestamp_ntz"


def new_table_protocol(schema: StructType, configuration: Mapping[str, str]) -> Protocol:
    """The smallest protocol a new table needs.

    DVs on (the default): reader 3 / writer 7 with ``deletionVectors``. DVs explicitly off:
    legacy (1, 2), which every Delta reader accepts, unless a TIMESTAMP_NTZ column forces table
    features. TIMESTAMP_NTZ always adds the ``timestampNtz`` feature, as Delta requires.
    ``delta.enableChangeDataFeed=true`` adds ``changeDataFeed`` (legacy: writer 4). Generated
    columns add ``generatedColumns`` (legacy: writer 4), identity columns ``identityColumns``
    (legacy: writer 6), as Delta. ``delta.enableRowTracking=true`` adds ``rowTracking`` and
    ``domainMetadata`` (writer 7). ``delta.columnMapping.mode`` ``name`` / ``id`` adds
    ``columnMapping``: legacy (2, 5) / (2, 6), or listed as reader and writer feature on (3, 7)
    (:mod:`dvengine.protocol.mapping_modes` says why not Delta 3's (2, 7) form).
    """
    dvs = configuration.get(ENABLE_DVS, "false").lower() == "true"
    ntz = uses_timestamp_ntz(schema)
    generated = any(GENERATION_EXPRESSION in f.metadata for f in schema.fields)
    identity = any(is_identity(f) for f in schema.fields)
    if not dvs and not ntz:
        protocol = Protocol(1, 6) if identity else Protocol(1, 4) if generated else Protocol(1, 2)
    else:
        features = tuple(sorted(({DELETION_VECTORS} if dvs else set()) | ({TIMESTAMP_NTZ} if ntz else set())))
        extra = ((GENERATED_COLUMNS,) if generated else ()) + ((IDENTITY_COLUMNS,) if identity else ())
        writers = tuple(sorted({*features, *extra}))
        protocol = Protocol(3, 7, features, writers)
    if configuration.get(ENABLE_CHANGE_DATA_FEED, "false").lower() == "true":
        protocol = with_change_data_feed(protocol)
    if row_tracking.enabled(configuration):
        protocol = row_tracking.with_row_tracking(protocol)
    protocol = in_commit_timestamps.protocol_for(protocol, configuration)
    protocol = checkpoint_v2.protocol_for_policy(protocol, configuration)  # delta.checkpointPolicy=v2
    protocol = type_widening.protocol_for(protocol, configuration)  # delta.enableTypeWidening=true adds the feature
    # last, so that a writer-7 protocol lists columnMapping as a reader feature too (reader 3)
    return with_column_mapping(protocol) if requested_mode(configuration) != NONE else protocol


def new_table_configuration(schema: StructType, configuration: Mapping[str, str]) -> dict[str, str]:
    """A new table's configuration: with ``delta.enableRowTracking=true``, plus the materialized
    row id / row commit version column names Delta generates for it (PROTOCOL.md "Row Tracking")."""
    if not row_tracking.enabled(configuration):
        return dict(configuration)
    return row_tracking.enable_configuration(configuration, [f.physical_name for f in schema.fields])


def check_new_table_configuration(configuration: Mapping[str, str]) -> None:
    """Refuse a new table's properties before anything is written: bad values, a column mapping
    mode that is not ``none`` / ``name`` / ``id``, a ``maxColumnId`` that is no integer."""
    validate_table_properties(configuration)
    requested_mode(configuration)
    max_column_id(configuration)
