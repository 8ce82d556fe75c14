"""Table roots, log paths and the LogStore names the log code imports.

The backends themselves live in ``local.py`` (folders, commits by ``os.link``) and
``objects.py`` (S3 / GCS / Azure through obstore, commits by conditional create);
``storage_for(path)`` in ``registry.py`` picks one by the path's scheme.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from dvengine.errors import InvalidArgumentError
from dvengine.storage.base import FileAlreadyExists, FileInfo, LogStore, Storage
from dvengine.storage.local import LocalStorage
from dvengine.storage.settings import register_options
from dvengine.storage.uris import canonical_object_uri, check_uri_text, is_object_uri, join, local_path_of

# The local backend under the name the log code has always used.
LocalLogStore = LocalStorage

__all__ = ["FileAlreadyExists", "FileInfo", "LocalLogStore", "LogStore", "Storage"]


def normalize_table_path(
    path: str | os.PathLike[str], storage_options: Mapping[str, object] | None = None
) -> str:
    """The canonical root of a table: an absolute local path, or ``s3://bucket/key`` for object stores.

    Accepts plain paths, ``file:`` URIs and ``s3://`` / ``s3a://`` / ``gs://`` / ``az://`` /
    ``abfss://`` URIs; ``storage_options`` (delta-rs names) are remembered for everything under
    an object-store root. Raises UnsupportedStorageError for schemes no backend serves
    (``hdfs://`` ...) and InvalidArgumentError when a local path is an existing regular file,
    before anything is written: a table root is always a folder.
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a table path must be a str or os.PathLike of str, got {type(path).__name__}")
    if not text.strip():
        raise InvalidArgumentError("a table path must not be empty")
    check_uri_text(text)
    if is_object_uri(text):
        root = canonical_object_uri(text)
        register_options(root, storage_options)
        return root
    resolved = local_path_of(text)
    if os.path.exists(resolved) and not os.path.isdir(resolved):
        raise InvalidArgumentError(
            f"table path {os.fspath(path)!r} is an existing file ({resolved}), not a folder; a Delta table is a folder"
        )
    return resolved


def resolve_data_path(table_root: str, relative_or_uri: str) -> str:
    """Path (local) or URI (object store) of a file named in ``add.path``/``remove.path``.

    The protocol stores paths as URIs: relative ones are percent-encoded and relative to the
    table root; absolute ones carry a scheme.
    """
    if is_object_uri(relative_or_uri):
        return canonical_object_uri(unquote(relative_or_uri))
    if "://" in relative_or_uri or relative_or_uri.startswith("file:"):
        return unquote(urlparse(relative_or_uri).path)
    return join(table_root, unquote(relative_or_uri))


def log_dir(table_root: str) -> str:
    return join(table_root, "_delta_log")
