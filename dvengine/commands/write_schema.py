"""The schema and partitioning a write to an existing table commits, as Delta's
``ImplicitMetadataOperation.updateMetadata`` decides them.

- Same schema (names case-insensitive, types exact): nothing changes; nullable table columns the
  data lacks are written as NULL (Delta refuses extra columns, not missing ones).
- ``overwriteSchema`` (an overwrite without ``replaceWhere``): the data's schema and the given
  ``partitionBy`` (none when omitted) replace the table's; the table id and properties stay. NOT
  NULL flags inside array elements and map keys / values of the data are dropped
  (:func:`~dvengine.protocol.nested_not_null.without_unenforceable_not_nulls`), as Delta's
  ``schema.asNullable`` drops them before its commit would refuse them.
- ``mergeSchema`` (or the auto-merge conf): :func:`merge_struct`; new columns are appended,
  table columns the data lacks are written as nulls, the partitioning cannot change; on a table
  with type widening enabled a wider data type widens the column (recorded in ``delta.typeChanges``).
- Otherwise a different schema or partitioning raises :class:`SchemaMismatchError`.

Under column mapping, added or replaced fields get fresh ids and physical names. The result is
also a snapshot view carrying the new metadata, for commands (replaceWhere's DELETE) that read
the table through the schema the commit will have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from dvengine.errors import SchemaMismatchError
from dvengine.log import Snapshot
from dvengine.protocol import type_widening
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.nested_not_null import without_unenforceable_not_nulls
from dvengine.protocol.schema import StructType, parse_schema
from dvengine.writing.schema_checks import (
    check_distinct_column_names,
    match_columns,
    match_columns_filling_nulls,
    resolve_partition_columns,
    type_signature,
)
from dvengine.writing.schema_merge import (
    assign_column_mapping,
    merge_struct,
    protocol_for_schema,
    strip_column_mapping,
)


@dataclass(frozen=True)
class EvolvedSchema:
    """The table as the write will leave it, and how the data's columns map onto it."""

    snapshot: Snapshot  # the read snapshot, carrying ``metadata`` (and ``protocol``) when they changed
    metadata: Metadata
    changed: bool
    column_pairs: list[tuple[str | None, str]]  # (data column, or None for all-null; table column)
    protocol: Protocol | None = None  # an upgrade the new schema needs (timestampNtz)

    @property
    def schema(self) -> StructType:
        return self.snapshot.schema


def with_metadata(snapshot: Snapshot, metadata: Metadata, protocol: Protocol | None = None) -> Snapshot:
    """``snapshot`` seen through new metadata (and protocol, when upgraded): same version and files."""
    return dataclasses.replace(snapshot, metadata=metadata, protocol=protocol or snapshot.protocol)


def _evolved(snapshot: Snapshot, metadata: Metadata, pairs: list[tuple[str | None, str]]) -> EvolvedSchema:
    protocol = protocol_for_schema(snapshot.protocol, parse_schema(metadata.schema_string))
    return EvolvedSchema(with_metadata(snapshot, metadata, protocol), metadata, True, pairs, protocol)


def evolve_table_schema(
    snapshot: Snapshot,
    data_schema: StructType,
    partition_by: Sequence[str] | None,
    merge_schema: bool,
    overwrite_schema: bool,
) -> EvolvedSchema:
    """Decide the committed schema and partitioning (see the module docstring); nothing is written."""
    check_distinct_column_names(data_schema)
    table = snapshot.schema
    if overwrite_schema:
        partitions = resolve_partition_columns(data_schema, partition_by or ())
        data_table = without_unenforceable_not_nulls(strip_column_mapping(data_schema))
        schema, config = assign_column_mapping(data_table, snapshot.configuration)
        changed = type_signature(schema) != type_signature(table) or partitions != snapshot.partition_columns or any(
            a.nullable != b.nullable for a, b in zip(schema.fields, table.fields)
        )
        if not changed:  # same columns: keep the table's field metadata (ids, comments)
            pairs: list[tuple[str | None, str]] = list(match_columns(table, data_schema))
            return EvolvedSchema(snapshot, snapshot.metadata, False, pairs)
        metadata = dataclasses.replace(
            snapshot.metadata, schema_string=schema.to_json_string(), partition_columns=partitions, configuration=config
        )
        return _evolved(snapshot, metadata, [(n, n) for n in schema.field_names])
    if partition_by is not None and [p.lower() for p in partition_by] != [p.lower() for p in snapshot.partition_columns]:
        raise SchemaMismatchError(
            f"partitionBy {list(partition_by)} differs from the table's partitioning {list(snapshot.partition_columns)}"
            + ("" if merge_schema else "; use overwriteSchema=True with mode='overwrite' to change it")
        )
    try:
        pairs = match_columns_filling_nulls(table, data_schema)
        return EvolvedSchema(snapshot, snapshot.metadata, False, pairs)
    except SchemaMismatchError as exc:
        if not merge_schema:
            raise SchemaMismatchError(
                f"{exc}; to change the table's schema use mergeSchema=True (adds new columns) or "
                "overwriteSchema=True with mode='overwrite' (as Delta's DataFrameWriter options)"
            ) from exc
    merged = merge_struct(table, data_schema, widen=type_widening.is_enabled(snapshot.protocol, snapshot.metadata))
    data_names = {n.lower(): n for n in data_schema.field_names}
    pairs = [(data_names.get(f.name.lower()), f.name) for f in merged.fields]
    if type_signature(merged) == type_signature(table):  # the data lacks columns or has narrower ints
        return EvolvedSchema(snapshot, snapshot.metadata, False, pairs)
    schema, config = assign_column_mapping(merged, snapshot.configuration)
    metadata = dataclasses.replace(snapshot.metadata, schema_string=schema.to_json_string(), configuration=config)
    return _evolved(snapshot, metadata, pairs)
