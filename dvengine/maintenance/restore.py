"""RESTORE: one commit that makes the table's live state that of an earlier version again.

As Delta's ``RestoreTableCommand`` does (and as PROTOCOL.md's reconciliation rule requires,
since a logical file is identified by its path *and* its deletion vector):

- files live in the target version but not now are re-added (the target version's ``add``
  with ``dataChange=true``); files live now but not in the target are removed; a file present in
  both with the same (path, DV unique id) is untouched. A file whose DV changed since the target
  version therefore gets its old DV back: the current (path, new DV) is removed and
  (path, old DV) added, which every reader reconciles to the old rows;
- the target version's ``metaData`` is restored (same table id), and the protocol becomes the
  union of the target's and the current one (Delta does not downgrade on restore);
- before anything is written, every data file and DV file to re-add must still exist: after a
  VACUUM it may not, and a commit pointing at missing files would break every reader. The error
  names the files; nothing is committed;
- the target must be older than the latest version (Delta's rule), and a timestamp resolves to
  the latest version committed at or before it.

The metrics are Delta's: ``table_size_after_restore``, ``num_of_files_after_restore``,
``num_removed_files``, ``num_restored_files``, ``removed_files_size``, ``restored_files_size``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

from dvengine.commands.create_table import merge_protocols
from dvengine.commit.commit_info import ParameterValue
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.dv import absolute_dv_path
from dvengine.errors import DataFileError, DeletionVectorError, InvalidArgumentError
from dvengine.log import load_snapshot
from dvengine.log.timestamps import to_epoch_ms
from dvengine.protocol.actions import AddFile
from dvengine.protocol.features import check_writable
from dvengine.storage import is_object_uri, resolve_data_path, storage_for
from dvengine.writing.identity import keep_high_water_marks

RESTORE_METRIC_COLUMNS = (
    "table_size_after_restore",
    "num_of_files_after_restore",
    "num_removed_files",
    "num_restored_files",
    "removed_files_size",
    "restored_files_size",
)
_COMMIT_METRIC_NAMES = {
    "table_size_after_restore": "tableSizeAfterRestore",
    "num_of_files_after_restore": "numOfFilesAfterRestore",
    "num_removed_files": "numRemovedFiles",
    "num_restored_files": "numRestoredFiles",
    "removed_files_size": "removedFilesSize",
    "restored_files_size": "restoredFilesSize",
}
_MAX_LISTED = 10


def _existence_check(table_root: str) -> Callable[[str], bool]:
    """``os.path.exists`` locally; on an object store one listing instead of a HEAD per file."""
    if not is_object_uri(table_root):
        return os.path.exists
    present = {info.path for info in storage_for(table_root).list_files(table_root)}
    prefix = table_root.rstrip("/") + "/"

    def exists(path: str) -> bool:  # files outside the table (shallow clones) are asked one by one
        return path in present if path.startswith(prefix) else storage_for(path).exists(path)

    return exists


def _check_available(table_root: str, files: list[AddFile], version: int) -> None:
    """DataFileError / DeletionVectorError naming the files the restore would need but are gone."""
    exists = _existence_check(table_root)
    missing_data = [f.path for f in files if not exists(resolve_data_path(table_root, f.path))]
    if missing_data:
        shown = ", ".join(missing_data[:_MAX_LISTED]) + (" ..." if len(missing_data) > _MAX_LISTED else "")
        raise DataFileError(
            f"cannot restore {table_root} to version {version}: {len(missing_data)} data file(s) it needs were "
            f"deleted (by VACUUM?): {shown}; nothing was committed"
        )
    dv_files = {
        absolute_dv_path(table_root, f.deletion_vector)
        for f in files
        if f.deletion_vector is not None and not f.deletion_vector.is_inline
    }
    gone = sorted(p for p in dv_files if not exists(p))
    if gone:
        raise DeletionVectorError(
            f"cannot restore {table_root} to version {version}: deletion vector file(s) it needs were deleted "
            f"(by VACUUM?): {', '.join(gone[:_MAX_LISTED])}; nothing was committed"
        )


def resolve_restore_version(table_root: str, version: int | None, timestamp: Any) -> int:
    """The version to restore: ``version``, or the one current at ``timestamp``."""
    if (version is None) == (timestamp is None):
        raise InvalidArgumentError("Either the version or timestamp should be provided for restore")
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int):
            raise InvalidArgumentError(f"version needs to be an int but got '{type(version)}'.")
        return version
    try:
        ts_ms = to_epoch_ms(timestamp)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(
            f"The provided timestamp ({timestamp!r}) cannot be converted to a valid timestamp: {exc}"
        ) from None
    return load_snapshot(table_root, timestamp=ts_ms).version


def restore(
    table_root: str, version: int | None = None, timestamp: Any = None, conf: ConfLookup | None = None
) -> dict[str, Any]:
    """Restore the table to ``version`` (or as of ``timestamp``); Delta's restore metrics plus ``version``.
    ``conf``: the session's conf, which the commit reads (None: dvengine's configuration)."""
    target_version = resolve_restore_version(table_root, version, timestamp)
    latest = load_snapshot(table_root)
    if target_version >= latest.version:
        raise InvalidArgumentError(
            f"Version to restore ({target_version}) should be less then last available version ({latest.version})"
        )
    target = load_snapshot(table_root, version=target_version)
    current_keys = {f.key for f in latest.files}
    target_keys = {f.key for f in target.files}
    to_add = [dataclasses.replace(f, data_change=True) for f in target.files if f.key not in current_keys]
    now = int(time.time() * 1000)
    to_remove = [f for f in latest.files if f.key not in target_keys]
    _check_available(latest.table_root, to_add, target_version)
    protocol = merge_protocols(target.protocol, latest.protocol)
    check_writable(protocol, target.metadata)
    # DeltaOperations.Restore: the version asked for as a JSON number, the timestamp as a string, the other null
    params: dict[str, ParameterValue] = {
        "version": target_version if version is not None else None,
        "timestamp": None if timestamp is None else str(timestamp),
    }
    txn = Transaction(latest.table_root, latest, "RESTORE", params, conf=conf)
    txn.record_read(latest.files, None)
    if protocol != latest.protocol:
        txn.update_protocol(protocol)
    metadata = keep_high_water_marks(target.metadata, latest.metadata)
    if metadata != latest.metadata:
        txn.update_metadata(metadata)
    txn.add_actions(to_add)
    txn.add_actions(f.to_remove(now) for f in to_remove)
    metrics = {
        "table_size_after_restore": sum(f.size for f in target.files),
        "num_of_files_after_restore": len(target.files),
        "num_removed_files": len(to_remove),
        "num_restored_files": len(to_add),
        "removed_files_size": sum(f.size for f in to_remove),
        "restored_files_size": sum(f.size for f in to_add),
    }
    committed = txn.commit({_COMMIT_METRIC_NAMES[k]: v for k, v in metrics.items()})
    return {**metrics, "version": committed}
