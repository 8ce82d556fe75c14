"""The immutable state of a table at one version.

A Snapshot is the single answer every other layer asks for ("what is the table at version N"):
the reader takes ``files`` and applies their DVs, the commit layer takes ``version``,
``protocol``, ``metadata`` and ``app_transactions`` for conflict checks, VACUUM takes
``tombstones``. It is built once by log replay and never mutated; derived values (schema,
record count) are computed lazily and cached because some callers never need them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from dvengine.errors import ProtocolError
from dvengine.log.column_mapping import column_mapping_mode
from dvengine.protocol.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile, Txn
from dvengine.protocol.schema import DataType, StructType, parse_partition_value, parse_schema


@dataclass(frozen=True)
class Snapshot:
    """Reconciled table state at ``version``. ``files`` is sorted by (path, DV unique id)."""

    table_root: str
    version: int
    protocol: Protocol
    metadata: Metadata
    files: tuple[AddFile, ...]
    app_transactions: Mapping[str, Txn]
    domain_metadata: Mapping[str, DomainMetadata]
    timestamp_ms: int
    # Tombstones are needed only by VACUUM and the checkpoint writer, and a checkpoint keeps one
    # per DML commit for the whole retention window; parsing them on every load would make load
    # time grow with history. They are replayed on first access instead.
    load_tombstones: Callable[[], tuple[RemoveFile, ...]] = field(repr=False, compare=False, default=tuple)

    @cached_property
    def tombstones(self) -> tuple[RemoveFile, ...]:
        """Removes still relevant at this version, sorted by (path, DV unique id)."""
        return self.load_tombstones()

    @cached_property
    def schema(self) -> StructType:
        """The logical schema (field names users see; physical names are in field metadata)."""
        return parse_schema(self.metadata.schema_string)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def configuration(self) -> Mapping[str, str]:
        return self.metadata.configuration

    @cached_property
    def column_mapping_mode(self) -> str:
        return column_mapping_mode(self.metadata)

    @cached_property
    def num_records(self) -> int | None:
        """Live rows: physical numRecords minus DV cardinalities; None if any file lacks stats."""
        total = 0
        for add in self.files:
            live = add.live_records
            if live is None:
                return None
            total += live
        return total

    @cached_property
    def partition_keys(self) -> tuple[tuple[str, str, DataType], ...]:
        """(logical name, key in partitionValues, data type) per partition column."""
        out: list[tuple[str, str, DataType]] = []
        for name in self.partition_columns:
            field = self.schema.find(name)
            if field is None:
                raise ProtocolError(
                    f"partition column {name!r} of the table at {self.table_root} is not in its schema "
                    f"{self.schema.field_names}"
                )
            key = field.name if self.column_mapping_mode == "none" else field.physical_name
            out.append((field.name, key, field.type))
        return tuple(out)

    def partition_values_logical(self, add: AddFile) -> dict[str, object]:
        """Typed partition values of ``add`` keyed by LOGICAL column names, in every mapping mode."""
        values = add.partition_values
        out: dict[str, object] = {}
        for logical, key, data_type in self.partition_keys:
            if key in values:
                raw = values[key]
            elif logical in values:  # tolerate writers that used logical names
                raw = values[logical]
            else:
                raise ProtocolError(
                    f"file {add.path} has no partition value for column {logical!r} "
                    f"(looked for key {key!r} in {dict(values)})"
                )
            out[logical] = parse_partition_value(raw, data_type)
        return out
