"""MERGE schema evolution (``withSchemaEvolution()`` or the auto-merge conf), as delta-spark's
``ResolveDeltaMergeInto`` does it.

The source schema is first filtered to the columns the statement writes: all of them when a
MATCHED or NOT MATCHED clause is ``updateAll``/``insertAll``, else those named as assignment
targets (``set={"extra": ...}`` with ``extra`` a source column; NOT MATCHED BY SOURCE clauses
cannot introduce columns; a struct is kept with only its assigned fields, as Delta's
``filterSchema``). That schema is merged into the target's with implicit casts allowed
(an existing column keeps its type; values are cast to it as in any MERGE), so only new columns
and new nested struct fields (also inside arrays and maps) are added, appended and nullable, in
the MERGE's own commit; on a table with type widening
enabled a wider source type the protocol lets schema evolution apply widens the target column
first (recorded in ``delta.typeChanges``, as Delta's ``TypeWideningMode.TypeEvolution``). Rows the MERGE does not write read
the new columns as NULL, since their files lack them.

The executors read the target through the evolved snapshot (same version and files, new
metadata) and bind the clauses against it; with evolution on, ``updateAll`` leaves target
columns the source lacks unchanged and ``insertAll`` sets them to NULL, as Delta does; nested
values are rebuilt into the evolved struct types by name (``commands/struct_cast.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from dvengine.commands.merge_clauses import ClauseAction, ClauseKind, MergeClause
from dvengine.commands.write_schema import with_metadata
from dvengine.commit.transaction import Transaction
from dvengine.log import Snapshot
from dvengine.protocol import type_widening
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import StructField, StructType
from dvengine.writing.schema_checks import type_signature
from dvengine.writing.schema_merge import assign_column_mapping, merge_struct, protocol_for_schema


def _writes_star(clause: MergeClause) -> bool:
    return clause.kind is not ClauseKind.NOT_MATCHED_BY_SOURCE and clause.action is not ClauseAction.DELETE and (
        clause.assignments is None
    )


def _assigned_paths(clauses: Sequence[MergeClause], target_alias: str) -> set[tuple[str, ...]]:
    """Lower-case target paths assigned by MATCHED / NOT MATCHED clauses (alias stripped):
    ``("extra",)`` for a column, ``("s", "x")`` for a nested field."""
    prefix = target_alias.lower() + "."
    paths: set[tuple[str, ...]] = set()
    for clause in clauses:
        if clause.kind is ClauseKind.NOT_MATCHED_BY_SOURCE or clause.assignments is None:
            continue
        for key in clause.assignments:
            lowered = key.lower()
            name = lowered[len(prefix):] if lowered.startswith(prefix) else lowered
            paths.add((name,))
            if "." in name:
                paths.add(tuple(name.split(".")))
    return paths


def _written_fields(source: StructType, star: bool, assigned: set[tuple[str, ...]], base: tuple[str, ...] = ()) -> StructType:
    """Delta's ``filterSchema``: the source fields the clauses write. A field assigned as a whole
    is kept whole; a struct one of whose fields is assigned is kept with those fields; with a
    star clause everything is kept."""
    kept: list[StructField] = []
    for f in source.fields:
        path = (*base, f.name.lower())
        if path in assigned:
            kept.append(f)
        elif isinstance(f.type, StructType) and (star or any(p[: len(path)] == path for p in assigned)):
            kept.append(dataclasses.replace(f, type=_written_fields(f.type, star, assigned, path)))
        elif star:
            kept.append(f)
    return StructType(tuple(kept))


def merge_target_schema(
    target: StructType, source: StructType, target_alias: str, clauses: Sequence[MergeClause], widen: bool = False
) -> StructType:
    """The target schema after the MERGE: target columns (widened to the source's type where the
    table has type widening enabled and the change is allowed; new nested fields appended inside
    their structs, also inside arrays and maps), then the new source columns it writes."""
    star = any(_writes_star(c) for c in clauses)
    written = _written_fields(source, star, _assigned_paths(clauses, target_alias))
    return merge_struct(target, written, implicit_casts=True, widen=widen)


@dataclass(frozen=True)
class MergeEvolution:
    """The snapshot a MERGE runs on, and the metadata (and protocol upgrade) its commit carries."""

    snapshot: Snapshot
    metadata: Metadata | None = None
    protocol: Protocol | None = None

    def apply(self, txn: Transaction) -> None:
        """Put the schema change into the MERGE's transaction (nothing when there is none)."""
        if self.protocol is not None:
            txn.update_protocol(self.protocol)
        if self.metadata is not None:
            txn.update_metadata(self.metadata)


def evolve_for_merge(
    snapshot: Snapshot, source: StructType, target_alias: str, clauses: Sequence[MergeClause], enabled: bool
) -> MergeEvolution:
    """The snapshot to run the MERGE on and the schema change to commit with it (see the module docstring)."""
    if not enabled:
        return MergeEvolution(snapshot)
    widen = type_widening.is_enabled(snapshot.protocol, snapshot.metadata)
    merged = merge_target_schema(snapshot.schema, source, target_alias, clauses, widen)
    if type_signature(merged) == type_signature(snapshot.schema):
        return MergeEvolution(snapshot)
    schema, config = assign_column_mapping(merged, snapshot.configuration)
    metadata = dataclasses.replace(snapshot.metadata, schema_string=schema.to_json_string(), configuration=config)
    protocol = protocol_for_schema(snapshot.protocol, schema)
    check_writable(protocol or snapshot.protocol, metadata)
    return MergeEvolution(with_metadata(snapshot, metadata, protocol), metadata, protocol)
