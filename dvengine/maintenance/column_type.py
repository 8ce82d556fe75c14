"""``ALTER TABLE t {ALTER|CHANGE} COLUMN c TYPE type``: widen one column's type (``typeWidening``).

PROTOCOL.md "Type Widening": on a table with ``delta.enableTypeWidening=true`` a writer may change a
column's (or nested struct field's) type along the protocol's list, recording the change in the
field's ``delta.typeChanges``; no data file is rewritten, readers cast older files up. This is the
only way to the changes schema evolution does not apply by itself (integer -> double / decimal).
As Delta, the change is refused (typed, nothing committed) on a table without the property, for a
change outside the list, for partition columns (their values live as strings in the log and a
reader would parse them with the new type), and for a column that a CHECK constraint or a
generation expression reads (Delta's DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE /
DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE), whose meaning could change with the type.
"""

from __future__ import annotations

import dataclasses
import re

from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, SchemaMismatchError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance.column_log import change_column_parameters
from dvengine.protocol import type_widening
from dvengine.protocol.ddl import parse_ddl_type
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType
from dvengine.writing.constraints import constraint_texts
from dvengine.writing.schema_merge import protocol_for_schema


def check_atomic(f: StructField, new_type: DataType, full: str) -> None:
    """Only an atomic type changes (Spark's analyzer: a struct, map or array is changed through its fields)."""
    if isinstance(f.type, (StructType, ArrayType, MapType)) or isinstance(new_type, (StructType, ArrayType, MapType)):
        raise UnsupportedFeatureError(
            f"ALTER COLUMN {full!r} TYPE: only atomic types can be widened ({f.type.simple_string()} -> "
            f"{new_type.simple_string()}); nothing was changed"
        )


def widened_field(f: StructField, new_type: DataType, full: str) -> StructField:
    """``f`` widened to ``new_type`` (its ``delta.typeChanges`` recording the change), if the
    typeWidening feature allows that change; typed refusal otherwise."""
    check_atomic(f, new_type, full)
    if not type_widening.is_type_change_supported(f.type, new_type) or f.type == new_type:
        raise SchemaMismatchError(
            f"ALTER COLUMN {full!r} TYPE: {f.type.simple_string()} -> {new_type.simple_string()} is not a widening "
            "the typeWidening feature allows (DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP); nothing was changed"
        )
    return type_widening.with_type_change(f, new_type)


def check_type_change(snapshot: Snapshot, column: str) -> None:
    """What the table must allow before any column's type changes: type widening enabled, and the
    column (``column`` dotted, top-level name first) not a partition column."""
    if not type_widening.is_enabled(snapshot.protocol, snapshot.metadata):
        raise OperationNotAllowedError(
            f"ALTER COLUMN {column!r} TYPE on {snapshot.table_root} needs type widening: set the table property "
            f"{type_widening.ENABLE_TYPE_WIDENING}=true first; nothing was changed"
        )
    top = column.replace("`", "").split(".")[0]
    if top.lower() in (p.lower() for p in snapshot.partition_columns):
        raise UnsupportedFeatureError(f"ALTER COLUMN {column!r} TYPE: {top!r} is a partition column; nothing was changed")


def _retype(
    struct: StructType, path: list[str], new_type: DataType, full: str, done: tuple[str, ...] = ()
) -> tuple[StructType, tuple[str, ...], StructField]:
    """``struct`` with the field at ``path`` widened to ``new_type``, the field's path as the schema
    spells it, and the field as it was."""
    head = path[0].lower()
    fields = list(struct.fields)
    for i, f in enumerate(fields):
        if f.name.lower() != head:
            continue
        if len(path) == 1:
            fields[i] = widened_field(f, new_type, full)
            return StructType(tuple(fields)), (*done, f.name), f
        if not isinstance(f.type, StructType):
            break
        inner, at, old = _retype(f.type, path[1:], new_type, full, (*done, f.name))
        fields[i] = dataclasses.replace(f, type=inner)
        return StructType(tuple(fields)), at, old
    raise InvalidArgumentError(f"ALTER COLUMN: table has no column {full!r}; nothing was changed")


def _reads(sql: str, column: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(column)}(?!\w)", sql.replace("`", ""), re.IGNORECASE) is not None


def change_column_type(table_root: str, column: str, type_text: str, conf: ConfLookup | None = None) -> int:
    """Widen ``column`` (a dotted path for nested struct fields) to ``type_text``; returns the version.
    ``conf``: the session's conf, which the commit reads (None: dvengine's configuration)."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    check_type_change(snapshot, column)
    path = column.replace("`", "").split(".")
    for name, sql in constraint_texts(snapshot.metadata.configuration, snapshot.schema):
        if _reads(sql, path[-1]) or _reads(sql, column):
            raise OperationNotAllowedError(
                f"ALTER COLUMN {column!r} TYPE: constraint {name} ({sql}) reads the column; drop it first "
                "(Delta's DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE); nothing was changed"
            )
    new_type = parse_ddl_type(type_text)
    schema, at, old = _retype(snapshot.schema, path, new_type, column)
    metadata = dataclasses.replace(snapshot.metadata, schema_string=schema.to_json_string())
    protocol = protocol_for_schema(snapshot.protocol, schema)  # date -> timestamp_ntz needs timestampNtz
    # Delta's ChangeColumn logs the table's field with the new type (its full path; delta.typeChanges is
    # added to the schema, not to the logged field), as ALTER COLUMN ... TYPE through column_changes does.
    params = change_column_parameters(at, dataclasses.replace(old, type=new_type))
    txn = Transaction(snapshot.table_root, snapshot, "CHANGE COLUMN", params, conf=conf)
    txn.record_read([], None)
    txn.update_metadata(metadata)
    if protocol is not None:
        txn.update_protocol(protocol)
    return txn.commit()
