"""``ALTER TABLE t REPLACE COLUMNS (...)``: the table's schema becomes the statement's column list,
as far as Delta's ``AlterTableReplaceColumnsDeltaCommand`` lets it.

Delta does not treat the list as a new schema. It compares the table's schema with it by
``SchemaUtils.canChangeDataType(failOnAmbiguousChanges = true)`` and then merges them with
``SchemaUtils.changeDataType``; this module ports both.

What is allowed, at every struct level (top-level columns, struct fields, structs inside array
elements and map keys / values), fields matched by name case-insensitively (Spark's default
resolver):
- reordering: the new order is the statement's;
- adding fields: a new field must be nullable (a top-level column always is: Spark's parser
  refuses NOT NULL there; a nested one is refused with "adding non-nullable column s.x"); it is
  taken as written, comment included;
- dropping fields, only under column mapping (``name`` / ``id``: the data stays in the files,
  unread), and never in the same struct that also gains a field (ambiguous: a rename, or a drop
  and an add? DELTA_AMBIGUOUS_DATA_TYPE_CHANGE). Without column mapping: "dropping column(s) [..]";
- loosening nullability (a NOT NULL column or field becomes nullable; an array's ``containsNull``
  / a map's ``valueContainsNull`` keep the table's value, as changeDataType keeps them); tightening
  is refused;
- a comment: a matched field takes the statement's comment, and keeps its own when the statement
  gives none (REPLACE COLUMNS never removes a comment, nor any other metadata: column mapping ids,
  defaults, generation expressions, ``delta.typeChanges`` stay);
- types: equal, or, on a table with type widening enabled, a widening the protocol lists (recorded
  in ``delta.typeChanges``, as Delta's ``TypeWideningMetadata``); anything else is "changing data
  type of c from IntegerType to LongType";
- a case-only rename does nothing: the matched field keeps the table's spelling.

Every "Cannot change data type" reason is raised as Delta wraps it,
DELTA_UNSUPPORTED_ALTER_TABLE_REPLACE_COL_OP (:class:`UnsupportedFeatureError`). A table with an
identity column is refused first (DELTA_IDENTITY_COLUMNS_REPLACE_COLUMN_NOT_SUPPORTED); names
repeated at one level (DELTA_DUPLICATE_COLUMNS_FOUND) and, without column mapping, names with
`` ,;{}()\\n\\t=`` (DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES) are refused as Delta's checks after the
merge do. Delta's commit then fails for a dropped partition column (its partition schema cannot be
built), for a generation expression reading a dropped column (validateGeneratedColumns) and for a
dropped column ``delta.dataSkippingStatsColumns`` lists (validateDeltaStatsColumns), and its
updateMetadata for a Change Data Feed column name on a table with the feed on; those are refused
here by name. Beyond Delta, as dvengine's DROP COLUMN and ALTER COLUMN TYPE do, it
refuses dropping a clustering column, and dropping or widening a column a CHECK constraint or a
generation expression reads, or widening a partition column or inside an array / map (Delta's
REPLACE COLUMNS commits those; see spec_notes/schema-evolution.md).

One commit: a new ``metaData`` (new fields get column mapping ids and physical names), no file
action, operation ``REPLACE COLUMNS`` with ``columns`` = the statement's columns as Delta's
``structFieldToMap`` (the list as written, not the merged schema).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dvengine.commit.commit_info import delta_json
from dvengine.commit.conf import ConfLookup
from dvengine.errors import InvalidArgumentError, OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance.clustering import clustering_columns
from dvengine.maintenance.column_changes import check_dependents, commit_schema_change
from dvengine.maintenance.column_log import column_path_name, field_description
from dvengine.protocol import type_widening
from dvengine.protocol.features import ENABLE_CHANGE_DATA_FEED, check_writable
from dvengine.protocol.schema import ArrayType, DataType, DecimalType, MapType, StructField, StructType
from dvengine.writing.generated import check_generation_expressions
from dvengine.writing.identity import is_identity
from dvengine.writing.schema_merge import assign_column_mapping

Path = tuple[str, ...]

STATS_COLUMNS_KEY = "delta.dataSkippingStatsColumns"
_CHANGE_DATA_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
# Characters Parquet (and so Delta without column mapping) refuses in a column name (SchemaUtils.findInvalidColumnNames).
_BAD_NAME_CHARACTERS = " ,;{}()\n\t="

_SCALA_NAMES = {
    "integer": "IntegerType", "long": "LongType", "short": "ShortType", "byte": "ByteType", "float": "FloatType",
    "double": "DoubleType", "string": "StringType", "binary": "BinaryType", "boolean": "BooleanType",
    "date": "DateType", "timestamp": "TimestampType", "timestamp_ntz": "TimestampNTZType", "void": "NullType",
}


@dataclass(frozen=True)
class ReplacedColumn:
    """One column of the statement's list: a top-level name, its type, its comment (always nullable)."""

    name: str
    data_type: DataType
    comment: str | None = None

    def field(self) -> StructField:
        return StructField(self.name, self.data_type, True, {} if self.comment is None else {"comment": self.comment})


class _CannotChange(Exception):
    """A reason of Delta's canChangeDataType (DELTA_CANNOT_CHANGE_DATA_TYPE / DELTA_AMBIGUOUS_DATA_TYPE_CHANGE)."""


def scala_type_name(data_type: DataType) -> str:
    """A type as Spark's ``DataType.toString`` prints it in Delta's messages (``IntegerType``)."""
    if isinstance(data_type, DecimalType):
        return f"DecimalType({data_type.precision},{data_type.scale})"
    if isinstance(data_type, ArrayType):
        return f"ArrayType({scala_type_name(data_type.element_type)},{str(data_type.contains_null).lower()})"
    if isinstance(data_type, MapType):
        return (f"MapType({scala_type_name(data_type.key_type)},{scala_type_name(data_type.value_type)},"
                f"{str(data_type.value_contains_null).lower()})")
    if isinstance(data_type, StructType):
        inner = ",".join(f"StructField({f.name},{scala_type_name(f.type)},{str(f.nullable).lower()})"
                         for f in data_type.fields)
        return f"StructType({inner})"
    return _SCALA_NAMES.get(data_type.name, data_type.name)


def _is_atomic(data_type: DataType) -> bool:
    return not isinstance(data_type, (StructType, ArrayType, MapType))


def _nullability(was: bool, now: bool, path: Path) -> None:
    if was and not now:
        raise _CannotChange(f"Cannot change data type: tightening nullability of {column_path_name(path)}")


def _check(old: DataType, new: DataType, path: Path, mapped: bool, widening: bool) -> None:
    """canChangeDataType's ``check``: raises the first reason, depth first in the new order."""
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        _nullability(old.contains_null, new.contains_null, path)
        _check(old.element_type, new.element_type, (*path, "element"), mapped, widening)
    elif isinstance(old, MapType) and isinstance(new, MapType):
        _nullability(old.value_contains_null, new.value_contains_null, path)
        _check(old.key_type, new.key_type, (*path, "key"), mapped, widening)
        _check(old.value_type, new.value_type, (*path, "value"), mapped, widening)
    elif isinstance(old, StructType) and isinstance(new, StructType):
        _check_struct(old, new, path, mapped, widening)
    elif old == new or old.name == "void":  # NullType may become anything
        return
    elif widening and _is_atomic(old) and _is_atomic(new):
        if not type_widening.is_type_change_supported(old, new):
            raise _CannotChange(f"Cannot change data type: changing data type of {column_path_name(path)} from "
                                f"{scala_type_name(old)} to {scala_type_name(new)}")
    else:
        raise _CannotChange(f"Cannot change data type: changing data type of {column_path_name(path)} from "
                            f"{scala_type_name(old)} to {scala_type_name(new)}")


def _check_struct(old: StructType, new: StructType, path: Path, mapped: bool, widening: bool) -> None:
    remaining = list(old.fields)
    adding = False
    for to in new.fields:
        found = _match(old, to.name)
        if found is None:
            adding = True
            if not to.nullable:
                raise _CannotChange(f"Cannot change data type: adding non-nullable column {column_path_name((*path, to.name))}")
            continue
        remaining = [f for f in remaining if f is not found]
        at = (*path, found.name)
        _nullability(found.nullable, to.nullable, at)
        _check(found.type, to.type, at, mapped, widening)
    if remaining and adding:
        added = [column_path_name((*path, t.name)) for t in new.fields if _match(old, t.name) is None]
        raise _CannotChange(
            f"Cannot change data type of {column_path_name(path)} from {old.simple_string()} to {new.simple_string()}. "
            "This change contains column removals and additions, therefore they are ambiguous. Please make these "
            "changes individually using ALTER TABLE [ADD | DROP | RENAME] COLUMN (Delta's DELTA_AMBIGUOUS_DATA_TYPE_CHANGE:"
            f" {[column_path_name((*path, f.name)) for f in remaining]} would be dropped and {added} added)"
        )
    if remaining and not mapped:
        where = f" from {column_path_name(path)}" if path else ""
        raise _CannotChange(f"Cannot change data type: dropping column(s) [{', '.join(f.name for f in remaining)}]{where}")


def _match(struct: StructType, name: str) -> StructField | None:
    return next((f for f in struct.fields if f.name.lower() == name.lower()), None)


def merged_type(old: DataType, new: DataType) -> DataType:
    """SchemaUtils.changeDataType: the statement's shape, each matched field the table's own (name,
    metadata) with the statement's type (merged), nullability and, if given, comment."""
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return ArrayType(merged_type(old.element_type, new.element_type), old.contains_null)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return MapType(merged_type(old.key_type, new.key_type), merged_type(old.value_type, new.value_type),
                       old.value_contains_null)
    if isinstance(old, StructType) and isinstance(new, StructType):
        fields = []
        for to in new.fields:
            found = _match(old, to.name)
            if found is None:
                fields.append(to)
                continue
            metadata = dict(found.metadata)
            if "comment" in to.metadata:
                metadata["comment"] = to.metadata["comment"]
            fields.append(StructField(found.name, merged_type(found.type, to.type), to.nullable, metadata))
        return StructType(tuple(fields))
    return new


def _dropped(old: DataType, new: DataType, path: Path) -> list[Path]:
    """The struct fields of ``old`` the merge leaves out (their paths, through element / key / value)."""
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _dropped(old.element_type, new.element_type, (*path, "element"))
    if isinstance(old, MapType) and isinstance(new, MapType):
        return (_dropped(old.key_type, new.key_type, (*path, "key"))
                + _dropped(old.value_type, new.value_type, (*path, "value")))
    if not (isinstance(old, StructType) and isinstance(new, StructType)):
        return []
    out: list[Path] = []
    for f in old.fields:
        kept = _match(new, f.name)
        out.extend([(*path, f.name)] if kept is None else _dropped(f.type, kept.type, (*path, f.name)))
    return out


def _retyped(old: DataType, new: DataType, path: Path, in_collection: bool = False) -> list[tuple[Path, bool]]:
    """The atomic fields whose type the merge changes: (path, whether inside an array / map)."""
    if isinstance(old, ArrayType) and isinstance(new, ArrayType):
        return _retyped(old.element_type, new.element_type, (*path, "element"), True)
    if isinstance(old, MapType) and isinstance(new, MapType):
        return (_retyped(old.key_type, new.key_type, (*path, "key"), True)
                + _retyped(old.value_type, new.value_type, (*path, "value"), True))
    if isinstance(old, StructType) and isinstance(new, StructType):
        out: list[tuple[Path, bool]] = []
        for f in old.fields:
            kept = _match(new, f.name)
            if kept is not None:
                out.extend(_retyped(f.type, kept.type, (*path, f.name), in_collection))
        return out
    return [] if old == new else [(path, in_collection)]


def _duplicates(data_type: DataType, path: Path) -> list[str]:
    """Names repeated (case-insensitively) within one struct, anywhere in ``data_type``."""
    out: list[str] = []
    if isinstance(data_type, StructType):
        seen: set[str] = set()
        for f in data_type.fields:
            if f.name.lower() in seen:
                out.append(column_path_name((*path, f.name)))
            seen.add(f.name.lower())
            out.extend(_duplicates(f.type, (*path, f.name)))
    elif isinstance(data_type, ArrayType):
        out.extend(_duplicates(data_type.element_type, (*path, "element")))
    elif isinstance(data_type, MapType):
        out.extend(_duplicates(data_type.key_type, (*path, "key")) + _duplicates(data_type.value_type, (*path, "value")))
    return out


def _bad_names(data_type: DataType, path: Path) -> list[str]:
    if isinstance(data_type, StructType):
        out: list[str] = []
        for f in data_type.fields:
            if any(c in f.name for c in _BAD_NAME_CHARACTERS):
                out.append(column_path_name((*path, f.name)))
            out.extend(_bad_names(f.type, (*path, f.name)))
        return out
    if isinstance(data_type, ArrayType):
        return _bad_names(data_type.element_type, path)
    if isinstance(data_type, MapType):
        return _bad_names(data_type.key_type, path) + _bad_names(data_type.value_type, path)
    return []


def _check_new_schema(snapshot: Snapshot, schema: StructType, table: str) -> None:
    """Delta's checks after the merge: duplicate names, Parquet-safe names without column mapping."""
    duplicates = _duplicates(schema, ())
    if duplicates:
        raise InvalidArgumentError(
            f"REPLACE COLUMNS on table {table}: Found duplicate column(s): {', '.join(duplicates)}. The duplicate was "
            "found while replacing columns (Delta's DELTA_DUPLICATE_COLUMNS_FOUND); nothing was changed"
        )
    if snapshot.column_mapping_mode == "none":
        bad = _bad_names(schema, ())
        if bad:
            raise InvalidArgumentError(
                f"REPLACE COLUMNS on table {table}: Found invalid character(s) among ' ,;{{}}()\\n\\t=' in the column "
                f"names of your schema. Invalid column names: {', '.join(bad)} (Delta's "
                "DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES; column mapping allows them); nothing was changed"
            )


def _name_parts(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside backquotes, each part stripped (backquotes kept)."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char == separator and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


def _has_path(schema: StructType, path: Sequence[str]) -> bool:
    current: DataType = schema
    for name in path:
        found = _match(current, name) if isinstance(current, StructType) else None
        if found is None:
            return False
        current = found.type
    return True


def _check_stats_columns(snapshot: Snapshot, schema: StructType, table: str) -> None:
    """Delta's updateMetadata validates ``delta.dataSkippingStatsColumns`` against the new schema
    (StatisticsCollection.validateDeltaStatsColumns): a listed column the list leaves out fails it."""
    listed = snapshot.metadata.configuration.get(STATS_COLUMNS_KEY)
    if not listed or not listed.strip():
        return
    for item in _name_parts(listed, ","):
        path = [p.replace("``", "\0").replace("`", "").replace("\0", "`") for p in _name_parts(item, ".")]
        if item and not _has_path(schema, path):
            raise OperationNotAllowedError(
                f"REPLACE COLUMNS on table {table} leaves out {item}, which the table property {STATS_COLUMNS_KEY} "
                "lists (Delta's DELTA_COLUMN_NOT_FOUND_IN_SCHEMA); change the property first; nothing was changed"
            )


def _check_change_data_columns(snapshot: Snapshot, schema: StructType, table: str) -> None:
    """Delta's updateMetadata (CDCReader.checkMetadataChange): with the change data feed on, no
    top-level column may take a name the feed's rows carry."""
    if snapshot.metadata.configuration.get(ENABLE_CHANGE_DATA_FEED, "false").strip().lower() != "true":
        return
    reserved = [f.name for f in schema.fields if f.name in _CHANGE_DATA_COLUMNS]
    if reserved:
        raise OperationNotAllowedError(
            f"REPLACE COLUMNS on table {table}: column(s) {reserved} are reserved for the Change Data Feed's metadata "
            f"(Delta's RESERVED_CDC_COLUMNS_ON_WRITE); rename them or set {ENABLE_CHANGE_DATA_FEED} to false; "
            "nothing was changed"
        )


def _check_dropped(snapshot: Snapshot, dropped: Sequence[Path], table: str) -> None:
    top = {p[0].lower() for p in dropped if len(p) == 1}
    for what, names, code in (
        ("partition", snapshot.metadata.partition_columns, "Delta's commit then cannot build the partition schema"),
        ("clustering", clustering_columns(snapshot), "dvengine's rule, as DROP COLUMN's DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN"),
    ):
        hit = [n for n in names if n.lower() in top]
        if hit:
            raise UnsupportedFeatureError(
                f"REPLACE COLUMNS on table {table} leaves out {what} column(s) {hit} ({code}); keep them in the "
                "list; nothing was changed"
            )
    for path in dropped:
        check_dependents(snapshot, path, "REPLACE COLUMNS dropping")


def _check_retyped(snapshot: Snapshot, retyped: Sequence[tuple[Path, bool]], table: str) -> None:
    partitions = {p.lower() for p in snapshot.metadata.partition_columns}
    for path, in_collection in retyped:
        shown = column_path_name(path)
        if in_collection:
            raise UnsupportedFeatureError(
                f"REPLACE COLUMNS on table {table}: widening {shown} is not supported yet: dvengine widens top-level "
                "columns and struct fields, not map keys / values or array elements (Delta does); nothing was changed"
            )
        if len(path) == 1 and path[0].lower() in partitions:
            raise UnsupportedFeatureError(
                f"REPLACE COLUMNS on table {table}: {shown} is a partition column, whose type dvengine does not widen "
                "(as ALTER COLUMN TYPE); nothing was changed"
            )
        check_dependents(snapshot, path, "REPLACE COLUMNS widening")


def replace_columns(table_root: str, columns: Sequence[ReplacedColumn], conf: ConfLookup | None = None) -> int:
    """``ALTER TABLE t REPLACE COLUMNS (...)``: one metadata-only ``REPLACE COLUMNS`` commit; returns its version.
    ``conf``: the session's conf, which the commit reads (its NOT NULL check of arrays and maps)."""
    if not columns:
        raise InvalidArgumentError("REPLACE COLUMNS needs at least one column")
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    old = snapshot.schema
    given = [c.field() for c in columns]
    names = [f.name.lower() for f in given]
    repeated = sorted({f.name for i, f in enumerate(given) if f.name.lower() in names[:i]})
    if repeated:  # Spark's analyzer, before Delta sees the list
        raise InvalidArgumentError(
            f"REPLACE COLUMNS on table {table_root}: column(s) {repeated} given more than once (Spark's "
            "COLUMN_ALREADY_EXISTS); nothing was changed"
        )
    identity = [f.name for f in old.fields if is_identity(f)]
    if identity:
        raise UnsupportedFeatureError(
            f"ALTER TABLE REPLACE COLUMNS is not supported for table with IDENTITY columns (table {table_root}, "
            f"identity column(s) {identity}; Delta's DELTA_IDENTITY_COLUMNS_REPLACE_COLUMN_NOT_SUPPORTED); nothing was changed"
        )
    new = StructType(tuple(given))
    mapped = snapshot.column_mapping_mode != "none"
    try:
        _check(old, new, (), mapped, type_widening.is_enabled(snapshot.protocol, snapshot.metadata))
    except _CannotChange as reason:
        raise UnsupportedFeatureError(
            f"Unsupported ALTER TABLE REPLACE COLUMNS operation on table {table_root}. Reason: {reason} (Delta's "
            f"DELTA_UNSUPPORTED_ALTER_TABLE_REPLACE_COL_OP). Failed to change schema from: {old.simple_string()} to: "
            f"{new.simple_string()}; nothing was changed"
        ) from None
    merged = merged_type(old, new)
    assert isinstance(merged, StructType)
    _check_new_schema(snapshot, merged, table_root)
    _check_dropped(snapshot, _dropped(old, merged, ()), table_root)
    _check_stats_columns(snapshot, merged, table_root)
    _check_change_data_columns(snapshot, merged, table_root)
    _check_retyped(snapshot, _retyped(old, merged, ()), table_root)
    check_generation_expressions(merged)
    schema, configuration = assign_column_mapping(type_widening.record_type_changes(old, merged),
                                                  snapshot.metadata.configuration)
    params = {"columns": delta_json([field_description((f.name,), f) for f in given])}  # DeltaOperations.ReplaceColumns
    return commit_schema_change(snapshot, schema, "REPLACE COLUMNS", params, configuration=configuration, conf=conf)

