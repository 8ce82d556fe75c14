"""MERGE schema evolution (``withSchemaEvolution()`` or the auto-merge conf), as delta-spark's
``ResolveDeltaMergeInto`` does it.

The source schema is first filtered to the columns the statement writes: all of them when a
MATCHED or NOT MATCHED clause is ``updateAll``/``insertAll``, else those named as assignment
targets (``set={"extra": ...}`` with ``extra`` a source column; NOT MATCHED BY SOURCE clauses
cannot introduce columns). That schema is merged into the target's with implicit casts allowed
(an existing column keeps its type; values are cast to it as in any MERGE), so only new columns
are added, appended and nullable, in the MERGE's own commit. Rows the MERGE does not write read
the new columns as NULL, since their files lack them.

The executors read the target through the evolved snapshot (same version and files, new
metadata) and bind the clauses against it; with evolution on, ``updateAll`` leaves target
columns the source lacks unchanged and ``insertAll`` sets them to NULL, as Delta does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dvengine.commands.merge_clauses import ClauseAction, ClauseKind, MergeClause
from dvengine.commands.write_schema import with_metadata
from dvengine.errors import UnsupportedFeatureError
from dvengine.log import Snapshot
from dvengine.protocol.actions import Metadata
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import StructType
from dvengine.writing.schema_checks import type_signature
from dvengine.writing.schema_merge import assign_column_mapping, merge_struct


def _writes_star(clause: MergeClause) -> bool:
    return clause.kind is not ClauseKind.NOT_MATCHED_BY_SOURCE and clause.action is not ClauseAction.DELETE and (
        clause.assignments is None
    )


def _assigned_names(clauses: Sequence[MergeClause], target_alias: str) -> set[str]:
    """Lower-case top-level target names assigned by MATCHED / NOT MATCHED clauses (alias stripped)."""
    prefix = target_alias.lower() + "."
    names: set[str] = set()
    for clause in clauses:
        if clause.kind is ClauseKind.NOT_MATCHED_BY_SOURCE or clause.assignments is None:
            continue
        for key in clause.assignments:
            lowered = key.lower()
            names.add(lowered[len(prefix):] if lowered.startswith(prefix) else lowered)
    return names


def merge_target_schema(
    target: StructType, source: StructType, target_alias: str, clauses: Sequence[MergeClause]
) -> StructType:
    """The target schema after the MERGE: target columns, then the new source columns it writes."""
    star = any(_writes_star(c) for c in clauses)
    assigned = _assigned_names(clauses, target_alias)
    written = StructType(tuple(f for f in source.fields if star or f.name.lower() in assigned))
    return merge_struct(target, written, implicit_casts=True)


def evolve_for_merge(
    snapshot: Snapshot, source: StructType, target_alias: str, clauses: Sequence[MergeClause], enabled: bool
) -> tuple[Snapshot, Metadata | None]:
    """The snapshot to run the MERGE on, and the metadata to commit with it (None: no change)."""
    if not enabled:
        return snapshot, None
    merged = merge_target_schema(snapshot.schema, source, target_alias, clauses)
    if type_signature(merged) == type_signature(snapshot.schema):
        return snapshot, None
    for before, after in zip(snapshot.schema.fields, merged.fields):
        if type_signature(before.type) != type_signature(after.type):
            raise UnsupportedFeatureError(
                f"MERGE schema evolution would add nested fields to column {before.name!r} "
                f"({before.type.simple_string()} -> {after.type.simple_string()}); only new top-level columns "
                "are implemented"
            )
    schema, config = assign_column_mapping(merged, snapshot.configuration)
    metadata = dataclasses.replace(snapshot.metadata, schema_string=schema.to_json_string(), configuration=config)
    check_writable(snapshot.protocol, metadata)
    return with_metadata(snapshot, metadata), metadata
