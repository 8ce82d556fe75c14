"""CREATE / REPLACE TABLE from a column list: the commit behind delta-spark's ``DeltaTableBuilder``.

The four builder modes behave as Delta's SQL statements do:

- ``create`` (CREATE TABLE): a table already at the location is an error;
- ``createIfNotExists`` (CREATE TABLE IF NOT EXISTS): an existing table is left untouched and
  returned as it is, whatever columns were asked for;
- ``replace`` (REPLACE TABLE): the table must exist; one commit removes every live file and
  writes a new ``metaData`` (schema, partitioning, properties, description). As in Delta the
  table id is kept (it is the same table, logically emptied and redefined), and the protocol is
  never downgraded: it becomes the union of the old one and what the new definition needs. An
  append-only table with files is refused (its files cannot be removed);
- ``createOrReplace`` (CREATE OR REPLACE TABLE): replace when it exists, else create; either way
  the commit records Delta's ``CREATE OR REPLACE TABLE``.

Everything that can reject the statement (types, names, partitioning, properties, and, in the
transaction, NOT NULL nested inside an array or a map: :mod:`dvengine.protocol.nested_not_null`)
is checked before the commit, and nothing but the commit file is written, so a failure leaves the
folder as it was. New tables get deletion vectors on, like every table dvengine creates.

``delta.feature.<name>`` properties add that feature to the protocol and are not kept in the
configuration, as Delta does (:mod:`dvengine.protocol.feature_properties`); a column with a
``CURRENT_DEFAULT`` needs ``allowColumnDefaults`` (:func:`dvengine.writing.defaults.check_default_definitions`).

``clustering_columns`` (``clusterBy``) makes a liquid-clustered table: the ``clustering`` and
``domainMetadata`` writer features and the ``delta.clustering`` domain in the same commit
(:mod:`dvengine.maintenance.clustering`). REPLACE of a clustered table without clustering columns
writes the domain with none, as Delta does; with partition columns it is refused.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.maintenance import clustering
from dvengine.protocol.actions import DomainMetadata, Metadata, Protocol
from dvengine.protocol.feature_properties import split_feature_properties, with_features
from dvengine.protocol.features import check_writable, is_append_only, reader_features, writer_features
from dvengine.protocol.mapping_modes import max_column_id
from dvengine.protocol.schema import StructType
from dvengine.storage import is_object_uri, storage_for
from dvengine.writing.defaults import ALLOW_COLUMN_DEFAULTS, check_default_definitions
from dvengine.writing.generated import check_generation_expressions
from dvengine.writing.identity import check_identity_definitions
from dvengine.writing.schema_checks import (
    DEFAULT_NEW_TABLE_CONFIGURATION,
    check_distinct_column_names,
    check_new_table_configuration,
    new_table_configuration,
    new_table_protocol,
    resolve_partition_columns,
)
from dvengine.writing.schema_merge import new_table_column_mapping

CREATE = "create"
CREATE_IF_NOT_EXISTS = "createIfNotExists"
REPLACE = "replace"
CREATE_OR_REPLACE = "createOrReplace"
BUILDER_MODES = (CREATE, CREATE_IF_NOT_EXISTS, REPLACE, CREATE_OR_REPLACE)


@dataclass(frozen=True)
class TableDefinition:
    """What a builder asks for; ``label`` names the table in errors (its name, else its path)."""

    location: str
    label: str
    schema: StructType
    partition_columns: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None
    managed: bool = False
    clustering_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class CreateResult:
    """``version`` is None when ``createIfNotExists`` found the table and did nothing."""

    location: str
    version: int | None


def merge_protocols(old: Protocol, new: Protocol) -> Protocol:
    """The weakest protocol allowing everything either allows (Delta's ``Protocol.merge``)."""
    if old.min_writer_version < 7 and new.min_writer_version < 7 and old.min_reader_version < 3 and new.min_reader_version < 3:
        return Protocol(max(old.min_reader_version, new.min_reader_version), max(old.min_writer_version, new.min_writer_version))
    writers = writer_features(old) | writer_features(new)
    readers = reader_features(old) | reader_features(new)
    reader_version = max(old.min_reader_version, new.min_reader_version)
    if reader_version >= 3:
        return Protocol(3, 7, tuple(sorted(readers)), tuple(sorted(writers)))
    return Protocol(reader_version, 7, None, tuple(sorted(writers)))


def _schema_name(definition: TableDefinition, column: str) -> str:
    found = definition.schema.find(column)
    return column if found is None else found.name


def _operation_parameters(definition: TableDefinition, configuration: Mapping[str, str]) -> dict[str, ParameterValue]:
    """Delta's ``CreateTable`` / ``ReplaceTable`` parameters: ``isManaged`` the string "true" /
    "false" (``isManaged.toString``), ``description`` a string or JSON null (``Option(description)``),
    the lists and the committed configuration as compact JSON text."""
    return {
        "isManaged": "true" if definition.managed else "false",
        "description": definition.description,
        "partitionBy": delta_json(list(definition.partition_columns)),
        "clusterBy": delta_json([_schema_name(definition, c) for c in definition.clustering_columns]),
        "properties": delta_json(dict(configuration)),
    }


def _check_definition(
    definition: TableDefinition, old: Snapshot | None
) -> tuple[TableDefinition, tuple[str, ...], dict[str, str], tuple[str, ...]]:
    """The definition as committed (under column mapping its schema carries ids and physical
    names, counting on from a replaced table's ``maxColumnId``), its partitioning, properties and
    the features its ``delta.feature.*`` properties ask for (removed from the properties, as Delta
    does: :mod:`dvengine.protocol.feature_properties`)."""
    if not definition.schema.fields:
        raise InvalidArgumentError(f"table {definition.label} needs at least one column (addColumn / addColumns)")
    check_distinct_column_names(definition.schema)
    check_generation_expressions(definition.schema)
    check_identity_definitions(definition.schema)
    partitions = resolve_partition_columns(definition.schema, definition.partition_columns)
    features, properties = split_feature_properties(definition.properties)
    if "clustering" in features and not definition.clustering_columns:
        raise UnsupportedFeatureError(
            f"table {definition.label}: the table property delta.feature.clustering cannot be set when creating a "
            "table without CLUSTER BY (Delta's DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED): "
            "use clusterBy(...) / CLUSTER BY (cols); nothing was written"
        )
    configuration = {**DEFAULT_NEW_TABLE_CONFIGURATION, **properties}
    check_new_table_configuration(configuration)
    previous_max = 0 if old is None else max_column_id(old.configuration)
    schema, configuration = new_table_column_mapping(definition.schema, configuration, previous_max)
    configuration = new_table_configuration(schema, configuration)
    return dataclasses.replace(definition, schema=schema), partitions, configuration, features


def _clustering_actions(definition: TableDefinition, configuration: dict[str, str], old: Snapshot | None) -> list[DomainMetadata]:
    """The ``delta.clustering`` domain this definition needs (none for an unclustered new table)."""
    if definition.clustering_columns:
        names = clustering.resolve_clustering_columns(
            definition.schema, definition.partition_columns, definition.clustering_columns, configuration
        )
        return [clustering.domain_action([definition.schema.get(n).physical_name for n in names])]
    if old is not None and clustering.clustering_columns(old):
        if definition.partition_columns:
            raise InvalidArgumentError(
                f"Replacing clustered table {definition.label} with a partitioned table is not allowed "
                f"(partitionedBy {list(definition.partition_columns)})"
            )
        return [clustering.domain_action([])]
    return []


def _check_empty_location(root: str, label: str) -> None:
    """Delta refuses to create a table over files that are not a Delta table (they would become
    invisible, neither data nor garbage); only an empty ``_delta_log`` folder is tolerated."""
    if is_object_uri(root):
        listed = [i.path[len(root) + 1 :] for i in storage_for(root).list_files(root)]
        entries = sorted({p.split("/", 1)[0] for p in listed})
        if entries:
            raise InvalidArgumentError(
                f"cannot create table {label}: its location {root} is not empty and not a Delta table "
                f"(it holds {', '.join(entries[:5])}{' ...' if len(entries) > 5 else ''})"
            )
        return
    if not os.path.isdir(root):
        return
    entries = sorted(e for e in os.listdir(root) if not (e == "_delta_log" and not os.listdir(os.path.join(root, e))))
    if entries:
        raise InvalidArgumentError(
            f"cannot create table {label}: its location {root} is not empty and not a Delta table "
            f"(it holds {', '.join(entries[:5])}{' ...' if len(entries) > 5 else ''})"
        )


@dataclass(frozen=True)
class PreparedCreate:
    """A checked CREATE / REPLACE, its transaction opened and not committed: ``schema`` is the
    table's as committed (ids and physical names under column mapping), ``metrics`` those of the
    replaced files for a replace AS SELECT, else empty: Delta's ``ReplaceTable`` declares
    ``DeltaOperations.WRITE ++ OVERWRITE_REMOVES`` only when ``asSelect`` and no metrics otherwise,
    so REPLACE TABLE without AS logs ``"operationMetrics":{}`` while its ``remove`` actions stay
    (``CreateTable`` likewise). The AS SELECT path writes its rows into ``transaction`` before
    committing, so rows and definition land in one commit."""

    transaction: Transaction
    schema: StructType
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    metrics: dict[str, int]


def _operation(mode: str, as_select: bool) -> str:
    """Delta's operation name, which follows the statement, not whether the table existed
    (``CreateDeltaTableCommand.getOperation``): ``TableCreationModes.CreateOrReplace`` is always a
    ``DeltaOperations.ReplaceTable(orCreate = true)``, so CREATE OR REPLACE records ``CREATE OR
    REPLACE TABLE`` (``... AS SELECT``) also when it creates the table."""
    name = {CREATE_OR_REPLACE: "CREATE OR REPLACE TABLE", REPLACE: "REPLACE TABLE"}.get(mode, "CREATE TABLE")
    return name + " AS SELECT" if as_select else name


def _check_removable(snapshot: Snapshot, label: str, as_select: bool) -> None:
    """Refuse to replace an append-only table whose rows the replace would remove, as Delta does on
    its two paths: REPLACE without AS commits a ``remove`` per live file, and its commit refuses
    data-changing removes on an append-only table (``OptimisticTransaction.prepareCommit`` ->
    ``DeltaLog.assertRemovable``), so an append-only table without files can be replaced;
    REPLACE ... AS writes through ``WriteIntoDelta`` in Overwrite mode, which calls
    ``assertRemovable`` on any existing table, files or not. The rule reads the table as it is
    (the replacement's own ``delta.appendOnly`` does not matter)."""
    if not is_append_only(snapshot.configuration):
        return
    if as_select or snapshot.files:
        raise InvalidArgumentError(
            f"table {label} is append-only (delta.appendOnly=true): replacing it would remove its rows, and Delta "
            "refuses removing files of an append-only table (DELTA_CANNOT_MODIFY_APPEND_ONLY); nothing was written"
        )


def prepare_create(
    definition: TableDefinition, mode: str, as_select: bool = False, conf: ConfLookup | None = None
) -> PreparedCreate | None:
    """Every check of ``mode`` against ``definition.location`` and the transaction that commits it
    (None when ``createIfNotExists`` found the table); nothing is written. ``as_select``: the
    rows of a query follow (the operation is Delta's ``... AS SELECT`` one). Replacing an
    append-only table is refused as Delta refuses it (:func:`_check_removable`). ``conf``: the
    session's conf, which the commit reads (None: dvengine's configuration)."""
    if mode not in BUILDER_MODES:
        raise InvalidArgumentError(f"builder mode must be one of {BUILDER_MODES}, got {mode!r}")
    root = definition.location
    exists = table_exists(root)
    if exists and mode == CREATE:
        raise TableAlreadyExistsError(f"Table {definition.label} already exists (a Delta table is at {root})")
    if exists and mode == CREATE_IF_NOT_EXISTS:
        return None
    if not exists and mode == REPLACE:
        raise TableNotFoundError(
            f"Table {definition.label} cannot be found: REPLACE needs an existing table at {root} (use createOrReplace)"
        )
    if not exists:
        _check_empty_location(root, definition.label)
    snapshot = load_snapshot(root) if exists else None
    definition, partitions, configuration, features = _check_definition(definition, snapshot)
    now = int(time.time() * 1000)
    schema_string = definition.schema.to_json_string()
    params = _operation_parameters(definition, configuration)
    operation = _operation(mode, as_select)
    wanted_protocol = with_features(new_table_protocol(definition.schema, configuration), features)
    old_writers = frozenset() if snapshot is None else writer_features(snapshot.protocol)
    check_default_definitions(
        definition.schema, ALLOW_COLUMN_DEFAULTS in writer_features(wanted_protocol) | old_writers, definition.label
    )
    if snapshot is None:
        metadata = Metadata(
            id=str(uuid.uuid4()), schema_string=schema_string, partition_columns=partitions,
            configuration=configuration, description=definition.description, created_time=now,
        )
        domains = _clustering_actions(definition, configuration, None)
        if domains:
            wanted_protocol = clustering.clustered_protocol(wanted_protocol)
        check_writable(wanted_protocol, metadata)
        txn = Transaction(root, None, operation, params, conf=conf)
        txn.update_protocol(wanted_protocol)
        txn.update_metadata(metadata)
        txn.add_actions(domains)
        return PreparedCreate(txn, definition.schema, partitions, configuration, {})
    check_writable(snapshot.protocol, snapshot.metadata)
    _check_removable(snapshot, definition.label, as_select)
    metadata = Metadata(
        id=snapshot.metadata.id, schema_string=schema_string, partition_columns=partitions,
        configuration=configuration, description=definition.description, created_time=now,
    )
    domains = _clustering_actions(definition, configuration, snapshot)
    if definition.clustering_columns:
        wanted_protocol = clustering.clustered_protocol(wanted_protocol)
    protocol = merge_protocols(snapshot.protocol, wanted_protocol)
    check_writable(protocol, metadata)
    txn = Transaction(root, snapshot, operation, params, conf=conf)
    txn.record_read(snapshot.files, None)
    if protocol != snapshot.protocol:
        txn.update_protocol(protocol)
    txn.update_metadata(metadata)
    txn.add_actions(f.to_remove(now) for f in snapshot.files)
    txn.add_actions(domains)
    metrics: dict[str, int] = {}
    if as_select:  # ReplaceTable.operationMetrics: WRITE ++ OVERWRITE_REMOVES with AS SELECT, else none
        metrics = {"numRemovedFiles": len(snapshot.files), "numRemovedBytes": sum(f.size for f in snapshot.files)}
    return PreparedCreate(txn, definition.schema, partitions, configuration, metrics)


def create_table(definition: TableDefinition, mode: str, conf: ConfLookup | None = None) -> CreateResult:
    """Run one builder ``mode`` against ``definition.location``; see the module docstring.
    ``conf``: the session's conf (None: dvengine's configuration)."""
    prepared = prepare_create(definition, mode, conf=conf)
    if prepared is None:
        return CreateResult(definition.location, None)
    return CreateResult(definition.location, prepared.transaction.commit(prepared.metrics))
