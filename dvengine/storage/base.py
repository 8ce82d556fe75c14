"""What every storage backend offers: the small set of operations the Delta log and the commands need.

Kept as a Protocol so the log, commit and command code never ask which backend they talk to:
``dvengine.storage.storage_for(path)`` hands out the local backend for folders and the object-store
backend for ``s3://`` / ``gs://`` / ``az://`` URIs, and both answer the same calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol as TypingProtocol
from typing import runtime_checkable

import pyarrow as pa

# Name prefix of the hidden object an object-store client creates twice to prove the store refuses
# the second create (objects.ObjectStorage). A process killed between the create and the delete
# leaves one behind; VACUUM reclaims it once it is old enough not to be a running probe.
CONDITIONAL_PUT_PROBE_PREFIX = ".dvengine-conditional-put-probe-"

# Kind under which an object-store client times the PUTs it sends on a worker (storage/pending.py):
# the caller did not wait for them as such, only for what was left of them when its commit needed
# the file (``pending.waited_seconds``).
BACKGROUND_PUT = "PUT in background"


class FileAlreadyExists(Exception):
    """Raised by :meth:`Storage.put_if_absent` when the target exists (a lost commit race)."""


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    modification_time_ms: int
    # The store's version tag of the object (object stores; None for local files). A new PUT of
    # different bytes under the same name changes it, so it identifies a commit file's content.
    e_tag: str | None = None


class LogStore(TypingProtocol):
    """The commit-level operations (what Delta calls a LogStore)."""

    def list_dir(self, directory: str) -> list[FileInfo]: ...

    def list_dir_after(self, directory: str, after_name: str) -> list[FileInfo]:
        """The files of ``directory`` (not recursive, no hidden ones) whose names sort strictly after
        ``after_name``, sorted by path. On an object store one LIST starting there (S3
        ``start-after``): a table's log tail costs one request however long the log before it is.
        Locally only those names are stat'ed: a cold load that knows its checkpoint version reads
        the few files named after it, not the ~11,000 of a 10,000-commit log. Log file names
        start with the zero-padded version, so ``after_name = f"{v:020d}"`` selects version ``v``
        and later (every name of version ``v`` sorts after its bare digits)."""
        ...

    def read_bytes(self, path: str) -> bytes: ...

    def put_if_absent(self, path: str, data: bytes) -> str | None:
        """Create ``path`` only if absent (FileAlreadyExists otherwise); the new object's e-tag when the store has one."""
        ...

    def write(self, path: str, data: bytes) -> None: ...

    def exists(self, path: str) -> bool: ...

    def delete(self, path: str) -> None: ...


@runtime_checkable
class StagedCommits(TypingProtocol):
    """A store whose put-if-absent splits into a durable private write and an atomic publish (a
    POSIX folder: fsync a temp file, then ``link``), so the slow half can run outside the
    host-local commit turn; plus the folder fsync that makes a published name durable."""

    def stage_commit(self, path: str, data: bytes) -> str: ...

    def link_staged(self, staged: str, path: str) -> None: ...

    def discard_staged(self, staged: str) -> None: ...

    def sync_dir(self, directory: str) -> None: ...


@runtime_checkable
class TaggedReads(TypingProtocol):
    """A store whose objects carry e-tags: one GET returns the bytes and the tag, so a commit read
    once (a winner of a lost race) is recognised in a later listing without a second GET."""

    def read_bytes_tagged(self, path: str) -> tuple[bytes, str | None]: ...


class Storage(LogStore, TypingProtocol):
    """A LogStore plus what data files, DV files and maintenance need."""

    is_local: bool

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object); FileNotFoundError if absent."""
        ...

    def head(self, path: str) -> FileInfo:
        """Size and modification time of one file; FileNotFoundError if absent."""
        ...

    def list_files(self, directory: str, include_hidden: bool = False) -> list[FileInfo]:
        """Every file under ``directory``, recursively, sorted by path; without hidden names (a
        ``.``-prefixed file or folder) unless ``include_hidden`` (VACUUM looks for leftovers there)."""
        ...

    def put_new(self, path: str, data: bytes) -> None:
        """Write a file under a fresh unique name (data, DV, CDC files): readers see all of it or nothing."""
        ...

    def put_new_in_background(self, path: str, data: bytes) -> None:
        """``put_new`` that may still be under way when it returns (object stores: storage/pending.py),
        for a file a commit will name: the transaction waits for it before its commit is sent,
        and a failure is raised there, typed. Where a write costs no round trip (a local
        folder) it is simply ``put_new``."""
        ...

    def parquet_source(self, path: str) -> str | pa.NativeFile:
        """What ``pyarrow.parquet`` should open for ``path``: the path itself when local, a buffer when remote."""
        ...
