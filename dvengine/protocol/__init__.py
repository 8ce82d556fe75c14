"""Pure data model of the Delta log: actions, schema, stats and table features. No I/O."""

from dvengine.protocol.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Format,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    action_from_json,
    action_to_json,
    action_to_line,
)
from dvengine.protocol.schema import StructField, StructType, parse_schema
from dvengine.protocol.stats import FileStats

__all__ = [
    "Action",
    "AddCDCFile",
    "AddFile",
    "CommitInfo",
    "DeletionVectorDescriptor",
    "DomainMetadata",
    "FileStats",
    "Format",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "StructField",
    "StructType",
    "Txn",
    "action_from_json",
    "action_to_json",
    "action_to_line",
    "parse_schema",
]
