"""Reading several small objects at once.

Log replay reads every commit since the last checkpoint. On a local disk that is a few
microseconds per file; on an object store each is a round trip, so reading them one after
another costs (commits since checkpoint) x latency. Requests in parallel cost about one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from dvengine.storage.base import FileInfo, LogStore, Storage, TaggedReads

_MAX_PARALLEL = 16
T = TypeVar("T")


def read_many(store: LogStore, paths: Sequence[str]) -> list[bytes]:
    """The bytes of ``paths`` in order: in parallel on object stores, one by one locally (no gain there)."""
    if getattr(store, "is_local", True):
        return [store.read_bytes(p) for p in paths]
    return _in_parallel(store.read_bytes, paths)


def read_many_tagged(store: TaggedReads, paths: Sequence[str]) -> list[tuple[bytes, str | None]]:
    """``read_many`` that keeps each object's e-tag (``TaggedReads.read_bytes_tagged``)."""
    return _in_parallel(store.read_bytes_tagged, paths)


def head_many(store: Storage, paths: Sequence[str]) -> list[FileInfo | None]:
    """Size and modification time of each of ``paths`` in order, None for one that is absent: one
    HEAD each, in parallel (VACUUM LITE checks the files the log names instead of listing folders)."""

    def head_or_none(path: str) -> FileInfo | None:
        try:
            return store.head(path)
        except FileNotFoundError:
            return None

    return _in_parallel(head_or_none, paths)


def _in_parallel(read: Callable[[str], T], paths: Sequence[str]) -> list[T]:
    """``read`` of each path, in order, up to ``_MAX_PARALLEL`` at once (no pool for one path)."""
    if len(paths) < 2:
        return [read(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL, len(paths))) as pool:
        return list(pool.map(read, paths))
