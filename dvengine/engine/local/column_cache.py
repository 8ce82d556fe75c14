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
lookup to rebuild: the sorted key index of ``key_index`` (``cached_derived``), under the same
key plus what it is (``"index:<column>"``), so it lives and dies with the file's entry.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, cast

import pyarrow as pa

from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.storage.logstore import resolve_data_path
from dvengine.storage.uris import is_object_uri

ENV_BYTES = "DVENGINE_EXECUTION_COLUMNCACHEBYTES"
DEFAULT_BYTES = 256 * 1024 * 1024

# (path, size, mtime, columns, schema, partition columns, what: "" for columns, else the derived kind)
Key = tuple[str, int, int, tuple[str, ...] | None, str, tuple[str, ...], str]


class Sized(Protocol):
    """Anything the cache holds: it must say how many bytes it keeps alive."""

    @property
    def nbytes(self) -> int: ...


V = TypeVar("V", bound=Sized)

_LOCK = threading.Lock()
# (physical rows, value, (size, mtime_ns) of a local file when read, None on object stores)
Fingerprint = tuple[int, int] | None
_ENTRIES: OrderedDict[Key, tuple[int, Sized, Fingerprint]] = OrderedDict()
_SIZE = [0]


def _budget() -> int:
    raw = os.environ.get(ENV_BYTES)
    if raw is None or not raw.strip():
        return DEFAULT_BYTES
    try:
        return max(0, int(raw))
    except ValueError:
        from dvengine.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{ENV_BYTES} must be a number of bytes, got {raw!r}") from None


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
    if _budget() == 0:
        return False
    with _LOCK:
        return _key(snapshot, add, columns, "") in _ENTRIES


def cached_derived(
    snapshot: Snapshot, add: AddFile, what: str, build: Callable[[], tuple[int, V]]
) -> tuple[int, V]:
    """(physical rows, ``what`` derived from ``add``'s data) from the cache, else ``build()``.

    ``what`` names the derived value and everything it depends on besides the file and the
    schema (e.g. ``"index:id"``); ``build`` must return the same kind of value for the same
    ``what``. Shares the budget, the LRU and the local-file checks of ``cached_columns``."""
    return _cached(_key(snapshot, add, None, what), build)


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
    budget = _budget()
    if budget == 0:
        return read()
    path = key[0]
    with _LOCK:
        hit = _ENTRIES.get(key)
        if hit is not None:
            _ENTRIES.move_to_end(key)
    if hit is not None:
        rows, value, fingerprint = hit
        if fingerprint is None or _fingerprint(path) == fingerprint:
            return rows, cast(V, value)  # one key, one kind of value (cached_derived's contract)
        _drop(key)
    fingerprint = None if is_object_uri(path) else _fingerprint(path)
    fresh = read()
    size = fresh[1].nbytes
    if size > budget // 4 or (fingerprint is None and not is_object_uri(path)):
        return fresh  # one huge file would flush everything else; a vanished file is not cached
    with _LOCK:
        if key not in _ENTRIES:
            _ENTRIES[key] = (fresh[0], fresh[1], fingerprint)
            _SIZE[0] += size
        while _SIZE[0] > budget and _ENTRIES:
            _old_key, (_rows, old, _print) = _ENTRIES.popitem(last=False)
            _SIZE[0] -= old.nbytes
    return fresh


def _fingerprint(path: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a local file; None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _drop(key: Key) -> None:
    with _LOCK:
        entry = _ENTRIES.pop(key, None)
        if entry is not None:
            _SIZE[0] -= entry[1].nbytes


def clear_column_cache() -> None:
    with _LOCK:
        _ENTRIES.clear()
        _SIZE[0] = 0
