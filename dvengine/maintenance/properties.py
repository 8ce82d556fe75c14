"""ALTER TABLE ... SET / UNSET TBLPROPERTIES: a commit whose only change is the table's configuration.

Properties are validated as when a table is created (``writing.properties``), so a bad value
fails here, naming key and value, instead of in whatever later commit first reads it. Turning a
feature on by its property also upgrades the protocol in the same commit, as Delta does:
``delta.feature.<name> = supported`` adds that feature (and is not kept in the configuration, as
Delta's ``filterProtocolPropsFromTableProps``),
``delta.enableChangeDataFeed=true`` adds the ``changeDataFeed`` writer feature (writer 4 on a
legacy protocol), ``delta.enableDeletionVectors=true`` the ``deletionVectors`` reader-writer
feature. ``delta.columnMapping.mode`` = ``name`` on an unmapped table upgrades it as Delta does,
without rewriting a file: every field gets an id and its own name as physical name, the
configuration ``maxColumnId``, the protocol ``columnMapping``. Every other change of the mode
(``none`` -> ``id``, ``name`` <-> ``id``, removing the mapping, which Delta does by rewriting
every file) and setting ``maxColumnId`` by hand are refused with a typed error; nothing is
committed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dvengine.commit import in_commit_timestamps
from dvengine.commit.commit_info import ParameterValue, delta_json
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.log import Snapshot, checkpoint_v2, load_snapshot
from dvengine.protocol import row_tracking, type_widening
from dvengine.protocol.actions import AddFile, Metadata, Protocol
from dvengine.protocol.feature_properties import split_feature_properties, with_features
from dvengine.protocol.features import (
    ENABLE_CHANGE_DATA_FEED,
    check_writable,
    with_change_data_feed,
    with_deletion_vectors,
)
from dvengine.protocol.mapping_modes import (
    MAX_COLUMN_ID_KEY,
    MODE_KEY,
    NONE,
    check_mode_change,
    requested_mode,
    with_column_mapping,
)
from dvengine.writing.properties import validate_table_properties
from dvengine.writing.schema_merge import upgrade_to_name_mapping

ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
# Kept by dvengine as the field ids it assigns require (set only with the ids themselves).
_NOT_SETTABLE = (MAX_COLUMN_ID_KEY,)


def set_table_properties(table_root: str, properties: Mapping[str, str], conf: ConfLookup | None = None) -> int:
    """Set ``properties`` (string values) on the latest version; returns the committed version.
    ``conf``: the session's conf, which the commit reads (None: dvengine's configuration)."""
    if not properties:
        raise InvalidArgumentError("SET TBLPROPERTIES needs at least one property")
    validate_table_properties(properties)
    for key in properties:
        if key in _NOT_SETTABLE:
            raise UnsupportedFeatureError(f"changing table property {key} is not supported by dvengine; nothing was changed")
    # ``delta.feature.<name>`` adds the feature to the protocol and is not kept (as at CREATE):
    # Delta's documented way to turn on allowColumnDefaults before ALTER COLUMN ... SET DEFAULT.
    features, plain = split_feature_properties({k: str(v) for k, v in properties.items()})
    if "clustering" in features:  # clustering is enabled by DDL only: it needs its domain and columns
        raise UnsupportedFeatureError(
            f"SET TBLPROPERTIES on {table_root}: the table feature clustering cannot be enabled by a table property "
            "(Delta's DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED): use ALTER TABLE ... CLUSTER BY "
            "(cols); nothing was changed"
        )
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    configuration = {**snapshot.metadata.configuration, **plain}
    protocol = with_features(snapshot.protocol, features)
    schema_string = snapshot.metadata.schema_string
    old_mode, new_mode = snapshot.column_mapping_mode, requested_mode(configuration)
    check_mode_change(old_mode, new_mode, table_root)
    if new_mode != old_mode:  # none -> name, the one change allowed
        schema, configuration = upgrade_to_name_mapping(snapshot.schema, configuration, table_root)
        schema_string = schema.to_json_string()
    if configuration.get(ENABLE_CHANGE_DATA_FEED, "false").lower() == "true":
        protocol = with_change_data_feed(protocol)
    if configuration.get(ENABLE_DELETION_VECTORS, "false").lower() == "true":
        protocol = with_deletion_vectors(protocol)
    protocol = in_commit_timestamps.protocol_for(protocol, configuration)  # the commit records its enablement
    backfill: list[AddFile] | None = None
    tags: dict[str, str] = {}
    if row_tracking.enabled(configuration) and not row_tracking.enabled(snapshot.metadata.configuration):
        protocol, configuration, backfill = _enable_row_tracking(snapshot, protocol, configuration)
        if set(properties) == {row_tracking.ENABLE}:
            tags[row_tracking.ENABLEMENT_ONLY_TAG] = "true"  # as Delta's ALTER TABLE tags it
    protocol = type_widening.protocol_for(protocol, configuration)
    protocol = checkpoint_v2.protocol_for_policy(protocol, configuration)
    if new_mode != NONE:  # last: a writer-7 protocol then lists it as a reader feature too
        protocol = with_column_mapping(protocol)
    return _commit(
        snapshot, configuration, protocol, "SET TBLPROPERTIES",
        {"properties": delta_json({k: str(v) for k, v in properties.items()})}, backfill, tags,
        schema_string, conf,
    )


def _enable_row_tracking(
    snapshot: Snapshot, protocol: Protocol, configuration: dict[str, str]
) -> tuple[Protocol, dict[str, str], list[AddFile]]:
    """What turning row tracking on needs besides the property (PROTOCOL.md "Row Tracking"): the
    ``rowTracking`` and ``domainMetadata`` features, the materialized column names, and every live
    file without ``baseRowId`` / ``defaultRowCommitVersion`` re-added (``dataChange=false``) so
    the commit assigns them: Delta's backfill, done here in the enabling commit itself, which the
    protocol allows. Concurrent writers are folded into the backfill, not conflicts
    (commit/row_tracking_conflicts.py).
    """
    names = [f.physical_name for f in snapshot.schema.fields]
    configuration = row_tracking.enable_configuration(configuration, names)
    backfill = [f for f in snapshot.files if f.base_row_id is None or f.default_row_commit_version is None]
    return row_tracking.with_row_tracking(protocol), configuration, backfill


def unset_table_properties(
    table_root: str, keys: Sequence[str], if_exists: bool = False, conf: ConfLookup | None = None
) -> int | None:
    """Remove ``keys``; a missing key is an error unless ``if_exists`` (then None if nothing changed).
    ``conf``: the session's conf, which the commit reads (None: dvengine's configuration)."""
    if not keys:
        raise InvalidArgumentError("UNSET TBLPROPERTIES needs at least one property")
    for key in keys:
        if key in _NOT_SETTABLE:
            raise UnsupportedFeatureError(f"removing table property {key} is not supported by dvengine; nothing was changed")
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    if MODE_KEY in keys:  # back to the default, 'none'
        check_mode_change(snapshot.column_mapping_mode, NONE, table_root)
    missing = [k for k in keys if k not in snapshot.metadata.configuration]
    if missing and not if_exists:
        raise InvalidArgumentError(
            f"UNSET TBLPROPERTIES: table {table_root} has no propert{'y' if len(missing) == 1 else 'ies'} "
            f"{missing}; use IF EXISTS to ignore missing ones"
        )
    configuration = {k: v for k, v in snapshot.metadata.configuration.items() if k not in keys}
    if configuration == dict(snapshot.metadata.configuration):
        return None
    # DeltaOperations.UnsetTableProperties: the keys as JSON text under "properties", ifExists a boolean
    return _commit(snapshot, configuration, snapshot.protocol, "UNSET TBLPROPERTIES",
                   {"properties": delta_json(list(keys)), "ifExists": if_exists}, conf=conf)


def _commit(snapshot: Snapshot, configuration: dict[str, str], protocol: Protocol, operation: str,
            params: dict[str, ParameterValue], backfill: Sequence[AddFile] | None = None,
            tags: Mapping[str, str] | None = None, schema_string: str | None = None,
            conf: ConfLookup | None = None) -> int:
    """One metadata (and, if it changed, protocol) action, conflict-checked against the snapshot
    read; with ``backfill``, the re-adds of a row tracking enablement (Transaction.backfill_row_ids);
    ``schema_string`` replaces the schema (column mapping's ids and physical names), which the
    commit then checks as any schema change (``conf``: the session's)."""
    metadata: Metadata = dataclasses.replace(
        snapshot.metadata, configuration=configuration, schema_string=schema_string or snapshot.metadata.schema_string
    )
    txn = Transaction(snapshot.table_root, snapshot, operation, params, conf=conf)
    txn.update_metadata(metadata)
    if protocol != snapshot.protocol:
        txn.update_protocol(protocol)
    if backfill is not None:
        txn.backfill_row_ids(backfill)
    else:
        txn.record_read((), None)  # conservative, as before: any concurrent data change conflicts
    for key, value in (tags or {}).items():
        txn.set_tag(key, value)
    return txn.commit()
