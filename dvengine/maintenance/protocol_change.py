"""upgradeTableProtocol / addFeatureSupport / dropFeatureSupport: commits that change the protocol.

Each is one transaction whose only change is the ``protocol`` action (plus, for a drop, the
steps Delta's DROP FEATURE takes first). A concurrent protocol or metadata change makes the
commit fail with a typed conflict (``ProtocolChangedError`` / ``MetadataChangedError``).

Dropping ``deletionVectors`` follows Delta's DeletionVectorsPreDowngradeCommand as far as it can
be done here: (1) commit ``delta.enableDeletionVectors=false`` so no writer adds new DVs, (2)
purge the DVs of live files (REORG ... APPLY (PURGE), files rewritten without deleted rows), (3)
remove the feature only when no commit left in the log references a DV. When older commits still
do (readers that time-travel to them need the feature), the command stops with
:class:`OperationNotAllowedError` after steps 1-2, as Delta does before its retention period has
passed; history truncation and Delta 4's checkpointProtection fast drop are not implemented.

Dropping ``rowTracking`` follows Delta 4.x's steps exactly (``drop_row_tracking``): disable and
suspend, un-backfill the files' row ids, then the downgrade commit that also removes the row
tracking properties and tombstones the ``delta.rowTracking`` domain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dvengine.commit.commit_info import ParameterValue, delta_json, predicate_parameter
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.log.commit_file import parse_actions
from dvengine.log.listing import list_log
from dvengine.maintenance.optimize import BinRewriter, purge_plan, run_optimize
from dvengine.maintenance.properties import set_table_properties
from dvengine.protocol import row_tracking
from dvengine.protocol.actions import AddFile, Metadata, Protocol, RemoveFile
from dvengine.protocol.feature_catalog import feature_info, upgraded, with_feature, without_feature
from dvengine.protocol.features import (
    DELETION_VECTORS,
    SUPPORTED_WRITER_FEATURES,
    check_writable,
    writer_features,
)
from dvengine.storage.logstore import LocalLogStore

ENABLE_DVS = "delta.enableDeletionVectors"
# Features dvengine knows how to drop (Delta can drop more: v2Checkpoint, columnMapping, ...).
DROPPABLE = frozenset({DELETION_VECTORS, "checkConstraints", row_tracking.FEATURE})

def _commit_protocol(
    snapshot: Snapshot, protocol: Protocol, operation: str, params: dict[str, ParameterValue], conf: ConfLookup | None
) -> int:
    txn = Transaction(snapshot.table_root, snapshot, operation, params, conf=conf)
    txn.record_read([], None)
    txn.update_protocol(protocol)
    return txn.commit()


def upgrade_protocol_parameters(new: Protocol) -> dict[str, ParameterValue]:
    """DeltaOperations.UpgradeProtocol: ``newProtocol`` is one JSON text of the versions and the
    feature sets (Jackson leaves an absent set out, as ``Protocol.to_json`` does)."""
    return {"newProtocol": delta_json(new.to_json())}


def upgrade_protocol(table_root: str, reader_version: int, writer_version: int, conf: ConfLookup | None = None) -> int | None:
    """Raise the protocol versions; returns the committed version, or None when nothing changed."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    new = upgraded(snapshot.protocol, reader_version, writer_version)
    if new == snapshot.protocol:
        return None
    return _commit_protocol(snapshot, new, "UPGRADE PROTOCOL", upgrade_protocol_parameters(new), conf)

def add_feature(table_root: str, name: str, conf: ConfLookup | None = None) -> int | None:
    """Add ``name`` to the supported features; None when it was supported already."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    feature_info(name)
    if name in writer_features(snapshot.protocol):
        return None  # supported already, explicitly or implied by a legacy version (as in Delta: a no-op)
    if name not in SUPPORTED_WRITER_FEATURES:
        raise UnsupportedFeatureError(
            f"adding table feature {name!r} is refused: dvengine does not implement it, so no dvengine writer "
            f"could write the table afterwards; supported: {sorted(SUPPORTED_WRITER_FEATURES)}"
        )
    if name == "clustering":  # needs the clustering domain and an unpartitioned table, not just the name
        raise UnsupportedFeatureError(
            "adding table feature 'clustering' alone is refused (as Delta refuses enabling it by table property): "
            "create the table with clusterBy(...) / CLUSTER BY, or run ALTER TABLE ... CLUSTER BY (cols) on it"
        )
    # rowTracking requires domainMetadata (PROTOCOL.md "Row Tracking"), as Delta adds it too
    new = row_tracking.with_row_tracking(snapshot.protocol) if name == row_tracking.FEATURE else with_feature(snapshot.protocol, name)
    return _commit_protocol(snapshot, new, "UPGRADE PROTOCOL", upgrade_protocol_parameters(new), conf)

def _history_uses_dvs(table_root: str) -> list[int]:
    """Versions of the commit files still in the log whose add/remove actions carry a DV."""
    store = LocalLogStore()
    listing = list_log(store, table_root)
    found = []
    for version, info in sorted(listing.commits.items()):
        raw = store.read_bytes(info.path)
        if b"deletionVector" not in raw:
            continue
        actions = parse_actions(raw, info.path)
        if any(isinstance(a, (AddFile, RemoveFile)) and a.deletion_vector is not None for a in actions):
            found.append(version)
    return found


def drop_feature_parameters(name: str, truncate_history: bool | None) -> dict[str, ParameterValue]:
    """DeltaOperations.DropTableFeature: ``featureName`` and ``truncateHistory`` always, a JSON
    boolean (AlterTableDropFeatureDeltaCommand's ``truncateHistory`` defaults to false)."""
    return {"featureName": name, "truncateHistory": bool(truncate_history)}


def _disable_dvs(snapshot: Snapshot, conf: ConfLookup | None) -> None:
    config = dict(snapshot.metadata.configuration)
    config[ENABLE_DVS] = "false"
    metadata: Metadata = dataclasses.replace(snapshot.metadata, configuration=config)
    txn = Transaction(snapshot.table_root, snapshot, "SET TBLPROPERTIES", {"properties": delta_json({ENABLE_DVS: "false"})}, conf=conf)
    txn.update_metadata(metadata)
    txn.commit()


def drop_feature(
    table_root: str, name: str, truncate_history: bool | None, rewrite: BinRewriter, conf: ConfLookup | None = None
) -> int:
    """Drop ``name`` from the protocol; returns the version of the protocol commit."""
    info = feature_info(name)
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    if name not in writer_features(snapshot.protocol):
        raise OperationNotAllowedError(
            f"DROP FEATURE {name}: the table {table_root} does not support feature {name!r} "
            f"(its protocol: {snapshot.protocol.to_json()})"
        )
    if name not in DROPPABLE:
        raise UnsupportedFeatureError(
            f"DROP FEATURE {name} is not implemented by dvengine (droppable here: {sorted(DROPPABLE)}); nothing was changed"
        )
    if name == "checkConstraints":
        constraints = sorted(k for k in snapshot.configuration if k.startswith("delta.constraints."))
        if constraints:
            raise OperationNotAllowedError(
                f"DROP FEATURE checkConstraints: the table still has constraints {constraints}; drop them first"
            )
    if name == row_tracking.FEATURE:
        return drop_row_tracking(snapshot, truncate_history, conf)
    if info.reader_writer and name == DELETION_VECTORS:
        if snapshot.configuration.get(ENABLE_DVS, "false").lower() == "true":
            _disable_dvs(snapshot, conf)
            snapshot = load_snapshot(table_root)
        if any(f.deletion_vector is not None for f in snapshot.files):
            run_optimize(
                purge_plan(snapshot), rewrite, "REORG", {"predicate": predicate_parameter(None), "applyPurge": True}, conf
            )
            snapshot = load_snapshot(table_root)
        traces = _history_uses_dvs(table_root)
        if traces:
            how = "history truncation (truncateHistory=True)" if truncate_history else "waiting for the log retention period"
            raise OperationNotAllowedError(
                f"DROP FEATURE deletionVectors on {table_root}: DVs were disabled and purged from the current version "
                f"{snapshot.version}, but commits {traces[:5]}{'...' if len(traces) > 5 else ''} still reference DVs and "
                f"readers may time-travel to them. Delta removes the feature after {how}; dvengine implements neither "
                "history truncation nor checkpointProtection, so the feature stays until those commits are cleaned up"
            )
    new = without_feature(snapshot.protocol, name)
    return _commit_protocol(snapshot, new, "DROP FEATURE", drop_feature_parameters(name, truncate_history), conf)

def _row_tracking_traces(snapshot: Snapshot) -> list[str]:
    """Why the table still shows row tracking (Delta's ``RowTrackingFeature.validateDropInvariants``
    fails): enabled, not suspended, or live files carrying ``baseRowId`` / ``defaultRowCommitVersion``."""
    config = snapshot.metadata.configuration
    traces = []
    if row_tracking.enabled(config):
        traces.append(f"{row_tracking.ENABLE}=true")
    if str(config.get(row_tracking.SUSPENDED, "false")).lower() != "true":
        traces.append(f"{row_tracking.SUSPENDED} is not true")
    carrying = [f.path for f in snapshot.files if f.base_row_id is not None or f.default_row_commit_version is not None]
    if carrying:
        traces.append(f"{len(carrying)} live files carry row ids (e.g. {carrying[0]})")
    return traces


def drop_row_tracking(snapshot: Snapshot, truncate_history: bool | None, conf: ConfLookup | None = None) -> int:
    """DROP FEATURE rowTracking in Delta's steps (``RowTrackingPreDowngradeCommand``, then the
    downgrade commit of ``RowTrackingFeature``; Delta 4.x, ``TableFeature.scala``):

    1. ``SET TBLPROPERTIES delta.enableRowTracking=false, delta.rowTrackingSuspended=true``, so
       no reader expects ids any more and no writer assigns new ones;
    2. ``ROW TRACKING UNBACKFILL``: every live file with ``baseRowId`` / ``defaultRowCommitVersion``
       re-added without them (``dataChange=false``; Delta commits this in batches, here in one
       commit, conflict-checked against the whole table);
    3. the downgrade commit (``DROP FEATURE``): the protocol without ``rowTracking`` (``domainMetadata``
       stays, a feature of its own), the four row tracking properties removed, and the
       ``delta.rowTracking`` domain as a ``removed`` tombstone.

    Steps 1-2 are skipped when the table already shows no trace. Row tracking does not require
    history protection in Delta (``requiresHistoryProtection = false``), so old commits with ids do
    not block the drop. The materialized columns stay in the data files (unnamed by the
    configuration, readers ignore them), as Delta leaves them."""
    root = snapshot.table_root
    if truncate_history:
        raise OperationNotAllowedError(
            f"DROP FEATURE rowTracking TRUNCATE HISTORY on {root}: row tracking does not require history truncation "
            "(Delta's DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED); drop it without truncateHistory; nothing was changed"
        )
    if _row_tracking_traces(snapshot):
        set_table_properties(root, {row_tracking.ENABLE: "false", row_tracking.SUSPENDED: "true"}, conf)
        snapshot = load_snapshot(root)
        carrying = [f for f in snapshot.files if f.base_row_id is not None or f.default_row_commit_version is not None]
        if carrying:
            # DeltaOperations.RowTrackingUnBackfill logs "batchId" -> JsonUtils.toJson(batchId): the string "0"
            txn = Transaction(root, snapshot, "ROW TRACKING UNBACKFILL", {"batchId": delta_json(0)}, conf=conf)
            txn.record_read(carrying, None)  # a concurrent change of any file (or an append) conflicts
            txn.add_actions([
                dataclasses.replace(f, base_row_id=None, default_row_commit_version=None, data_change=False)
                for f in carrying
            ])
            txn.commit()
            snapshot = load_snapshot(root)
    traces = _row_tracking_traces(snapshot)
    if traces:  # a concurrent writer re-enabled it between the steps
        raise OperationNotAllowedError(
            f"DROP FEATURE rowTracking on {root}: the table still shows row tracking at version {snapshot.version} "
            f"({'; '.join(traces)}; Delta's DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL); nothing more was changed"
        )
    configuration = {k: v for k, v in snapshot.metadata.configuration.items() if k not in _ROW_TRACKING_PROPERTIES}
    txn = Transaction(root, snapshot, "DROP FEATURE", drop_feature_parameters(row_tracking.FEATURE, truncate_history), conf=conf)
    txn.record_read(snapshot.files, None)
    txn.update_protocol(without_feature(snapshot.protocol, row_tracking.FEATURE))
    txn.update_metadata(dataclasses.replace(snapshot.metadata, configuration=configuration))
    domain = snapshot.domain_metadata.get(row_tracking.DOMAIN)
    if domain is not None and not domain.removed:
        txn.add_actions([dataclasses.replace(domain, removed=True)])
    return txn.commit()


# Removed by the downgrade commit (Delta's tablePropertiesToRemoveAtDowngradeCommit).
_ROW_TRACKING_PROPERTIES = frozenset({
    row_tracking.ENABLE,
    row_tracking.SUSPENDED,
    row_tracking.ROW_ID_COLUMN_KEY,
    row_tracking.ROW_COMMIT_VERSION_COLUMN_KEY,
})

RewriterFactory = Callable[[], BinRewriter]
