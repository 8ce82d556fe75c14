"""A bounded, process-wide cache of the columns DML reads to find matching rows.

A stream of small upserts runs the same kind of MERGE every few seconds, and while files pile up
between compactions every round opens every candidate file, reads its footer and its key column,
although none of those files changed: Delta data files are immutable (writers create new,
uniquely named files and never rewrite one). Profiling a round on a 200-file table put ~0.45 ms
per file per round into ``ParquetFile`` opening and the column read (spec_notes/auto-compaction.md,
"Per-file costs"), which grows with the file count, not with the rows touched.

Entries are keyed by everything that decides the bytes returned: the file's absolute path, size
and modification time as the log records them, the columns asked for, the table schema (column
mapping and schema evolution change what a name reads) and the partition columns. Values are the
physical row count and the Arrow table ``read_physical_rows`` returned; Arrow tables are
immutable, so callers share them. A local file is also stat'ed on every hit (a few microseconds)
and the entry dropped when its size or modification time on disk changed or it is gone: the
protocol promises immutability, but a damaged, truncated or deleted file must fail the command
with a DataFileError as an uncached read would, never be DV'd from a stale copy. Object stores
are not checked (a HEAD per file per round would cost what the cache saves; their objects are
written once under unique names). The total is bounded by ``DVENGINE_EXECUTION_COLUMNCACHEBYTES``
(default 256 MiB; 0 turns the cache off), least recently used first out.

The same budget and LRU hold what is derived from a cached column and costs more than a
lookup to rebuild: the sorted key indexes of ``key_lookup`` (``cached_derived``), under the
same key plus what it is (``"index:<column>"``, ``"string-index:<column>"``), so they live and
die with the file's entry. A file
that leaves the table is forgotten when the snapshot cache announces it (``retired_files``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, cast

import pyarrow as pa

from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.storage.file_checked_cache import FileCheckedCache
from dvengine.storage.logstore import resolve_data_path
from dvengine.storage.retired_files import RetiredFiles, on_retired

ENV_BYTES = "DVENGINE_EXECUTION_COLUMNCACHEBYTES"
DEFAULT_BYTES = 256 * 1024 * 1024

# (path, size, mtime, columns, schema, partition columns, what: "" for columns, else the derived kind)
Key = tuple[str, int, int, tuple[str, ...] | None, str, tuple[str, ...], str]


class Sized(Protocol):
    """Anything the cache holds: it must say how many bytes it keeps alive."""

    @property
    def nbytes(self) -> int: ...


V = TypeVar("V", bound=Sized)



def _budget() -> int:
    raw = os.environ.get(ENV_BYTES)
    if raw is None or not raw.strip():
        return DEFAULT_BYTES
    try:
        return max(0, int(raw))
    except ValueError:
        from dvengine.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{ENV_BYTES} must be a number of bytes, got {raw!r}") from None


# (physical rows, value); the file checks and the LRU are FileCheckedCache's
_CACHE: FileCheckedCache[Key, tuple[int, Sized]] = FileCheckedCache(_budget, lambda entry: entry[1].nbytes)


@on_retired
def _forget_retired(files: RetiredFiles) -> None:
    _CACHE.forget(files.data_paths)  # entries are tagged with the resolved data path (key[0])


def cached_paths() -> set[str]:
    """The data files the cache holds anything of (tests)."""
    return {str(tag) for tag in _CACHE.tags()}


def cached_columns(
    snapshot: Snapshot,
    add: AddFile,
    columns: Sequence[str] | None,
    read: Callable[[], tuple[int, pa.Table]],
) -> tuple[int, pa.Table]:
    """(physical rows, columns of ``add``) from the cache, else from ``read()`` (then remembered)."""
    return _cached(_key(snapshot, add, columns, ""), read)


def holds_columns(snapshot: Snapshot, add: AddFile, columns: Sequence[str] | None) -> bool:
    """Whether ``cached_columns`` would likely answer from memory (no file check, no LRU touch):
    callers use it to keep cheap work off the thread pool."""
    return _budget() != 0 and _CACHE.holds(_key(snapshot, add, columns, ""))


def cached_derived(
    snapshot: Snapshot, add: AddFile, what: str, build: Callable[[], tuple[int, V]]
) -> tuple[int, V]:
    """(physical rows, ``what`` derived from ``add``'s data) from the cache, else ``build()``.

    ``what`` names the derived value and everything it depends on besides the file and the
    schema (e.g. ``"index:id"``); ``build`` must return the same kind of value for the same
    ``what``. Shares the budget, the LRU and the local-file checks of ``cached_columns``."""
    return _cached(_key(snapshot, add, None, what), build)


def holds_derived(snapshot: Snapshot, add: AddFile, what: str) -> bool:
    """Whether ``cached_derived`` would likely answer ``what`` from memory (no file check, no LRU
    touch): for callers that build something only when it is already there or wanted twice."""
    return _budget() != 0 and _CACHE.holds(_key(snapshot, add, None, what))


def _key(snapshot: Snapshot, add: AddFile, columns: Sequence[str] | None, what: str) -> Key:
    return (
        resolve_data_path(snapshot.table_root, add.path),
        add.size,
        add.modification_time,
        None if columns is None else tuple(columns),
        snapshot.metadata.schema_string,
        tuple(snapshot.partition_columns),
        what,
    )


def _cached(key: Key, read: Callable[[], tuple[int, V]]) -> tuple[int, V]:
    # one key, one kind of value (cached_derived's contract)
    return cast(tuple[int, V], _CACHE.get(key, key[0], read))


def clear_column_cache() -> None:
    _CACHE.clear()
