"""The bytes of files this process has just written to an object store, kept for reading back.

An UPDATE rewrites a file and the next command on the same rows reads that new file: on a local
disk the read is cheap, on a store it is a GET of the whole object (a 1.6 MB file is ~8 ms on the
local S3 server, a sequential round trip inside the command). The writer had those bytes in
memory a moment ago. Files written through ``put_new`` (data, DV and CDC files) get fresh unique
names and are never rewritten, so the bytes sent are the object's bytes for as long as it exists;
reading them from here returns exactly what a GET would, through the same Parquet/DV decoding.

Bounded (least recently used out, ``MAX_BYTES`` in all, files above a quarter of it not kept)
and per storage client. A file deleted behind this process's back (another process's VACUUM of
a file no version references) is never looked up: readers only open files the log references.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MAX_BYTES = 64 * 1024 * 1024


class RecentWrites:
    """path -> bytes of objects written under unique names, least recently used dropped first."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._max = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0

    def remember(self, path: str, data: bytes) -> None:
        if len(data) > self._max // 4:
            return
        with self._lock:
            self._drop(path)
            self._entries[path] = data
            self._size += len(data)
            while self._size > self._max:
                _, old = self._entries.popitem(last=False)
                self._size -= len(old)

    def get(self, path: str) -> bytes | None:
        with self._lock:
            data = self._entries.get(path)
            if data is not None:
                self._entries.move_to_end(path)
            return data

    def forget(self, path: str) -> None:
        with self._lock:
            self._drop(path)

    def _drop(self, path: str) -> None:
        old = self._entries.pop(path, None)
        if old is not None:
            self._size -= len(old)
