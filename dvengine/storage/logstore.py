"""Storage access for tables: listing, reading and atomic put-if-absent writes.

Delta's correctness under concurrency rests on one primitive: creating a commit file only if
no file of that name exists, atomically. On a local (POSIX) filesystem ``os.link`` of a fully
written temporary file gives exactly that: the link fails with EEXIST if the target exists, and
readers never see a partially written commit. Object stores need a different LogStore; the
interface is kept small so one can be added without touching the log code.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol as TypingProtocol
from urllib.parse import unquote, urlparse

from dvengine.errors import InvalidArgumentError, UnsupportedStorageError
from dvengine.faults import COMMIT_AFTER_LINK, COMMIT_BEFORE_LINK, fault_point


class FileAlreadyExists(Exception):
    """Raised by :meth:`LogStore.put_if_absent` when the target exists (a lost commit race)."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    modification_time_ms: int


class LogStore(TypingProtocol):
    def list_dir(self, directory: str) -> list[FileInfo]: ...

    def read_bytes(self, path: str) -> bytes: ...

    def put_if_absent(self, path: str, data: bytes) -> None: ...

    def write(self, path: str, data: bytes) -> None: ...

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> None: ...


def _write_hidden_temp(target: str, data: bytes, durable: bool) -> str:
    """Write ``data`` to a hidden temp file next to ``target`` (so a rename/link is atomic); return its path.

    Hidden names (leading dot) are ignored by log listing and by VACUUM's candidate scan.
    """
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    return tmp


class LocalLogStore:
    """LogStore for a local or mounted POSIX filesystem."""

    def list_dir(self, directory: str) -> list[FileInfo]:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        out = []
        for entry in entries:
            if entry.name.startswith("."):
                continue  # other writers' temp files (see _write_hidden_temp): never log files, and they vanish
            try:
                if not entry.is_file():
                    continue
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted between the listing and the stat (log cleanup, a finished temp file)
            out.append(FileInfo(entry.path, st.st_size, int(st.st_mtime * 1000)))
        out.sort(key=lambda f: f.path)
        return out

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()

    def put_if_absent(self, path: str, data: bytes) -> None:
        tmp = _write_hidden_temp(path, data, durable=True)
        fault_point(COMMIT_BEFORE_LINK)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise FileAlreadyExists(path) from None
        finally:
            os.unlink(tmp)
        fault_point(COMMIT_AFTER_LINK)

    def write(self, path: str, data: bytes) -> None:
        """Overwrite atomically (used for ``_last_checkpoint``, which may be replaced)."""
        os.replace(_write_hidden_temp(path, data, durable=False), path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def delete(self, path: str) -> None:
        os.unlink(path)


# A URI scheme as RFC 3986 spells it. One letter is a Windows drive ("C:\\data"), not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
# Schemes that name remote storage even when written without "//" (Hadoop accepts "s3a:bucket/x").
_KNOWN_REMOTE_SCHEMES = frozenset(
    {"s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs", "adl", "hdfs", "viewfs", "dbfs", "oss", "cos",
     "http", "https", "ftp", "sftp", "webhdfs", "swebhdfs"}
)


def _refuse_remote(text: str) -> None:
    """Raise UnsupportedStorageError when ``text`` is a URI for storage other than the local file system.

    Only the LocalLogStore exists, and its put-if-absent (``os.link``) is what makes commits
    safe; a remote path must never be mistaken for a relative local folder named ``s3a:``.
    """
    match = _SCHEME.match(text)
    if match is None:
        return
    scheme = match.group(1).lower()
    if scheme == "file":
        host = urlparse(text).netloc
        if host not in ("", "localhost"):
            raise UnsupportedStorageError(
                f"table path {text!r} names host {host!r}; only local file: URIs are supported "
                "(write file:///absolute/path, with three slashes)"
            )
        return
    if scheme in _KNOWN_REMOTE_SCHEMES or text[match.end() :].startswith("//"):
        raise UnsupportedStorageError(
            f"table path {text!r} uses the {scheme}: scheme; dvengine only supports local (or mounted) file "
            "system paths and file: URIs, so nothing was read or written"
        )


def normalize_table_path(path: str | os.PathLike[str]) -> str:
    """Absolute local path of a table root, accepting plain paths and ``file:`` URIs.

    Raises UnsupportedStorageError for other schemes (``s3a://``, ``abfss://``, ``hdfs://`` ...)
    and InvalidArgumentError when the path is an existing regular file, before anything is
    written: a table root is always a folder.
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgumentError(f"a table path must be a str or os.PathLike of str, got {type(path).__name__}")
    if not text.strip():
        raise InvalidArgumentError("a table path must not be empty")
    _refuse_remote(text)
    if text.startswith("file:"):
        text = unquote(urlparse(text).path)
    resolved = Path(text).expanduser().resolve()
    if resolved.exists() and not resolved.is_dir():
        raise InvalidArgumentError(
            f"table path {os.fspath(path)!r} is an existing file ({resolved}), not a folder; a Delta table is a folder"
        )
    return str(resolved)


def resolve_data_path(table_root: str, relative_or_uri: str) -> str:
    """Filesystem path of a file named in ``add.path``/``remove.path``.

    The protocol stores paths as URIs: relative ones are percent-encoded and relative to the
    table root; absolute ones carry a scheme.
    """
    if "://" in relative_or_uri or relative_or_uri.startswith("file:"):
        return unquote(urlparse(relative_or_uri).path)
    return os.path.join(table_root, unquote(relative_or_uri))


def log_dir(table_root: str) -> str:
    return os.path.join(table_root, "_delta_log")
