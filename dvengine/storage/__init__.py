"""Every byte in and out of a table: one storage layer over local folders and object stores.

``storage_for(path)`` returns the backend for a path (local folder or ``s3://`` / ``gs://`` /
``az://`` URI); the LogStore operations on it give Delta's put-if-absent commits on both.
"""

from dvengine.storage.base import Storage
from dvengine.storage.logstore import (
    FileAlreadyExists,
    FileInfo,
    LocalLogStore,
    LogStore,
    log_dir,
    normalize_table_path,
    resolve_data_path,
)
from dvengine.storage.registry import storage_for
from dvengine.storage.uris import is_object_uri, join

__all__ = [
    "FileAlreadyExists",
    "FileInfo",
    "LocalLogStore",
    "LogStore",
    "Storage",
    "is_object_uri",
    "join",
    "log_dir",
    "normalize_table_path",
    "resolve_data_path",
    "storage_for",
]
