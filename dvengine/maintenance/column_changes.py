"""ALTER TABLE column changes that touch only the schema: ADD COLUMNS, RENAME COLUMN, DROP COLUMNS,
ALTER COLUMN SET / DROP DEFAULT, ALTER COLUMN SET / DROP NOT NULL, ALTER COLUMN COMMENT / FIRST /
AFTER and Hive-style CHANGE COLUMN.

Each is one commit carrying a new ``metaData`` and no file actions, as Delta's
``AlterTable{AddColumns,DropColumns,ChangeColumn}DeltaCommand`` do; no data file is read or written.

- RENAME / DROP need column mapping (PROTOCOL.md "Column Mapping": readers find a column's data by
  its physical name or id, so the logical name can change and a dropped column's data can stay in
  the files, unread). On a table without it Delta refuses them (DELTA_UNSUPPORTED_RENAME_COLUMN /
  DELTA_UNSUPPORTED_DROP_COLUMN): files are read by logical name there, so a rename would orphan
  the data. The field keeps its id and physical name; ``partitionColumns`` follows a renamed
  partition column. Dropping a partition column (DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN) or a
  clustering column is refused, and so is renaming or dropping a column a CHECK constraint or a
  generation expression reads (DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE /
  DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE): Delta does not rewrite those expressions.
- ADD COLUMNS: nullable columns only, also inside the added type ("NOT NULL in ALTER TABLE ADD
  COLUMNS" is not supported by Delta: old rows have no value), no DEFAULT (WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED),
  at the end or at ``FIRST`` / ``AFTER c``, inside a struct by a dotted path. Under column mapping
  each new field gets the next id and a ``col-<uuid>`` physical name.
- SET DEFAULT stores the expression text in ``CURRENT_DEFAULT`` (existing rows are unchanged;
  later inserts fill it); it needs the ``allowColumnDefaults`` feature
  (WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED) and may read no column. DROP DEFAULT
  removes the key.
- DROP NOT NULL makes a column, a nested struct field (also one inside an array element or a map
  value, ``a.element.x``) or an array element / map value that already allows NULL nullable. SET
  NOT NULL is refused on a column that allows NULL, whatever its rows hold (Spark's analyzer:
  "Cannot change nullable column to non-nullable"; Delta's command would refuse it too, with
  DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP): no row is checked. On a NOT NULL column both are
  accepted and commit the schema unchanged, as Delta does. A map key stays NOT NULL and an array
  element / map value keeps its nullability (DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP); identity
  columns are refused (DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED). Partition columns are
  not special (Delta does not refuse them).
- COMMENT sets the field's ``comment`` metadata (a map key / value or array element cannot have one:
  DELTA_UNSUPPORTED_COMMENT_MAP_ARRAY); FIRST / AFTER x moves the field among its struct's fields
  (Delta's reorderFieldList: AFTER itself keeps it in place; partition, identity and generated
  columns move too). Hive-style CHANGE COLUMN c c type: the column's own type changes nothing (Spark
  drops it), another atomic type is a type widening under ALTER COLUMN TYPE's rules, in the same
  commit; a struct / map / array type that differs is refused, as Spark's analyzer does.

Every refusal is a typed error naming the column, raised before anything is written. Each commit
checks the whole new schema for NOT NULL nested inside arrays or maps (the transaction's check,
:mod:`dvengine.protocol.nested_not_null`), as Delta's ``updateMetadata`` does for any schema change:
on a table another engine wrote with such flags, a column change is refused unless it removes them
(DROP NOT NULL) or ``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled`` is set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import (
    InvalidArgumentError,
    InvalidPredicateError,
    OperationNotAllowedError,
    UnsupportedFeatureError,
)
from dvengine.expressions import parse_value_expression
from dvengine.log import Snapshot, load_snapshot
from dvengine.maintenance.clustering import clustering_columns
from dvengine.maintenance.column_log import change_column_parameters, column_path_name, field_description
from dvengine.maintenance.column_type import check_atomic, check_type_change, widened_field
from dvengine.protocol.features import check_writable, writer_features
from dvengine.protocol.schema import ArrayType, DataType, MapType, StructField, StructType
from dvengine.writing.constraints import CONSTRAINT_PREFIX
from dvengine.writing.defaults import ALLOW_COLUMN_DEFAULTS, CURRENT_DEFAULT
from dvengine.writing.generated import GENERATION_EXPRESSION, generation_expressions
from dvengine.writing.identity import is_identity
from dvengine.writing.schema_merge import assign_column_mapping, protocol_for_schema

Path = tuple[str, ...]


@dataclass(frozen=True)
class NewColumn:
    """One column of ALTER TABLE ADD COLUMNS: ``path`` is the parent struct's path plus the new name."""

    path: Path
    data_type: DataType
    nullable: bool = True
    comment: str | None = None
    default: str | None = None
    position: str | None = None  # None (at the end), "FIRST" or "AFTER <name>"


def _show(path: Sequence[str]) -> str:
    return ".".join(path)


def _find(struct: StructType, path: Sequence[str], table: str) -> list[int]:
    """Indexes (case-insensitive, as Spark's resolver) of the fields along ``path``; the parents must be structs."""
    indexes: list[int] = []
    current: DataType = struct
    for depth, name in enumerate(path):
        if not isinstance(current, StructType):
            raise InvalidArgumentError(
                f"column {_show(path)!r}: {_show(path[:depth])!r} is not a struct in table {table}; nothing was changed"
            )
        matches = [i for i, f in enumerate(current.fields) if f.name.lower() == name.lower()]
        if not matches:
            raise InvalidArgumentError(f"table {table} has no column {_show(path)!r}; nothing was changed")
        indexes.append(matches[0])
        current = current.fields[matches[0]].type
    return indexes


def _replace_at(struct: StructType, indexes: Sequence[int], change: Any) -> StructType:
    """``struct`` with the field list of the struct holding ``indexes[-1]`` passed through
    ``change(fields, index) -> fields``."""
    fields = list(struct.fields)
    if len(indexes) == 1:
        return StructType(tuple(change(fields, indexes[0])))
    inner = fields[indexes[0]]
    assert isinstance(inner.type, StructType)
    fields[indexes[0]] = dataclasses.replace(inner, type=_replace_at(inner.type, indexes[1:], change))
    return StructType(tuple(fields))


def _references(sql: str) -> list[Path]:
    """The column paths an expression reads (lower case), from sqlglot's Spark parse; a text it
    cannot parse reads everything (the caller then refuses conservatively)."""
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except ParseError:
        return [("*",)]
    out: list[Path] = []
    for column in tree.find_all(exp.Column):
        out.append(tuple(part.name.lower() for part in column.parts))
    for dot in tree.find_all(exp.Dot):  # struct access written a.b.c parses as Dot over Column
        names = [n.name.lower() for n in dot.find_all(exp.Identifier)]
        if names:
            out.append(tuple(names))
    return out


def _depends(reads: list[Path], column: Path) -> bool:
    """Whether an expression reading ``reads`` depends on ``column``: it reads the column, a field
    inside it, or the struct holding it."""
    target = tuple(p.lower() for p in column)
    for ref in reads:
        if ref == ("*",):
            return True
        n = min(len(ref), len(target))
        if ref[:n] == target[:n]:
            return True
    return False


def check_dependents(snapshot: Snapshot, column: Path, what: str) -> None:
    """Delta's checkDependentExpressions: no CHECK constraint and no generation expression may read it."""
    configuration = snapshot.metadata.configuration
    constraints = {k[len(CONSTRAINT_PREFIX):]: v for k, v in configuration.items() if k.startswith(CONSTRAINT_PREFIX)}
    found = {name: sql for name, sql in constraints.items() if _depends(_references(sql), column)}
    if found:
        shown = "; ".join(f"{n}: {s}" for n, s in sorted(found.items()))
        raise OperationNotAllowedError(
            f"{what} {_show(column)!r}: CHECK constraint(s) read the column ({shown}); drop them first "
            "(Delta's DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE); nothing was changed"
        )
    generated = {
        name: sql for name, sql in generation_expressions(snapshot.schema).items()
        if name.lower() != column[0].lower() or len(column) > 1
        if _depends(_references(sql), column)
    }
    if generated:
        shown = "; ".join(f"{n}: {s}" for n, s in generated.items())
        raise OperationNotAllowedError(
            f"{what} {_show(column)!r}: generated column(s) read the column ({shown}) "
            "(Delta's DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE); nothing was changed"
        )


def commit_schema_change(snapshot: Snapshot, schema: StructType, operation: str, params: Mapping[str, ParameterValue],
            partition_columns: Sequence[str] | None = None, configuration: dict[str, str] | None = None,
            conf: ConfLookup | None = None) -> int:
    """One metaData (and, if the schema needs it, protocol) action; a concurrent metadata change
    conflicts. ``conf``: the session's conf, which the commit reads (its check of NOT NULL nested
    in arrays and maps covers the whole new schema, as Delta's)."""
    metadata = dataclasses.replace(
        snapshot.metadata,
        schema_string=schema.to_json_string(),
        partition_columns=tuple(partition_columns) if partition_columns is not None else snapshot.metadata.partition_columns,
        configuration=configuration if configuration is not None else snapshot.metadata.configuration,
    )
    txn = Transaction(snapshot.table_root, snapshot, operation, params, conf=conf)
    txn.record_read([], None)
    txn.update_metadata(metadata)
    protocol = protocol_for_schema(snapshot.protocol, schema)
    if protocol is not None:
        txn.update_protocol(protocol)
    return txn.commit()


def _mapped_snapshot(table_root: str, what: str, code: str) -> Snapshot:
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    if snapshot.column_mapping_mode == "none":
        raise UnsupportedFeatureError(
            f"{what} is not supported for table {table_root}: it has no column mapping (Delta's {code}). Enable it "
            "with ALTER TABLE ... SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name'); nothing was changed"
        )
    return snapshot


def rename_column(table_root: str, column: Sequence[str], new_name: str, conf: ConfLookup | None = None) -> int:
    """``ALTER TABLE t RENAME COLUMN a.b TO c``: the field keeps its id and physical name."""
    path = tuple(column)
    snapshot = _mapped_snapshot(table_root, f"RENAME COLUMN {_show(path)}", "DELTA_UNSUPPORTED_RENAME_COLUMN")
    indexes = _find(snapshot.schema, path, table_root)
    old = _field_at(snapshot.schema, indexes)
    if not new_name or not new_name.strip():
        raise InvalidArgumentError(f"RENAME COLUMN {_show(path)!r}: the new name is empty; nothing was changed")
    if new_name == old.name:
        raise InvalidArgumentError(f"RENAME COLUMN {_show(path)!r}: the new name is the old one; nothing was changed")
    siblings = _parent_fields(snapshot.schema, indexes)
    if any(f.name.lower() == new_name.lower() and f is not old for f in siblings):
        raise InvalidArgumentError(
            f"RENAME COLUMN {_show(path)!r} TO {new_name!r}: a column named {new_name!r} already exists in table "
            f"{table_root} (Delta's DELTA_DUPLICATE_COLUMNS_FOUND); nothing was changed"
        )
    check_dependents(snapshot, path, "RENAME COLUMN")

    def rename(fields: list[StructField], i: int) -> list[StructField]:
        fields[i] = dataclasses.replace(fields[i], name=new_name)
        return fields

    schema = _replace_at(snapshot.schema, indexes, rename)
    partitions = snapshot.metadata.partition_columns
    if len(path) == 1:
        partitions = tuple(new_name if p.lower() == old.name.lower() else p for p in partitions)
    new_path = (*[p for p in _names_at(snapshot.schema, indexes[:-1])], new_name)
    # DeltaOperations.RenameColumn: both paths as UnresolvedAttribute names
    params = {"oldColumnPath": column_path_name(_names_at(snapshot.schema, indexes)), "newColumnPath": column_path_name(new_path)}
    return commit_schema_change(snapshot, schema, "RENAME COLUMN", params, partitions, conf=conf)


def drop_columns(
    table_root: str, columns: Sequence[Sequence[str]], if_exists: bool = False, conf: ConfLookup | None = None
) -> int | None:
    """``ALTER TABLE t DROP COLUMN[S] [IF EXISTS] a, b.c``: the data stays in the files, unread.
    Returns None when IF EXISTS found none of them (nothing committed)."""
    paths = [tuple(c) for c in columns]
    what = f"DROP COLUMN {', '.join(_show(p) for p in paths)}"
    snapshot = _mapped_snapshot(table_root, what, "DELTA_UNSUPPORTED_DROP_COLUMN")
    schema = snapshot.schema
    dropped: list[Path] = []
    for path in paths:
        try:
            indexes = _find(schema, path, table_root)
        except InvalidArgumentError:
            if if_exists:
                continue
            raise
        names = _names_at(schema, indexes)
        if len(path) == 1 and names[0] in snapshot.metadata.partition_columns:
            raise UnsupportedFeatureError(
                f"DROP COLUMN {names[0]!r}: it is a partition column of table {table_root} (Delta's "
                "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN); nothing was changed"
            )
        if len(path) == 1 and names[0] in clustering_columns(snapshot):
            raise UnsupportedFeatureError(
                f"DROP COLUMN {names[0]!r}: it is a clustering column of table {table_root} (Delta's "
                "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN); nothing was changed"
            )
        check_dependents(snapshot, path, "DROP COLUMN")
        if len(_parent_fields(schema, indexes)) == 1:
            raise InvalidArgumentError(
                f"DROP COLUMN {_show(path)!r}: it is the only field of its {'table' if len(path) == 1 else 'struct'} "
                f"(Delta's DELTA_DROP_COLUMN_ON_SINGLE_FIELD_SCHEMA); nothing was changed"
            )
        schema = _replace_at(schema, indexes, lambda fields, i: fields[:i] + fields[i + 1:])
        dropped.append(names)
    if not dropped:
        return None
    return commit_schema_change(snapshot, schema, "DROP COLUMNS", {"columns": delta_json([column_path_name(p) for p in dropped])}, conf=conf)


def add_columns(table_root: str, columns: Sequence[NewColumn], conf: ConfLookup | None = None) -> int:
    """``ALTER TABLE t ADD COLUMN[S] (...)``: nullable columns without DEFAULT, as Delta allows."""
    if not columns:
        raise InvalidArgumentError("ADD COLUMNS needs at least one column")
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    schema = snapshot.schema
    logged: list[dict[str, Any]] = []
    for column in columns:
        shown = _show(column.path)
        inner = _not_null_fields(column.data_type, ())
        if not column.nullable or inner:
            where = "" if not column.nullable else f" (on {_show(inner[0])} inside it)"
            raise UnsupportedFeatureError(
                f"ADD COLUMNS {shown!r}{where}: NOT NULL in ALTER TABLE ADD COLUMNS is not supported by Delta (existing "
                "rows have no value); nothing was changed"
            )
        if column.default is not None:
            raise UnsupportedFeatureError(
                f"ADD COLUMNS {shown!r}: DEFAULT values are not supported when adding columns to an existing Delta table "
                "(Delta's WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED); add the column, then "
                "ALTER COLUMN ... SET DEFAULT; nothing was changed"
            )
        parent = column.path[:-1]
        parent_indexes = _find(schema, parent, table_root) if parent else []
        if parent and not isinstance(_field_at(schema, parent_indexes).type, StructType):
            raise InvalidArgumentError(f"ADD COLUMNS {shown!r}: {_show(parent)!r} is not a struct; nothing was changed")
        siblings = _child_fields(schema, parent_indexes)
        name = column.path[-1]
        if any(f.name.lower() == name.lower() for f in siblings):
            raise InvalidArgumentError(
                f"ADD COLUMNS {shown!r}: table {table_root} already has that column (Delta's "
                "DELTA_DUPLICATE_COLUMNS_FOUND); nothing was changed"
            )
        metadata: dict[str, Any] = {} if column.comment is None else {"comment": column.comment}
        new_field = StructField(name, column.data_type, True, metadata)
        at = _position(siblings, column.position, shown, table_root)
        fields = (*siblings[:at], new_field, *siblings[at:])
        schema = _with_child_fields(schema, parent_indexes, fields)
        entry: dict[str, Any] = {"column": field_description(column.path, new_field)}  # DeltaOperations.AddColumns
        if column.position is not None:
            entry["position"] = column.position.upper() if column.position.upper() == "FIRST" else column.position
        logged.append(entry)
    schema, configuration = assign_column_mapping(schema, snapshot.metadata.configuration)
    return commit_schema_change(snapshot, schema, "ADD COLUMNS", {"columns": delta_json(logged)}, configuration=configuration, conf=conf)


def _not_null_fields(data_type: DataType, path: Path) -> list[Path]:
    """The NOT NULL struct fields anywhere inside ``data_type`` (through structs, array elements and
    map keys / values; a collection's own ``containsNull`` is not a field): what Delta's
    ``AlterTableAddColumnsDeltaCommand`` refuses with ``SchemaUtils.filterRecursively(checkComplexTypes
    = true)(!_.nullable)`` before anything else, so an added ``s struct<x: int NOT NULL>`` is refused too."""
    if isinstance(data_type, StructType):
        found: list[Path] = []
        for f in data_type.fields:
            found.extend([] if f.nullable else [(*path, f.name)])
            found.extend(_not_null_fields(f.type, (*path, f.name)))
        return found
    if isinstance(data_type, ArrayType):
        return _not_null_fields(data_type.element_type, (*path, "element"))
    if isinstance(data_type, MapType):
        return _not_null_fields(data_type.key_type, (*path, "key")) + _not_null_fields(data_type.value_type, (*path, "value"))
    return []


def set_column_default(table_root: str, column: Sequence[str], default: str | None, conf: ConfLookup | None = None) -> int:
    """``ALTER TABLE t ALTER COLUMN c SET DEFAULT expr`` (``default`` as written) or ``DROP DEFAULT`` (None)."""
    path = tuple(column)
    shown = _show(path)
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    indexes = _find(snapshot.schema, path, table_root)
    field = _field_at(snapshot.schema, indexes)
    if default is not None:
        if ALLOW_COLUMN_DEFAULTS not in writer_features(snapshot.protocol):
            raise OperationNotAllowedError(
                f"ALTER COLUMN {shown!r} SET DEFAULT: table {table_root} does not support the table feature "
                f"{ALLOW_COLUMN_DEFAULTS} (Delta's WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED); run ALTER TABLE "
                "... SET TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported') first; nothing was changed"
            )
        if len(path) > 1:
            raise UnsupportedFeatureError(
                f"ALTER COLUMN {shown!r} SET DEFAULT: defaults are for top-level columns (Spark keeps them on table "
                "columns); nothing was changed"
            )
        if GENERATION_EXPRESSION in field.metadata or is_identity(field):
            raise InvalidArgumentError(
                f"ALTER COLUMN {shown!r} SET DEFAULT: the column is a generated or identity column, whose value the "
                "table computes; nothing was changed"
            )
        try:
            parse_value_expression(default, StructType(()))
        except InvalidPredicateError as exc:
            raise type(exc)(
                f"ALTER COLUMN {shown!r} SET DEFAULT {default}: {exc} (a DEFAULT value may not read columns); "
                "nothing was changed"
            ) from exc
        metadata = {**field.metadata, CURRENT_DEFAULT: default}
    else:
        metadata = {k: v for k, v in field.metadata.items() if k != CURRENT_DEFAULT}
    changed = dataclasses.replace(field, metadata=metadata)

    def put(fields: list[StructField], i: int) -> list[StructField]:
        fields[i] = changed
        return fields

    schema = _replace_at(snapshot.schema, indexes, put)
    return commit_schema_change(snapshot, schema, "CHANGE COLUMN", change_column_parameters(_names_at(snapshot.schema, indexes), changed),
                   conf=conf)


@dataclass(frozen=True)
class _Target:
    """What an ALTER COLUMN path resolved to: the field as it was (a map key, map value or array
    element as a field of that name), its path as the schema spells it, and whether it is one of those."""

    old: StructField
    path: Path
    in_collection: bool


StructEdit = Callable[[list[StructField], int, Path], list[StructField]]
PartEdit = Callable[[StructField, Path], StructField]


def _edit_at(data_type: DataType, path: Path, in_struct: StructEdit, in_part: PartEdit, done: Path, what: str,
             table: str) -> tuple[DataType, _Target]:
    """``data_type`` with the field at ``path`` (relative to it) edited, and what was found. Paths
    resolve as Spark's ``findNestedField(includeCollections = true)``: struct fields
    case-insensitively; ``key`` / ``value`` / ``element`` (exactly so) step into a map or an array,
    which must then hold a struct if the path goes on.

    A struct field is edited by ``in_struct(fields, index, path)``, which returns the holding
    struct's new field list (so it may also move the field); a map key / value or an array element
    by ``in_part(old, path)`` on a field of that name (a key is never nullable), whose returned
    type and nullability are put back (a key's nullability is not)."""
    name, rest = path[0], path[1:]
    if isinstance(data_type, StructType):
        matches = [i for i, f in enumerate(data_type.fields) if f.name.lower() == name.lower()]
        if not matches:
            raise InvalidArgumentError(f"{what}: table {table} has no column {_show((*done, *path))!r}; nothing was changed")
        i = matches[0]
        old = data_type.fields[i]
        fields = list(data_type.fields)
        if rest:
            inner, target = _edit_at(old.type, rest, in_struct, in_part, (*done, old.name), what, table)
            fields[i] = dataclasses.replace(old, type=inner)
        else:
            target = _Target(old, (*done, old.name), False)
            fields = in_struct(fields, i, target.path)
        return StructType(tuple(fields)), target
    here = (*done, name)
    if isinstance(data_type, MapType) and name in ("key", "value"):
        holds = data_type.key_type if name == "key" else data_type.value_type
        if rest:
            inner, target = _edit_at(_struct_in(holds, here, rest, what, table), rest, in_struct, in_part, here, what,
                                     table)
            key, value = (inner, data_type.value_type) if name == "key" else (data_type.key_type, inner)
            return dataclasses.replace(data_type, key_type=key, value_type=value), target
        old = StructField(name, holds, name == "value" and data_type.value_contains_null)
        new = in_part(old, here)
        if name == "key":
            changed = dataclasses.replace(data_type, key_type=new.type)
        else:
            changed = dataclasses.replace(data_type, value_type=new.type, value_contains_null=new.nullable)
        return changed, _Target(old, here, True)
    if isinstance(data_type, ArrayType) and name == "element":
        if rest:
            inner, target = _edit_at(_struct_in(data_type.element_type, here, rest, what, table), rest, in_struct,
                                     in_part, here, what, table)
            return dataclasses.replace(data_type, element_type=inner), target
        old = StructField(name, data_type.element_type, data_type.contains_null)
        new = in_part(old, here)
        return dataclasses.replace(data_type, element_type=new.type, contains_null=new.nullable), _Target(old, here, True)
    raise InvalidArgumentError(
        f"{what}: table {table} has no column {_show((*done, *path))!r} ({_show(done)!r} has type "
        f"{data_type.simple_string()}: nested fields are reached through structs, and key / value / element through "
        "maps and arrays); nothing was changed"
    )


def _struct_in(data_type: DataType, here: Path, rest: Path, what: str, table: str) -> StructType:
    if not isinstance(data_type, StructType):
        raise InvalidArgumentError(
            f"{what}: table {table} has no column {_show((*here, *rest))!r} ({_show(here)!r} holds a "
            f"{data_type.simple_string()}, not a struct); nothing was changed"
        )
    return data_type


def set_column_nullability(table_root: str, column: Sequence[str], nullable: bool, conf: ConfLookup | None = None) -> int:
    """``ALTER TABLE t ALTER COLUMN c DROP NOT NULL`` (``nullable=True``) or ``SET NOT NULL`` (False):
    one metadata-only commit, operation ``CHANGE COLUMN``, as Delta's AlterTableChangeColumnDeltaCommand."""
    path = tuple(column)
    if not path:
        raise InvalidArgumentError("ALTER COLUMN ... NOT NULL needs a column")
    what = f"ALTER COLUMN {_show(path)} {'DROP' if nullable else 'SET'} NOT NULL"
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    def renull(fields: list[StructField], i: int, _path: Path) -> list[StructField]:
        fields[i] = dataclasses.replace(fields[i], nullable=nullable)
        return fields

    schema, target = _edit_at(snapshot.schema, path, renull, lambda old, _path: dataclasses.replace(old, nullable=nullable),
                              (), what, table_root)
    assert isinstance(schema, StructType)
    old, shown = target.old, column_path_name(target.path)
    if old.nullable and not nullable:
        raise UnsupportedFeatureError(
            f"{what}: cannot change nullable column to non-nullable: {shown} of table {table_root} (Spark's "
            "_LEGACY_ERROR_TEMP_2330: Delta adds no NOT NULL to an existing column, even one holding no NULL); "
            "nothing was changed"
        )
    if not target.in_collection and is_identity(old):
        raise UnsupportedFeatureError(
            f"{what}: ALTER TABLE ALTER COLUMN is not supported for IDENTITY columns ({shown} of table {table_root}, "
            "Delta's DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED); nothing was changed"
        )
    if target.in_collection and old.nullable != nullable:
        type_text = old.type.simple_string()
        raise UnsupportedFeatureError(
            f"{what}: ALTER TABLE CHANGE COLUMN is not supported for changing column {shown} of table {table_root} from "
            f"{type_text} NOT NULL to {type_text} (Delta's DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP: a map key is "
            "never nullable, and an array element's or map value's nullability does not change); nothing was changed"
        )
    return commit_schema_change(snapshot, schema, "CHANGE COLUMN",
                   change_column_parameters(target.path, dataclasses.replace(old, nullable=nullable)), conf=conf)


def _position(siblings: Sequence[StructField], position: str | None, shown: str, table: str,
              what: str = "ADD COLUMNS", parent: Path = ()) -> int:
    """Where a column goes among ``siblings`` (the fields of the struct at ``parent``, without the
    column): the end, ``FIRST`` or ``AFTER name`` (case-insensitive, as Spark's resolver)."""
    if position is None:
        return len(siblings)
    if position.upper() == "FIRST":
        return 0
    after = position.split(None, 1)[1]
    matches = [i for i, f in enumerate(siblings) if f.name.lower() == after.lower()]
    if not matches:
        raise InvalidArgumentError(f"{what} {shown!r} AFTER {after!r}: table {table} has no column "
                                   f"{_show((*parent, after))!r}; nothing was changed")
    return matches[0] + 1


# Keys DeltaColumnMapping.dropColumnMappingMetadata removes from the schema Spark sees (ids, physical
# names, nested ids, and their parquet.field.* copies).
_MAPPING_KEY_PREFIXES = ("delta.columnMapping.", "parquet.field.")


def _same_type(current: DataType, given: DataType) -> bool:
    """Whether Hive-style CHANGE COLUMN's type is the column's own (then Spark drops the type change):
    DataType equality, nested names, nullability and metadata included, on the schema as Spark sees
    the table (DeltaTableV2.schema: no column mapping metadata)."""
    return _without_mapping(current) == given


def _without_mapping(data_type: DataType) -> DataType:
    if isinstance(data_type, StructType):
        return StructType(tuple(
            dataclasses.replace(f, type=_without_mapping(f.type),
                                metadata={k: v for k, v in f.metadata.items() if not k.startswith(_MAPPING_KEY_PREFIXES)})
            for f in data_type.fields
        ))
    if isinstance(data_type, ArrayType):
        return dataclasses.replace(data_type, element_type=_without_mapping(data_type.element_type))
    if isinstance(data_type, MapType):
        return dataclasses.replace(data_type, key_type=_without_mapping(data_type.key_type),
                                   value_type=_without_mapping(data_type.value_type))
    return data_type


def change_column(table_root: str, column: Sequence[str], comment: str | None = None, position: str | None = None,
                  data_type: DataType | None = None, conf: ConfLookup | None = None) -> int | None:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {COMMENT 'text' | FIRST | AFTER x}`` and Hive-style
    ``CHANGE [COLUMN] c c type [COMMENT 'text'] [FIRST | AFTER x]`` (``data_type``: the type written
    there): one metadata-only ``CHANGE COLUMN`` commit, as Delta's AlterTableChangeColumnDeltaCommand.

    The comment goes into the field's metadata under ``comment``; a position moves the field among
    its struct's fields (``AFTER`` itself leaves it in place). A ``data_type`` equal to the column's
    own changes nothing; another one is a type widening, under ALTER COLUMN TYPE's rules. Returns
    None, committing nothing, when nothing is asked (a Hive-style CHANGE with the column's own type
    only: Spark then hands Delta no change)."""
    path = tuple(column)
    if not path:
        raise InvalidArgumentError("ALTER COLUMN needs a column")
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    what = f"ALTER COLUMN {_show(path)}"
    retype = [data_type is not None]  # set by the edit: False when data_type is the column's own
    logged_position: list[str] = []

    def in_struct(fields: list[StructField], i: int, at: Path) -> list[StructField]:
        old = fields[i]
        new = old if comment is None else dataclasses.replace(old, metadata={**old.metadata, "comment": comment})
        if data_type is not None and _same_type(old.type, data_type):
            retype[0] = False
        elif data_type is not None:
            shown = column_path_name(at)
            check_atomic(old, data_type, _show(at))  # Spark's analyzer, before Delta sees the change
            if is_identity(old):
                raise UnsupportedFeatureError(
                    f"{what}: ALTER TABLE ALTER COLUMN is not supported for IDENTITY columns ({shown} of table "
                    f"{table_root}, Delta's DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED); nothing was changed"
                )
            check_type_change(snapshot, _show(at))
            check_dependents(snapshot, at, "ALTER COLUMN ... TYPE of")
            new = widened_field(new, data_type, _show(at))
        fields[i] = new
        if position is None:
            return fields
        others = fields[:i] + fields[i + 1:]
        if position.upper() == "FIRST":
            at_index = 0
            logged_position.append("FIRST")
        elif position.split(None, 1)[1].lower() == old.name.lower():  # AFTER itself: stays where it is
            at_index = i
            logged_position.append(f"AFTER {old.name}")
        else:
            at_index = _position(others, position, _show(at), table_root, what="ALTER COLUMN", parent=at[:-1])
            logged_position.append(f"AFTER {others[at_index - 1].name}")
        return [*others[:at_index], new, *others[at_index:]]

    def in_part(old: StructField, at: Path) -> StructField:
        shown = column_path_name(at)
        if comment is not None:
            raise UnsupportedFeatureError(
                f"{what} COMMENT: {shown} of table {table_root} is a map key / value or an array element, which "
                "cannot have a comment (Delta's DELTA_UNSUPPORTED_COMMENT_MAP_ARRAY); nothing was changed"
            )
        if data_type is not None and _same_type(old.type, data_type):
            retype[0] = False
        elif data_type is not None:
            check_atomic(old, data_type, _show(at))
            check_type_change(snapshot, _show(at))
            raise UnsupportedFeatureError(
                f"{what}: widening {shown} of table {table_root} from {old.type.simple_string()} to "
                f"{data_type.simple_string()} is not supported yet: dvengine widens top-level columns and struct "
                "fields, not map keys / values or array elements (Delta does, on a table with type widening); "
                "nothing was changed"
            )
        if position is not None:  # Delta leaves a key / value / element where it is
            after = position.split(None, 1)[1] if position.upper() != "FIRST" else None
            parts = ("key", "value") if at[-1] in ("key", "value") else ("element",)
            if after is not None and after not in parts:
                raise InvalidArgumentError(f"{what} AFTER {after!r}: table {table_root} has no column "
                                           f"{_show((*at[:-1], after))!r}; nothing was changed")
            logged_position.append(position if after is None else f"AFTER {after}")
        return old

    schema, target = _edit_at(snapshot.schema, path, in_struct, in_part, (), what, table_root)
    assert isinstance(schema, StructType)
    if comment is None and position is None and not retype[0]:
        return None
    logged = target.old
    if not target.in_collection:
        if comment is not None:
            logged = dataclasses.replace(logged, metadata={**logged.metadata, "comment": comment})
        if retype[0] and data_type is not None:
            logged = dataclasses.replace(logged, type=data_type)  # Delta logs the new type, not delta.typeChanges
    params = change_column_parameters(target.path, logged, logged_position[0] if logged_position else None)
    return commit_schema_change(snapshot, schema, "CHANGE COLUMN", params, conf=conf)


def _child_fields(struct: StructType, indexes: Sequence[int]) -> tuple[StructField, ...]:
    """The fields of the struct at ``indexes`` (the table's own for none)."""
    if not indexes:
        return struct.fields
    holder = _field_at(struct, indexes)
    assert isinstance(holder.type, StructType)
    return holder.type.fields


def _with_child_fields(struct: StructType, indexes: Sequence[int], fields: Sequence[StructField]) -> StructType:
    if not indexes:
        return StructType(tuple(fields))

    def put(outer: list[StructField], i: int) -> list[StructField]:
        outer[i] = dataclasses.replace(outer[i], type=StructType(tuple(fields)))
        return outer

    return _replace_at(struct, indexes, put)


def _field_at(struct: StructType, indexes: Sequence[int]) -> StructField:
    current: StructType = struct
    field = None
    for i in indexes:
        field = current.fields[i]
        if isinstance(field.type, StructType):
            current = field.type
    assert field is not None
    return field


def _parent_fields(struct: StructType, indexes: Sequence[int]) -> tuple[StructField, ...]:
    if len(indexes) == 1:
        return struct.fields
    parent = _field_at(struct, indexes[:-1])
    assert isinstance(parent.type, StructType)
    return parent.type.fields


def _names_at(struct: StructType, indexes: Sequence[int]) -> Path:
    names: list[str] = []
    current: StructType = struct
    for i in indexes:
        field = current.fields[i]
        names.append(field.name)
        if isinstance(field.type, StructType):
            current = field.type
    return tuple(names)
