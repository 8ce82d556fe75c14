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

from dvengine.commands.change_data import register_change_files
from dvengine.commands.context import DmlContext, open_dml
from dvengine.commands.delete import delete_metrics, delete_rows
from dvengine.commands.executor import Executor
from dvengine.commands.options import resolve_options
from dvengine.commands.partition_overwrite import files_to_replace, logged_flag, partition_key, use_dynamic_overwrite
from dvengine.commands.write_options import SchemaWriteOptions
from dvengine.commands.write_schema import evolve_table_schema
from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.transaction import Transaction
from dvengine.errors import (
    DataChangeFalseError,
    InvalidArgumentError,
    ReplaceWhereDataChangeFalseError,
    TableAlreadyExistsError,
)
from dvengine.expressions import BoundPredicate, parse_predicate
from dvengine.expressions.refs import bound_refs
from dvengine.expressions.trees import conjuncts
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.protocol.actions import AddFile, Metadata
from dvengine.protocol.feature_properties import split_feature_properties, with_features
from dvengine.protocol.features import check_writable, is_append_only
from dvengine.protocol.nested_not_null import without_unenforceable_not_nulls
from dvengine.protocol.schema import StructType
from dvengine.writing.constraints import table_constraints
from dvengine.writing.identity import check_explicit_values, with_high_water_marks
from dvengine.writing.properties import validate_table_properties
from dvengine.writing.schema_checks import (
    DEFAULT_NEW_TABLE_CONFIGURATION,
    check_new_table_configuration,
    match_columns,
    new_table_configuration,
    new_table_protocol,
    resolve_partition_columns,
)
from dvengine.writing.schema_merge import new_table_column_mapping
from dvengine.writing.stats import num_indexed_cols

WRITE_MODES = ("error", "errorifexists", "append", "overwrite")
# Metrics of the DELETE half of a replaceWhere overwrite that Delta reports for such a WRITE.
REPLACE_METRICS = (
    "numDeletedRows", "numRemovedFiles", "numRemovedBytes", "numCopiedRows", "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved", "numDeletionVectorsUpdated",
)
_DELTA_MODE_NAMES = {"error": "ErrorIfExists", "append": "Append", "overwrite": "Overwrite"}


@dataclass(frozen=True)
class WritePlan:
    """A checked write: the transaction to commit and how the data's columns map to the table's."""

    table_root: str
    transaction: Transaction
    schema: StructType
    partition_columns: tuple[str, ...]
    configuration: Mapping[str, str]
    column_pairs: list[tuple[str | None, str]]  # (data column or None: all null, table column) in table order
    # replaceWhere: the prologue of the DELETE of the rows it matches, sharing ``transaction``
    replace: DmlContext | None = None
    # the table already holds this write's (txnAppId, txnVersion): write nothing, commit nothing
    repeat: bool = False
    # what an overwrite without replaceWhere removes when it commits: "table" (every file),
    # "partitions" (dynamic partition overwrite: the files of the partitions written); None: nothing
    overwrite: str | None = None
    base: Snapshot | None = None  # the snapshot the write read (None: it creates the table)

    @property
    def num_indexed_cols(self) -> int:
        return num_indexed_cols(self.configuration)


def replace_where_mismatch(predicate_sql: str, bad_rows: int) -> str:
    """Delta's DELTA_REPLACE_WHERE_MISMATCH message, with how many rows broke the condition."""
    return (
        f"Written data does not conform to partial table overwrite condition or constraint '{predicate_sql}' "
        f"(DELTA_REPLACE_WHERE_MISMATCH): {bad_rows} row(s) do not satisfy it; nothing was written"
    )


def write_parameters(mode: str, partition_by: Sequence[str], opts: SchemaWriteOptions) -> dict[str, ParameterValue]:
    """operationParameters of Delta's ``DeltaOperations.Write`` as ``WriteIntoDelta`` fills it.

    ``partitionBy`` is the writer's own ``partitionBy`` as compact JSON text
    (``DeltaDataSource.createRelation`` passes the DataFrameWriter's columns, so an append naming
    none logs ``[]`` also on a partitioned table); ``predicate`` is the ``replaceWhere`` option as
    the caller wrote it (a plain string, not a JSON list); ``canMergeSchema`` / ``canOverwriteSchema``
    appear only when the option (for merging also the session's auto-merge key) turned them on,
    as Delta logs them ("Only log these fields when explicitly set"); so does
    ``isDynamicPartitionOverwrite``, whenever the option or the session conf resolves to dynamic
    (any save mode, any partitioning, as ``WriteIntoDelta.run`` logs it)."""
    params: dict[str, ParameterValue] = {"mode": _DELTA_MODE_NAMES[mode], "partitionBy": delta_json(list(partition_by))}
    if opts.replace_where is not None:
        params["predicate"] = opts.replace_where
    if logged_flag(opts.partition_overwrite_mode, opts.conf):
        params["isDynamicPartitionOverwrite"] = True
    if opts.overwrite_schema:
        params["canOverwriteSchema"] = True
    if opts.merge_schema:
        params["canMergeSchema"] = True
    return params


def data_change_false(operation: str) -> DataChangeFalseError:
    """Delta's DELTA_DATA_CHANGE_FALSE for ``operation`` (its ``unexpectedDataChangeException`` texts)."""
    return DataChangeFalseError(
        f"Cannot change table metadata because the 'dataChange' option is set to false. Attempted operation: "
        f"'{operation}'. (DELTA_DATA_CHANGE_FALSE); nothing was written"
    )


def check_rearrange_replace_where(predicate: BoundPredicate, partition_columns: Sequence[str]) -> None:
    """``replaceWhere`` under ``dataChange=false`` may only name partition columns, as Delta's
    ``getReplaceWhereExprsAndDataFilterPresenceInExprs`` requires (its AND-ed parts are split into
    partition and data filters; any data filter raises DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET).
    A partition-only condition removes whole files, with no row-level change to log."""
    parts = {c.lower() for c in partition_columns}
    data_filters = [
        str(part.sql(dialect="spark", comments=False))
        for part in conjuncts(predicate.tree)
        if any(ref.qualifier is not None or ref.top.lower() not in parts for ref in bound_refs(part))
    ]
    if data_filters:
        raise ReplaceWhereDataChangeFalseError(
            "'replaceWhere' cannot be used with data filters when 'dataChange' is set to false. Filters: "
            f"{','.join(data_filters)} (DELTA_REPLACE_WHERE_WITH_FILTER_DATA_CHANGE_UNSET); nothing was written"
        )


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
    options: SchemaWriteOptions | None = None,
) -> WritePlan:
    """Check everything that can reject the write and open its transaction (nothing is written).

    ``options``: ``mergeSchema`` / ``overwriteSchema`` / ``replaceWhere`` as Delta applies them
    (``overwriteSchema`` only on an overwrite without ``replaceWhere``; ``replaceWhere`` only on
    an overwrite of an existing table); ``partitionOverwriteMode`` (or the session conf) is
    resolved against the partitioning the write commits, as Delta does after its metadata update,
    so its refusals come before any file is written (``dvengine.commands.partition_overwrite``);
    ``userMetadata`` for the commitInfo; ``dataChange=false``
    as Delta's ``WriteIntoDelta`` with ``rearrangeOnly``: refused when the write would create the
    table or change its schema or partitioning (DELTA_DATA_CHANGE_FALSE) or when ``replaceWhere``
    names a data column; otherwise every add and remove of the commit logs ``dataChange=false``.
    """
    mode = normalize_write_mode(mode)
    opts = options or SchemaWriteOptions()
    if configuration is not None:
        validate_table_properties(configuration)  # on every write, as for Spark data: a typo never passes silently
    snapshot: Snapshot | None = None
    app = opts.app_transaction
    if table_exists(table_root):
        snapshot = load_snapshot(table_root)
        if app is not None and app.is_repeat(snapshot.app_transactions):
            # Delta checks the watermark first, before the save mode: a retried batch is a no-op.
            txn = Transaction(table_root, snapshot, "WRITE", {"mode": _DELTA_MODE_NAMES[mode]}, conf=opts.conf)
            return WritePlan(table_root, txn, snapshot.schema, snapshot.partition_columns, snapshot.configuration, [], repeat=True)
        if mode == "error":
            raise TableAlreadyExistsError(f"a Delta table already exists at {table_root}; use mode='append' or 'overwrite'")
    if snapshot is None:
        if not opts.data_change:
            raise data_change_false("Create a Delta table")
        # ``delta.feature.<name>`` asks for the feature in the protocol and is not kept, as at CREATE TABLE
        features, given = split_feature_properties(dict(configuration or {}))
        config = {**DEFAULT_NEW_TABLE_CONFIGURATION, **given}
        check_new_table_configuration(config)
        match_columns(data_schema, data_schema)  # duplicate names (case-insensitive) are refused here
        partition_columns = resolve_partition_columns(data_schema, partition_by or ())
        dynamic = _dynamic(mode, partition_columns, opts)
        # under column mapping: ids and physical names for every field; the files use the physical names
        table_schema, config = new_table_column_mapping(without_unenforceable_not_nulls(data_schema), config)
        config = new_table_configuration(table_schema, config)
        metadata = Metadata(
            id=str(uuid.uuid4()),
            schema_string=table_schema.to_json_string(),
            partition_columns=partition_columns,
            configuration=config,
            created_time=int(time.time() * 1000),
        )
        protocol = with_features(new_table_protocol(table_schema, config), features)
        check_writable(protocol, metadata)
        txn = Transaction(table_root, None, "WRITE", write_parameters(mode, partition_by or (), opts), conf=opts.conf)
        txn.set_user_metadata(opts.user_metadata)
        txn.update_protocol(protocol)
        txn.update_metadata(metadata)
        if app is not None:
            txn.set_app_transaction(app.app_id, app.version)
        return WritePlan(
            table_root, txn, table_schema, partition_columns, config, [(n, n) for n in data_schema.field_names],
            overwrite=_overwrite_kind(mode, dynamic),
        )
    check_writable(snapshot.protocol, snapshot.metadata)
    check_explicit_values(snapshot.schema, data_schema.field_names, "the write")
    # a constraint or column invariant that does not bind (or an unrecognized invariant) fails here
    table_constraints(snapshot.configuration, snapshot.schema)
    if mode == "overwrite" and is_append_only(snapshot.configuration):
        raise InvalidArgumentError(f"table {snapshot.table_root} is append-only (delta.appendOnly=true); overwrite is refused")
    replace_where = opts.replace_where if mode == "overwrite" else None
    overwrite_schema = opts.overwrite_schema and mode == "overwrite" and replace_where is None
    evolved = evolve_table_schema(snapshot, data_schema, partition_by, opts.merge_schema, overwrite_schema)
    if evolved.changed and not opts.data_change:
        raise data_change_false(
            "Overwrite the Delta table schema or change the partition schema" if overwrite_schema else "Change the Delta table schema"
        )
    dynamic = _dynamic(mode, evolved.metadata.partition_columns, opts)
    params = write_parameters(mode, partition_by or (), opts)
    replace: DmlContext | None = None
    if replace_where is not None:
        predicate = parse_predicate(replace_where, evolved.schema)
        if not opts.data_change:
            check_rearrange_replace_where(predicate, evolved.metadata.partition_columns)
        replace = open_dml(
            evolved.snapshot, "WRITE", resolve_options(opts.conf, None), predicate, params,
            row_level=opts.data_change, conf=opts.conf,  # a rebase would re-add files as data changes
        )
        txn = replace.transaction
    else:
        txn = Transaction(table_root, snapshot, "WRITE", params, conf=opts.conf)
    txn.set_user_metadata(opts.user_metadata)
    if not opts.data_change:
        txn.rearrange_only()
    if evolved.changed:
        if evolved.protocol is not None:
            txn.update_protocol(evolved.protocol)
        check_writable(evolved.protocol or snapshot.protocol, evolved.metadata)
        txn.update_metadata(evolved.metadata)
    if app is not None:
        txn.set_app_transaction(app.app_id, app.version)
    return WritePlan(
        table_root, txn, evolved.schema, evolved.metadata.partition_columns, dict(evolved.metadata.configuration),
        evolved.column_pairs, replace, overwrite=None if replace is not None else _overwrite_kind(mode, dynamic),
        base=snapshot,
    )


def _dynamic(mode: str, partition_columns: Sequence[str], opts: SchemaWriteOptions) -> bool:
    """Delta's ``useDynamicPartitionOverwriteMode`` (evaluated for every save mode, so its refusals
    reach appends too, as in Delta; only an overwrite acts on it)."""
    can_overwrite_schema = opts.overwrite_schema and mode == "overwrite" and opts.replace_where is None
    return use_dynamic_overwrite(
        partition_columns, opts.partition_overwrite_mode, opts.conf, opts.replace_where, can_overwrite_schema
    )


def _overwrite_kind(mode: str, dynamic: bool) -> str | None:
    if mode != "overwrite":
        return None
    return "partitions" if dynamic else "table"


def _remove_overwritten(plan: WritePlan, adds: Sequence[AddFile]) -> list[AddFile]:
    """Add the removes of an overwrite to its commit and record what it read; the removed files.

    Static: every file, read as the whole table. Dynamic: the files of the partitions ``adds``
    write into (none for an empty input), read with a predicate over those partitions (Delta's
    ``filterFiles(newFiles)`` tracks that partition predicate): a concurrent change in another
    partition does not conflict, a concurrent DELETE/UPDATE of a replaced file does, and a
    concurrent blind append does not under WriteSerializable, as in Delta."""
    txn = plan.transaction
    snapshot = plan.base
    if plan.overwrite is None or snapshot is None:
        return []
    if plan.overwrite == "table":
        removed = list(snapshot.files)
        txn.record_read(removed, None)
    else:
        removed, keys = files_to_replace(snapshot, adds)
        txn.record_read(removed, lambda add: partition_key(snapshot, add) in keys)
    now = int(time.time() * 1000)
    txn.add_actions(f.to_remove(now) for f in removed)
    return removed


def record_identity_marks(plan: WritePlan, marks: Mapping[str, int | None]) -> None:
    """Put the identity columns' new high-water marks into the commit (a ``metaData`` action), so a
    concurrent writer that assigned values from the same marks fails with MetadataChangedError."""
    record_marks(plan.transaction, marks)


def record_marks(txn: Transaction, marks: Mapping[str, int | None]) -> None:
    """``record_identity_marks`` for any transaction on an existing table (appends, MERGE inserts):
    the metadata it already carries (schema evolution) or the read snapshot's, with the new marks."""
    base = txn.new_metadata
    if base is None:
        assert txn.read_snapshot is not None  # identity columns exist only in existing tables here
        base = txn.read_snapshot.metadata
    updated = with_high_water_marks(base, marks)
    if updated is not base:
        txn.update_metadata(updated)


def finish_write(plan: WritePlan, adds: Sequence[AddFile], executor: Executor | None = None) -> int:
    """Commit the written files; they are deleted again if the commit does not happen.

    With ``replaceWhere`` the rows it matches are deleted first, by ``executor`` (DVs or
    rewrites, as a DELETE would), in the same commit. A plain overwrite removes every file, a
    dynamic partition overwrite the files of the partitions ``adds`` write into. A repeated idempotent write
    (``plan.repeat``) commits nothing and returns the table's current version.
    """
    if plan.repeat:
        assert plan.transaction.read_snapshot is not None
        return plan.transaction.read_snapshot.version
    metrics: dict[str, Any] = {
        "numFiles": len(adds),
        "numOutputRows": sum(a.num_records or 0 for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
    }
    if plan.replace is not None:
        if executor is None:
            raise TypeError("a replaceWhere write needs the executor that deletes the replaced rows")
        ctx = plan.replace
        ctx.written.add_data_files(adds)
        with ctx.cleaning_up_on_failure():
            deleted = delete_metrics(ctx, executor.name)
            delete_rows(ctx, executor, deleted)
            if deleted["numAddedChangeFiles"] and adds:
                # The delete wrote change files (copy-on-write), so readers take this version's
                # changes from change files only: the new rows must be in them as inserts, or the
                # feed would lose them (Delta's WriteIntoDelta, cdcExistsInRemoveOp).
                register_change_files(ctx, executor.write_inserted_change_data(ctx, adds))
            metrics.update({k: deleted[k] for k in REPLACE_METRICS})
            ctx.transaction.add_actions(adds)
            return commit_or_clean_up(ctx.transaction, metrics, ctx.written)
    written = WrittenFiles(plan.table_root)
    written.add_data_files(adds)
    if plan.overwrite is not None:  # Delta's OVERWRITE_REMOVES metrics, logged for every overwrite
        try:
            removed = _remove_overwritten(plan, adds)
        except BaseException:  # e.g. a partition value another writer logged that does not parse
            written.remove_all()
            raise
        metrics.update({"numRemovedFiles": len(removed), "numRemovedBytes": sum(f.size for f in removed)})
    plan.transaction.add_actions(adds)
    return commit_or_clean_up(plan.transaction, metrics, written)
