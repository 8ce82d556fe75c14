"""Filesystem access for tables (listing, reading, atomic commit creation)."""

from dvengine.storage.logstore import (
    FileAlreadyExists,
    FileInfo,
    LocalLogStore,
    LogStore,
    log_dir,
    normalize_table_path,
    resolve_data_path,
)

__all__ = [
    "FileAlreadyExists",
    "FileInfo",
    "LocalLogStore",
    "LogStore",
    "log_dir",
    "normalize_table_path",
    "resolve_data_path",
]
