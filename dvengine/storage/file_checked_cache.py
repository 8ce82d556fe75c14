"""A bounded, process-wide LRU of values derived from a table's immutable files.

Delta data and DV files are never rewritten (writers create new, uniquely named files), so what
is computed from one (columns read, a sorted key index, a DV's keep-spans) can be kept across
commands. A damaged, truncated or deleted local file must still fail the command as an uncached
read would, never be served from a stale copy: a local file is stat'ed on every hit (size and
modification time, a few microseconds) and the entry dropped when either changed or the file is
gone. Object-store files are not checked (a HEAD per file per use would cost what the cache
saves; their objects are written once under unique names). The total is bounded in bytes, least
recently used first out; one value over a quarter of the budget is not kept (it would flush
everything else), nor one whose local file vanished while it was computed.

One mechanism serves the local executor's column cache and the reader's DV-spans cache. Each
entry carries a tag naming what it was derived from (a data file's path, a DV's id), so a cache
can ``forget`` a file the moment it leaves its table (:mod:`dvengine.storage.retired_files`)
instead of keeping it until the LRU pushes it out.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from dvengine.storage.uris import is_object_uri

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Fingerprint = tuple[int, int] | None


class FileCheckedCache(Generic[K, V]):
    """``get(key, path, compute)``: the value cached under ``key``, else ``compute()`` (then kept).

    ``path`` is the file the value was derived from (checked when local), or None when there is
    none to check (an inline DV). ``nbytes`` says how many bytes a value keeps alive; ``budget``
    is asked on every call (0 turns the cache off)."""

    def __init__(self, budget: Callable[[], int], nbytes: Callable[[V], int]) -> None:
        self._budget = budget
        self._nbytes = nbytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, tuple[V, Fingerprint, Hashable]] = OrderedDict()
        self._by_tag: dict[Hashable, set[K]] = {}
        self._size = 0

    def get(self, key: K, path: str | None, compute: Callable[[], V], tag: Hashable = None) -> V:
        """``tag`` (default ``path``) is what ``forget`` names to drop this entry."""
        tag = path if tag is None else tag
        budget = self._budget()
        if budget == 0:
            return compute()
        checked = path is not None and not is_object_uri(path)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
        if hit is not None:
            value, fingerprint, _tag = hit
            if not checked or _fingerprint(path) == fingerprint:
                return value
            self._drop(key)
        fingerprint = _fingerprint(path) if checked else None
        fresh = compute()
        size = self._nbytes(fresh)
        if size > budget // 4 or (checked and fingerprint is None):
            return fresh
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (fresh, fingerprint, tag)
                self._by_tag.setdefault(tag, set()).add(key)
                self._size += size
            while self._size > budget and self._entries:
                old_key, (old, _print, old_tag) = self._entries.popitem(last=False)
                self._untag(old_key, old_tag)
                self._size -= self._nbytes(old)
        return fresh

    def forget(self, tags: Iterable[Hashable]) -> None:
        """Drop every entry whose tag is in ``tags`` (the files they came from left the table)."""
        with self._lock:
            for tag in tags:
                for key in self._by_tag.pop(tag, ()):
                    entry = self._entries.pop(key, None)
                    if entry is not None:
                        self._size -= self._nbytes(entry[0])

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def tags(self) -> set[Hashable]:
        """The tags of the entries held (tests: what the cache still remembers)."""
        with self._lock:
            return set(self._by_tag)

    def _untag(self, key: K, tag: Hashable) -> None:
        keys = self._by_tag.get(tag)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_tag[tag]

    def holds(self, key: K) -> bool:
        """Whether ``key`` is cached (no file check, no LRU touch)."""
        with self._lock:
            return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_tag.clear()
            self._size = 0

    def _drop(self, key: K) -> None:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._untag(key, entry[2])
                self._size -= self._nbytes(entry[0])


def _fingerprint(path: str | None) -> Fingerprint:
    """(size, mtime_ns) of a local file; None when it is gone (or there is no path)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
