"""Change data files of a DML command: where they go, what they are called, how they are committed.

PROTOCOL.md ("Change Data Files", "Add CDC File"): when ``delta.enableChangeDataFeed`` is true,
an operation that changes existing rows writes Parquet files under ``_change_data/`` (in Hive
partition folders for partitioned tables) holding the changed rows' data columns plus
``_change_type``, and commits them as ``cdc`` actions (``dataChange: false``) in the same commit
as its ``add``/``remove`` actions (which keep ``dataChange: true``). Delta Spark writes them for
UPDATE, for MERGE (unless it only inserts) and for copy-on-write DELETE; a DELETE that only
adds DVs or drops whole files writes none, since readers derive those rows from the log. The
engines produce the rows (``Executor.write_change_data``, the MERGE executors); this module is
what they share: the schema of the files, turning written files into ``cdc`` actions with
Delta Spark's ``cdc-`` file names, recording them for clean-up, and the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dvengine.commands.context import DmlContext
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddCDCFile, AddFile
from dvengine.protocol.features import CHANGE_DATA_DIR, change_data_feed_enabled
from dvengine.protocol.schema import PrimitiveType, StructField, StructType
from dvengine.storage import is_object_uri, join, resolve_data_path
from dvengine.storage.durable import rename_into_place

CHANGE_TYPE_COLUMN = "_change_type"
INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"


def writes_change_data(snapshot: Snapshot) -> bool:
    return change_data_feed_enabled(snapshot.metadata)


def change_data_root(snapshot: Snapshot) -> str:
    """Absolute folder the engines' writers write change files into (partition folders below it)."""
    return join(snapshot.table_root, CHANGE_DATA_DIR)


def change_file_schema(schema: StructType) -> StructType:
    """The table's columns plus ``_change_type`` (partition columns still go to folders)."""
    return replace(schema, fields=(*schema.fields, StructField(CHANGE_TYPE_COLUMN, PrimitiveType("string"), True)))


def register_change_files(ctx: DmlContext, written: Sequence[AddFile]) -> list[AddCDCFile]:
    """Turn files an engine wrote under ``_change_data`` into ``cdc`` actions of this command.

    Files are renamed ``part-…`` -> ``cdc-…`` as Delta Spark names them; both names are recorded
    in ``ctx.written`` first, so a command that does not commit removes them whatever happens.
    """
    root = change_data_root(ctx.snapshot)
    ctx.written.add_paths(resolve_data_path(root, add.path) for add in written)
    actions: list[AddCDCFile] = []
    for add in written:
        if is_object_uri(root):  # a rename is a copy on a store; the cdc- prefix is a convention, not protocol
            actions.append(AddCDCFile(f"{CHANGE_DATA_DIR}/{add.path}", dict(add.partition_values), add.size, data_change=False))
            continue
        folder, _, name = add.path.rpartition("/")
        new_name = "cdc-" + name[len("part-") :] if name.startswith("part-") else "cdc-" + name
        relative = f"{folder}/{new_name}" if folder else new_name
        source, target = resolve_data_path(root, add.path), resolve_data_path(root, relative)
        ctx.written.add_paths([target])
        rename_into_place(source, target)
        actions.append(AddCDCFile(f"{CHANGE_DATA_DIR}/{relative}", dict(add.partition_values), add.size, data_change=False))
    ctx.transaction.add_actions(actions)
    return actions


def change_file_metrics(actions: Sequence[AddCDCFile], operation: str) -> dict[str, int]:
    """Delta Spark's metric names: MERGE reports ``numTargetChangeFiles*``, DELETE/UPDATE ``numAddedChangeFiles``."""
    size = sum(a.size for a in actions)
    if operation == "MERGE":
        return {"numTargetChangeFilesAdded": len(actions), "numTargetChangeFileBytes": size}
    return {"numAddedChangeFiles": len(actions), "changeFileBytes": size}
