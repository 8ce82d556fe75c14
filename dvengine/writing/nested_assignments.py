"""Assignments to nested struct fields (``UPDATE ... SET s.x = v``, MERGE ``SET t.s.x = v``) as one
assignment of the rebuilt top-level struct.

Delta resolves each SET target to its name parts and, in ``UpdateExpressionsSupport.
generateUpdateExpressions``, rebuilds every struct that has assigned fields as a
``CreateNamedStruct`` of its fields in schema order: the assigned ones take their value (cast to
the field's type), the others their current value (``GetStructField`` of the old struct). So a
row whose struct is NULL gets a non-NULL struct: ``SET s.x = 10`` on ``s = NULL`` writes
``{x: 10, y: NULL}`` (no null-preserving wrapper is generated for nested assignments). Doing the
same rewrite here, before binding, hands each executor an ordinary top-level assignment of a
``named_struct(...)``, which both evaluate with their existing machinery: Spark casts the struct to
the column type field by field, the embedded evaluator stores each field value into its field type.

Refusals follow Delta: a field reached through an array or a map, or below a non-struct column
(``NestedAssignmentError``, DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE); one target assigned twice or
together with a struct that contains it (``ConflictingAssignmentError``, DELTA_CONFLICT_SET_COLUMN);
an unknown column or field (the caller's error type, as for unknown top-level columns). Names
resolve case-insensitively, as Spark's default resolver does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dvengine.errors import ConflictingAssignmentError, NestedAssignmentError
from dvengine.expressions.identifiers import quote_identifier
from dvengine.protocol.schema import ArrayType, MapType, StructField, StructType

Path = tuple[str, ...]


@dataclass(frozen=True)
class AssignmentTarget:
    """An assignment key resolved to the schema: the fields from the top-level column down."""

    key: str  # as the user wrote it
    fields: tuple[StructField, ...]

    @property
    def path(self) -> Path:
        return tuple(f.name for f in self.fields)

    @property
    def nested(self) -> bool:
        return len(self.fields) > 1


@dataclass(frozen=True)
class FoldedAssignments:
    """Top-level column -> SQL text to assign (a nested set folded into one ``named_struct``), plus
    what a generation expression needs to see the new values: each assigned path's own text
    (``values``) and each rebuilt struct's text (``rebuilt``), keyed by lower-case paths."""

    columns: dict[str, str]
    values: dict[Path, str] = field(default_factory=dict)
    rebuilt: dict[Path, str] = field(default_factory=dict)


def name_parts(key: str) -> list[str]:
    """Spark's ``UnresolvedAttribute.quotedString``: dots separate parts, back-quotes quote a part
    (a doubled back-quote is one back-quote inside it)."""
    parts: list[str] = []
    current: list[str] = []
    i, quoted, part_quoted = 0, False, False
    while i < len(key):
        ch = key[i]
        if quoted and ch == "`" and key[i + 1 : i + 2] == "`":
            current.append("`")
            i += 1
        elif ch == "`":
            quoted = not quoted
            part_quoted = True
        elif ch == "." and not quoted:
            if not current and not part_quoted:
                raise NestedAssignmentError(f"assignment target {key!r} has an empty name part")
            parts.append("".join(current))
            current, part_quoted = [], False
        else:
            current.append(ch)
        i += 1
    if quoted or (not current and not part_quoted):
        raise NestedAssignmentError(f"assignment target {key!r} is not a valid column name")
    parts.append("".join(current))
    return parts


def resolve_target(
    schema: StructType, key: str, unknown: Callable[[str], Exception], qualifier: str | None = None
) -> AssignmentTarget:
    """The column or nested field ``key`` names (``col``, ``s.x``, ```a.b```; with ``qualifier``,
    also ``<qualifier>.col...``). A key without back-quotes that spells a top-level column (even
    one whose name holds a dot) names that column, as it always has. ``unknown`` builds the error
    for a name the schema lacks."""
    whole = schema.find(key) if "`" not in key else None
    if whole is not None:
        return AssignmentTarget(key, (whole,))
    parts = name_parts(key)
    if qualifier is not None and len(parts) > 1 and parts[0].lower() == qualifier.lower() and schema.find(parts[1]):
        parts = parts[1:]  # Spark tries the qualifier first
    top = schema.find(parts[0])
    if top is None:
        raise unknown(f"cannot assign {key!r}: the table has no column {parts[0]!r}")
    fields = [top]
    for part in parts[1:]:
        current = fields[-1]
        where = ".".join(f.name for f in fields)
        if isinstance(current.type, (ArrayType, MapType)):
            raise NestedAssignmentError(
                f"cannot assign {key!r}: {where!r} is {current.type.simple_string()}; only fields of structs can be "
                "assigned (Delta's DELTA_UNSUPPORTED_NESTED_FIELD_IN_UPDATE); assign the whole column instead"
            )
        if not isinstance(current.type, StructType):
            raise NestedAssignmentError(
                f"cannot assign {key!r}: {where!r} is {current.type.simple_string()}, not a struct, so it has no "
                f"field {part!r}"
            )
        child = current.type.find(part)
        if child is None:
            raise unknown(
                f"cannot assign {key!r}: struct {where!r} has no field {part!r}; its fields are "
                f"{current.type.field_names}"
            )
        fields.append(child)
    return AssignmentTarget(key, tuple(fields))


def _lower(path: Path) -> Path:
    return tuple(p.lower() for p in path)


def check_conflicts(targets: Sequence[AssignmentTarget]) -> None:
    """No target assigned twice, nor together with a struct containing it (Delta's DELTA_CONFLICT_SET_COLUMN)."""
    seen: list[AssignmentTarget] = []
    for target in targets:
        mine = _lower(target.path)
        for other in seen:
            theirs = _lower(other.path)
            n = min(len(mine), len(theirs))
            if mine[:n] == theirs[:n]:
                raise ConflictingAssignmentError(
                    f"conflicting assignments {other.key!r} and {target.key!r}: "
                    + ("the same target is assigned twice" if mine == theirs else "a struct and a field inside it are both assigned")
                    + " (Delta's DELTA_CONFLICT_SET_COLUMN)"
                )
        seen.append(target)


def _string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fold_assignments(
    assignments: Sequence[tuple[AssignmentTarget, str]], column_sql: Callable[[Path], str]
) -> FoldedAssignments:
    """One assignment per top-level column, in order of first mention: a nested set becomes the
    column's ``named_struct`` with unassigned fields read by ``column_sql(path)`` (the old value).
    Conflicts are refused first (:func:`check_conflicts`)."""
    check_conflicts([t for t, _ in assignments])
    folded = FoldedAssignments({})
    groups: dict[str, list[tuple[AssignmentTarget, str]]] = {}
    tops: dict[str, StructField] = {}
    for target, text in assignments:
        folded.values[_lower(target.path)] = text
        groups.setdefault(target.fields[0].name, []).append((target, text))
        tops[target.fields[0].name] = target.fields[0]
    for name, group in groups.items():
        if len(group) == 1 and not group[0][0].nested:
            folded.columns[name] = group[0][1]
        else:
            folded.columns[name] = _rebuild(tops[name], (name,), group, column_sql, folded.rebuilt)
    return folded


def _rebuild(
    struct_field: StructField,
    path: Path,
    group: Sequence[tuple[AssignmentTarget, str]],
    column_sql: Callable[[Path], str],
    rebuilt: dict[Path, str],
) -> str:
    """``named_struct`` of ``struct_field``'s fields in schema order (Delta's CreateNamedStruct)."""
    assert isinstance(struct_field.type, StructType)
    depth = len(path)
    items: list[str] = []
    for child in struct_field.type.fields:
        here = [(t, v) for t, v in group if t.fields[depth].name == child.name]
        child_path = (*path, child.name)
        if not here:
            value = column_sql(child_path)
        elif len(here[0][0].fields) == depth + 1:
            value = f"({here[0][1]})"
        else:
            value = _rebuild(child, child_path, here, column_sql, rebuilt)
        items.append(f"{_string_literal(child.name)}, {value}")
    text = f"named_struct({', '.join(items)})"
    rebuilt[_lower(path)] = text
    return text


def column_path_sql(qualifier: str | None) -> Callable[[Path], str]:
    """``column_sql`` for :func:`fold_assignments`: the old value, back-quoted, under ``qualifier``."""

    def sql(path: Path) -> str:
        parts = ([qualifier] if qualifier else []) + list(path)
        return ".".join(quote_identifier(p) for p in parts)

    return sql


def fold_mapping(
    schema: StructType,
    assignments: Mapping[str, str],
    unknown: Callable[[str], Exception],
    qualifier: str | None = None,
    column_qualifier: str | None = None,
) -> FoldedAssignments:
    """:func:`resolve_target` every key of ``assignments`` (key -> SQL text), then :func:`fold_assignments`."""
    resolved = [(resolve_target(schema, key, unknown, qualifier), text) for key, text in assignments.items()]
    return fold_assignments(resolved, column_path_sql(column_qualifier))
