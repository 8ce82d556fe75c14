"""GENERATE symlink_format_manifest: plain-Parquet readers (Presto, Athena, Hive) see a Delta version.

Delta writes ``_symlink_format_manifest/<partition folders>/manifest`` listing the absolute paths
of the live data files of each partition (one manifest at the root for unpartitioned tables, even
when empty) and deletes the manifests of partitions that no longer have files. A manifest cannot
express deletion vectors, so Delta refuses the command on a version with DVs
(``DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS``) and on column-mapped tables (the files'
physical column names would not match the schema those readers use). dvengine does the same.
Each manifest is written to a hidden temp file and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from dvengine.errors import (
    InvalidArgumentError,
    OperationNotAllowedError,
    UnsupportedFeatureError,
    UnsupportedStorageError,
)
from dvengine.log import Snapshot, load_snapshot
from dvengine.storage import is_object_uri, resolve_data_path
from dvengine.writing.files import HIVE_DEFAULT_PARTITION, escape_partition_value

MANIFEST_LOCATION = "_symlink_format_manifest"
MODE = "symlink_format_manifest"


def _partition_dir(snapshot: Snapshot, values: Mapping[str, str | None]) -> str:
    parts = []
    for name in snapshot.partition_columns:
        raw = values.get(snapshot.schema.get(name).physical_name)
        shown = HIVE_DEFAULT_PARTITION if raw is None or raw == "" else escape_partition_value(raw)
        parts.append(f"{escape_partition_value(name)}={shown}")
    return "/".join(parts)


def _file_uri(path: str) -> str:
    return "file:" + path


def _write_manifest(folder: str, lines: list[str]) -> None:
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, "manifest")
    hidden = os.path.join(folder, ".manifest.tmp")
    with open(hidden, "w", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    os.replace(hidden, target)


def generate(table_root: str, mode: str) -> dict[str, int]:
    """Write the manifests of the latest version; returns how many were written and deleted."""
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, got {type(mode).__name__}")
    if mode.lower() != MODE:
        raise InvalidArgumentError(f"GENERATE mode {mode!r} is not supported; the only mode is {MODE!r}")
    snapshot = load_snapshot(table_root)
    if is_object_uri(snapshot.table_root):
        raise UnsupportedStorageError(
            f"GENERATE symlink_format_manifest on {snapshot.table_root}: manifests on object stores are not implemented yet"
        )
    with_dvs = [f.path for f in snapshot.files if f.deletion_vector is not None]
    if with_dvs:
        raise OperationNotAllowedError(
            f"The 'GENERATE symlink_format_manifest' command is not supported on table versions with deletion "
            f"vectors: version {snapshot.version} of {table_root} has {len(with_dvs)} file(s) with DVs (e.g. "
            f"{with_dvs[0]}); purge them (DeltaTable.purge()) or disable DVs first. Nothing was written"
        )
    if snapshot.column_mapping_mode != "none":
        raise UnsupportedFeatureError(
            f"manifest generation is not supported on tables with column mapping "
            f"(mode {snapshot.column_mapping_mode!r}) such as {table_root}; nothing was written"
        )
    root = os.path.join(snapshot.table_root, MANIFEST_LOCATION)
    groups: dict[str, list[str]] = {}
    for add in snapshot.files:
        folder = _partition_dir(snapshot, add.partition_values)
        groups.setdefault(folder, []).append(_file_uri(resolve_data_path(snapshot.table_root, add.path)))
    if not snapshot.partition_columns:
        groups.setdefault("", [])
    for folder, lines in groups.items():
        _write_manifest(os.path.join(root, *folder.split("/")) if folder else root, sorted(lines))
    deleted = 0
    for dirpath, _dirs, names in os.walk(root, topdown=False):
        if "manifest" in names:
            rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel = "" if rel == "." else rel
            if rel not in groups:
                os.unlink(os.path.join(dirpath, "manifest"))
                deleted += 1
        if dirpath != root and not os.listdir(dirpath):
            shutil.rmtree(dirpath)
    return {"filesWritten": len(groups), "filesDeleted": deleted}
