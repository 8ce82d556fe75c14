"""SHALLOW / DEEP CLONE of a table version to a new path.

A shallow clone is a new table (new id, its own log) whose ``add`` actions point at the source's
data files by absolute URI, so no data is copied. DVs come along: an inline DV is kept as is, a
``"p"`` (absolute path) DV too, and a ``"u"`` DV, which names a file relative to the *source*
root, becomes a ``"p"`` descriptor holding the absolute URI of that file (same offset, size and
cardinality; PROTOCOL.md "Deletion Vector Descriptor"). DML on the clone writes new data and DV
files under the clone's root only, and VACUUM on the clone lists only the clone's folder, so it
can never delete a source file. A deep clone copies the data and DV files into the target, so
its actions are relative and the clone is independent of the source.

Delta's CLONE commit: operation ``CLONE``, parameters ``source``, ``sourceVersion``,
``isShallow``; metrics ``sourceTableSize``, ``sourceNumOfFiles``, ``numRemovedFiles``,
``numCopiedFiles``, ``removedFilesSize``, ``copiedFilesSize``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from urllib.parse import quote

from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.commit.commit_info import ParameterValue
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.dv.descriptor import absolute_dv_path
from dvengine.dv.z85 import z85_encode
from dvengine.errors import InvalidArgumentError, TableAlreadyExistsError
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.protocol import row_tracking
from dvengine.protocol.actions import STORAGE_PATH, STORAGE_UUID, Action, AddFile, DeletionVectorDescriptor, Metadata
from dvengine.protocol.feature_catalog import normalized
from dvengine.protocol.features import check_writable, writer_features
from dvengine.storage import is_object_uri, join, normalize_table_path, resolve_data_path, storage_for
from dvengine.writing.files import encode_relative_path
from dvengine.writing.properties import validate_table_properties


def file_uri(path: str) -> str:
    """``file:///abs/path`` (or the object-store URI itself) percent-encoded as ``add.path`` URIs are."""
    if is_object_uri(path):
        scheme, _, rest = path.partition("://")
        return f"{scheme}://" + quote(rest, safe="/=@")
    return "file://" + quote(os.path.normpath(path), safe="/=")


def _absolute_dv(source_root: str, dv: DeletionVectorDescriptor | None) -> DeletionVectorDescriptor | None:
    if dv is None or dv.storage_type != STORAGE_UUID:
        return dv
    return dataclasses.replace(dv, storage_type=STORAGE_PATH, path_or_inline_dv=file_uri(absolute_dv_path(source_root, dv)))


def _shallow_add(source_root: str, add: AddFile) -> AddFile:
    path = file_uri(resolve_data_path(source_root, add.path))
    return dataclasses.replace(add, path=path, deletion_vector=_absolute_dv(source_root, add.deletion_vector), data_change=True)


def _copy(src: str, dst: str, written: WrittenFiles) -> None:
    target = storage_for(dst)
    if target.exists(dst):
        raise TableAlreadyExistsError(f"deep clone target file {dst} exists already; nothing was committed")
    written.add_paths([dst])
    if target.is_local and storage_for(src).is_local:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
    else:  # across stores (or within one): through memory, one file at a time
        target.put_new(dst, storage_for(src).read_bytes(src))


def _deep_add(source_root: str, target_root: str, add: AddFile, written: WrittenFiles, dv_copies: dict[str, str]) -> AddFile:
    src = resolve_data_path(source_root, add.path)
    relative = add.path if "://" not in add.path and not add.path.startswith("file:") else os.path.basename(src)
    if relative != add.path:
        relative = encode_relative_path(relative)
    _copy(src, resolve_data_path(target_root, relative), written)
    dv = add.deletion_vector
    if dv is not None and not dv.is_inline:
        dv_src = absolute_dv_path(source_root, dv)
        if dv_src not in dv_copies:
            file_uuid = uuid.uuid4()
            dv_copies[dv_src] = z85_encode(file_uuid.bytes)
            _copy(dv_src, join(target_root, f"deletion_vector_{file_uuid}.bin"), written)
        dv = dataclasses.replace(dv, storage_type=STORAGE_UUID, path_or_inline_dv=dv_copies[dv_src])
    return dataclasses.replace(add, path=relative, deletion_vector=dv, data_change=True)


def _check_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    if properties is None:
        return {}
    if not isinstance(properties, dict):
        raise ValueError(f"properties needs to be a dict but got '{type(properties)}'.")
    for k, v in properties.items():
        if not isinstance(k, str):
            raise ValueError(f"All property keys including {k} needs to be a string but got '{type(k)}'.")
        if not isinstance(v, str):
            raise ValueError(f"All property values including {v} needs to be a string but got '{type(v)}'.")
    validate_table_properties(properties)
    return dict(properties)


def _target_root(source: Snapshot, target: str) -> str:
    root = normalize_table_path(target)
    src = source.table_root if is_object_uri(source.table_root) else os.path.normpath(source.table_root)
    sep = "/" if is_object_uri(root) else os.sep
    if root == src or root.startswith(src + sep) or src.startswith(root + sep):
        raise InvalidArgumentError(f"clone target {root} must not be the source table {src}, inside it, or contain it")
    return root


def clone(
    source: Snapshot, target: str, shallow: bool, replace: bool, properties: Mapping[str, str] | None,
    conf: ConfLookup | None = None,
) -> int:
    """Clone ``source`` (one version) to ``target``; returns the clone's committed version.
    ``conf``: the session's conf, which the commit reads (None: dvengine's configuration)."""
    check_writable(source.protocol, source.metadata)
    props = _check_properties(properties)
    root = _target_root(source, target)
    existing: Snapshot | None = None
    if table_exists(root):
        if not replace:
            raise TableAlreadyExistsError(f"clone target {root} is already a Delta table; pass replace=True to replace it")
        existing = load_snapshot(root)
        check_writable(existing.protocol, existing.metadata)
    elif (storage_for(root).list_files(root) if is_object_uri(root) else os.path.isdir(root) and os.listdir(root)):
        raise InvalidArgumentError(f"clone target {root} is a non-empty folder that is not a Delta table; nothing was written")
    now_ms = int(time.time() * 1000)
    metadata = Metadata(
        id=str(uuid.uuid4()) if existing is None else existing.metadata.id,
        schema_string=source.metadata.schema_string,
        partition_columns=source.metadata.partition_columns,
        configuration={**source.metadata.configuration, **props},
        format=source.metadata.format,
        name=None,
        description=source.metadata.description,
        created_time=now_ms,
    )
    protocol = source.protocol
    if existing is not None:  # the replaced table keeps every feature it had: protocols never downgrade
        merged = set(writer_features(existing.protocol)) | set(writer_features(source.protocol))
        if merged != set(writer_features(source.protocol)):
            protocol = normalized(merged)
    # DeltaOperations.Clone logs source and sourceVersion (OSS Delta clones only shallowly); isShallow,
    # a JSON boolean as Delta writes Booleans, is dvengine's extra key: it also makes deep clones.
    params: dict[str, ParameterValue] = {"source": source.table_root, "sourceVersion": source.version, "isShallow": shallow}
    txn = Transaction(root, existing, "CLONE", params, conf=conf)
    txn.update_protocol(protocol)
    txn.update_metadata(metadata)
    written = WrittenFiles(root)
    actions: list[Action] = []
    if existing is not None:
        txn.record_read(existing.files, None)
        actions.extend(f.to_remove(now_ms) for f in existing.files)
    dv_copies: dict[str, str] = {}
    try:
        for add in source.files:
            actions.append(_shallow_add(source.table_root, add) if shallow else _deep_add(source.table_root, root, add, written, dv_copies))
    except BaseException:
        written.remove_all()
        raise
    txn.add_actions(actions)
    txn.reserve_row_ids(row_tracking.high_water_mark(source.domain_metadata))  # the cloned files keep their ids
    size = sum(f.size for f in source.files)
    metrics = {
        "sourceTableSize": size,
        "sourceNumOfFiles": len(source.files),
        "numRemovedFiles": 0 if existing is None else len(existing.files),
        "numCopiedFiles": 0 if shallow else len(source.files),
        "removedFilesSize": 0 if existing is None else sum(f.size for f in existing.files),
        "copiedFilesSize": 0 if shallow else size,
    }
    return commit_or_clean_up(txn, metrics, written)
