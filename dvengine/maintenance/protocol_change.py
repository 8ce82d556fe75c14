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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dvengine.commit.transaction import Transaction
from dvengine.errors import OperationNotAllowedError, UnsupportedFeatureError
from dvengine.log import Snapshot, load_snapshot
from dvengine.log.commit_file import parse_actions
from dvengine.log.listing import list_log
from dvengine.maintenance.optimize import BinRewriter, purge_plan, run_optimize
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
DROPPABLE = frozenset({DELETION_VECTORS, "checkConstraints"})

def _commit_protocol(snapshot: Snapshot, protocol: Protocol, operation: str, params: dict[str, object]) -> int:
    txn = Transaction(snapshot.table_root, snapshot, operation, params)
    txn.record_read([], None)
    txn.update_protocol(protocol)
    return txn.commit()

def upgrade_protocol(table_root: str, reader_version: int, writer_version: int) -> int | None:
    """Raise the protocol versions; returns the committed version, or None when nothing changed."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    new = upgraded(snapshot.protocol, reader_version, writer_version)
    if new == snapshot.protocol:
        return None
    params: dict[str, object] = {"newProtocol": new.to_json()}
    return _commit_protocol(snapshot, new, "UPGRADE PROTOCOL", params)

def add_feature(table_root: str, name: str) -> int | None:
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
            "adding table feature 'clustering' alone is refused: create the table with clusterBy(...) / CLUSTER BY; "
            "ALTER TABLE ... CLUSTER BY is not implemented by dvengine"
        )
    # rowTracking requires domainMetadata (PROTOCOL.md "Row Tracking"), as Delta adds it too
    new = row_tracking.with_row_tracking(snapshot.protocol) if name == row_tracking.FEATURE else with_feature(snapshot.protocol, name)
    return _commit_protocol(snapshot, new, "UPGRADE PROTOCOL", {"newProtocol": new.to_json()})

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

def _disable_dvs(snapshot: Snapshot) -> None:
    config = dict(snapshot.metadata.configuration)
    config[ENABLE_DVS] = "false"
    metadata: Metadata = dataclasses.replace(snapshot.metadata, configuration=config)
    txn = Transaction(snapshot.table_root, snapshot, "SET TBLPROPERTIES", {"properties": {ENABLE_DVS: "false"}})
    txn.update_metadata(metadata)
    txn.commit()

def drop_feature(
    table_root: str, name: str, truncate_history: bool | None, rewrite: BinRewriter
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
    if info.reader_writer and name == DELETION_VECTORS:
        if snapshot.configuration.get(ENABLE_DVS, "false").lower() == "true":
            _disable_dvs(snapshot)
            snapshot = load_snapshot(table_root)
        if any(f.deletion_vector is not None for f in snapshot.files):
            run_optimize(purge_plan(snapshot), rewrite, "REORG", {"predicate": "[]", "applyPurge": True})
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
    params: dict[str, object] = {"featureName": name}
    if truncate_history is not None:
        params["truncateHistory"] = truncate_history
    return _commit_protocol(snapshot, new, "DROP FEATURE", params)

RewriterFactory = Callable[[], BinRewriter]
