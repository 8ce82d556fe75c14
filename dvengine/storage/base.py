"""What every storage backend offers: the small set of operations the Delta log and the commands need.

Kept as a Protocol so the log, commit and command code never ask which backend they talk to:
``dvengine.storage.storage_for(path)`` hands out the local backend for folders and the object-store
backend for ``s3://`` / ``gs://`` / ``az://`` URIs, and both answer the same calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol as TypingProtocol

import pyarrow as pa


class FileAlreadyExists(Exception):
    """Raised by :meth:`Storage.put_if_absent` when the target exists (a lost commit race)."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    modification_time_ms: int


class LogStore(TypingProtocol):
    """The commit-level operations (what Delta calls a LogStore)."""

    def list_dir(self, directory: str) -> list[FileInfo]: ...

    def read_bytes(self, path: str) -> bytes: ...

    def put_if_absent(self, path: str, data: bytes) -> None: ...

    def write(self, path: str, data: bytes) -> None: ...

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> None: ...


class Storage(LogStore, TypingProtocol):
    """A LogStore plus what data files, DV files and maintenance need."""

    is_local: bool

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object); FileNotFoundError if absent."""
        ...

    def head(self, path: str) -> FileInfo:
        """Size and modification time of one file; FileNotFoundError if absent."""
        ...

    def list_files(self, directory: str) -> list[FileInfo]:
        """Every file under ``directory``, recursively (no hidden files), sorted by path."""
        ...

    def put_new(self, path: str, data: bytes) -> None:
        """Write a file under a fresh unique name (data, DV, CDC files): readers see all of it or nothing."""
        ...

    def parquet_source(self, path: str) -> str | pa.NativeFile:
        """What ``pyarrow.parquet`` should open for ``path``: the path itself when local, a buffer when remote."""
        ...
