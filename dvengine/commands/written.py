"""Files a command wrote and must remove again if it does not commit.

A failed command must leave the table folder as it found it (no stray DV or data files), so
every write is recorded here as it happens and :func:`commit_or_clean_up` deletes all of it when
the commit does not happen. VACUUM stays the safety net for a process killed outright.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dvengine.commit.transaction import Transaction
from dvengine.protocol.actions import AddFile
from dvengine.storage import is_object_uri, resolve_data_path, storage_for


@dataclass(frozen=True, slots=True)
class WrittenRows:
    """New data files produced by a command, not yet committed."""

    files: list[AddFile]
    rows: int
    bytes: int
    elapsed_ms: int

    @classmethod
    def of(cls, files: list[AddFile], started: float) -> WrittenRows:
        rows = sum(add.num_records or 0 for add in files)
        return cls(files, rows, sum(a.size for a in files), int((time.monotonic() - started) * 1000))


NOTHING_WRITTEN = WrittenRows([], 0, 0, 0)


@dataclass
class WrittenFiles:
    """Everything a running command has put into the table folder (absolute paths)."""

    table_root: str
    paths: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # private staging folders, removed whole
    markers: list[str] = field(default_factory=list)  # write ids in the names of files Spark tasks wrote

    def add_marker(self, marker: str) -> None:
        """Files anywhere in the table whose names carry ``marker`` are this command's: Spark tasks
        on tables reached through Hadoop write final names directly, and the driver learns only
        the names of successful task attempts, so a failure removes them all by their marker."""
        self.markers.append(marker)

    def add_data_files(self, adds: Iterable[AddFile]) -> None:
        self.paths.extend(resolve_data_path(self.table_root, a.path) for a in adds)

    def add_paths(self, paths: Iterable[str]) -> None:
        self.paths.extend(paths)

    def add_folder(self, folder: str) -> None:
        """A private folder (inside the table root) that only this command writes into."""
        self.folders.append(folder)

    def remove_staging(self, folder: str) -> None:
        """Remove a staging folder whose useful files were moved out; it is no longer tracked."""
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)
        if folder in self.folders:
            self.folders.remove(folder)

    def remove_all(self) -> None:
        """Delete every recorded file that exists, and folders this left empty (never the root)."""
        if self.markers:
            storage = storage_for(self.table_root)
            for info in storage.list_files(self.table_root):
                if any(m in info.path.rsplit("/", 1)[-1] for m in self.markers):
                    self.paths.append(info.path)
        if is_object_uri(self.table_root):  # a store has no folders to tidy; staging is local-only
            storage = storage_for(self.table_root)
            for path in self.paths:
                with contextlib.suppress(FileNotFoundError):
                    storage.delete(path)
            return
        for staging in self.folders:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(staging)
        folders = set()
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            folders.add(os.path.dirname(path))
        root = os.path.normpath(self.table_root)
        for folder in sorted(folders, key=len, reverse=True):
            current = os.path.normpath(folder)
            while current != root and current.startswith(root + os.sep):
                try:
                    os.rmdir(current)  # only succeeds when empty: never removes someone else's files
                except OSError:
                    break
                current = os.path.dirname(current)


def commit_or_clean_up(txn: Transaction, metrics: Mapping[str, Any], written: WrittenFiles) -> int:
    """Commit; if the commit does not happen (conflict, error, interrupt), delete what was written.

    A failure after the commit file exists (a post-commit hook) leaves the files alone: they are
    part of the table by then.
    """
    try:
        return txn.commit({k: v for k, v in metrics.items() if k != "version"})
    except BaseException:
        if txn.committed_version is None:
            written.remove_all()
        raise
