"""``write()``'s engine-neutral half: what the commit will be, decided before any file is written.

Mode, partitioning, schema match and table features are checked first; the engine then writes
the data files, and :func:`finish_write` commits them (deleting them again if the commit fails).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, SchemaMismatchError, TableAlreadyExistsError
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.protocol.actions import AddFile, Metadata
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import StructType
from dvengine.writing.properties import validate_table_properties
from dvengine.writing.schema_checks import (
    DEFAULT_NEW_TABLE_CONFIGURATION,
    check_new_table_configuration,
    check_no_constraints,
    match_columns,
    new_table_protocol,
    resolve_partition_columns,
)
from dvengine.writing.stats import num_indexed_cols

WRITE_MODES = ("error", "errorifexists", "append", "overwrite")
_DELTA_MODE_NAMES = {"error": "ErrorIfExists", "append": "Append", "overwrite": "Overwrite"}


@dataclass(frozen=True)
class WritePlan:
    """A checked write: the transaction to commit and how the data's columns map to the table's."""

    table_root: str
    transaction: Transaction
    schema: StructType
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    column_pairs: list[tuple[str, str]]  # (data column, table column) in table order

    @property
    def num_indexed_cols(self) -> int:
        return num_indexed_cols(self.configuration)


def normalize_write_mode(mode: object) -> str:
    if not isinstance(mode, str) or mode.lower() not in WRITE_MODES:
        raise InvalidArgumentError(f"mode must be one of 'error', 'append', 'overwrite', got {mode!r}")
    return "error" if mode.lower() == "errorifexists" else mode.lower()


def plan_write(
    table_root: str,
    mode: str,
    data_schema: StructType,
    partition_by: Sequence[str] | None,
    configuration: Mapping[str, str] | None,
) -> WritePlan:
    """Check everything that can reject the write and open its transaction (nothing is written)."""
    mode = normalize_write_mode(mode)
    if configuration is not None:
        validate_table_properties(configuration)  # on every write, as for Spark data: a typo never passes silently
    snapshot: Snapshot | None = None
    if table_exists(table_root):
        if mode == "error":
            raise TableAlreadyExistsError(f"a Delta table already exists at {table_root}; use mode='append' or 'overwrite'")
        snapshot = load_snapshot(table_root)
    params: dict[str, Any] = {"mode": _DELTA_MODE_NAMES[mode]}
    if snapshot is None:
        config = {**DEFAULT_NEW_TABLE_CONFIGURATION, **dict(configuration or {})}
        check_new_table_configuration(config)
        match_columns(data_schema, data_schema)  # duplicate names (case-insensitive) are refused here
        partition_columns = resolve_partition_columns(data_schema, partition_by or ())
        metadata = Metadata(
            id=str(uuid.uuid4()),
            schema_string=data_schema.to_json_string(),
            partition_columns=partition_columns,
            configuration=config,
            created_time=int(time.time() * 1000),
        )
        protocol = new_table_protocol(data_schema, config)
        check_writable(protocol, metadata)
        params["partitionBy"] = list(partition_columns)
        txn = Transaction(table_root, None, "WRITE", params)
        txn.update_protocol(protocol)
        txn.update_metadata(metadata)
        return WritePlan(table_root, txn, data_schema, partition_columns, config, [(n, n) for n in data_schema.field_names])
    check_writable(snapshot.protocol, snapshot.metadata)
    schema = snapshot.schema
    check_no_constraints(snapshot.metadata, schema)
    if mode == "overwrite" and snapshot.configuration.get("delta.appendOnly", "false").lower() == "true":
        raise InvalidArgumentError(f"table {snapshot.table_root} is append-only (delta.appendOnly=true); overwrite is refused")
    if partition_by is not None and [p.lower() for p in partition_by] != [p.lower() for p in snapshot.partition_columns]:
        raise SchemaMismatchError(
            f"partitionBy {list(partition_by)} differs from the table's partitioning {list(snapshot.partition_columns)}"
        )
    pairs = match_columns(schema, data_schema)
    params["partitionBy"] = list(snapshot.partition_columns)
    txn = Transaction(table_root, snapshot, "WRITE", params)
    if mode == "overwrite":
        txn.record_read(snapshot.files, None)
        now = int(time.time() * 1000)
        txn.add_actions(f.to_remove(now) for f in snapshot.files)
    return WritePlan(table_root, txn, schema, snapshot.partition_columns, dict(snapshot.configuration), pairs)


def finish_write(plan: WritePlan, adds: Sequence[AddFile]) -> int:
    """Commit the written files; they are deleted again if the commit does not happen."""
    written = WrittenFiles(plan.table_root)
    written.add_data_files(adds)
    plan.transaction.add_actions(adds)
    metrics = {
        "numFiles": len(adds),
        "numOutputRows": sum(a.num_records or 0 for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
    }
    return commit_or_clean_up(plan.transaction, metrics, written)
