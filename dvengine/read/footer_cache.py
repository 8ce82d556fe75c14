"""Parsed Parquet footers of local data files, kept per process, and a cheap way to open small files.

Delta data files are immutable, yet every read opened each file's footer again: ~15-30 us per
file of the ~200 us a 100-row file cost to read, and a stream's table is tens of such files read
over and over. Footers are keyed by the absolute path and the size and modification time
(nanoseconds) ``os.stat`` reports when the file is opened, so a file replaced or damaged behind
the log (a broken table, never a Delta writer) is parsed again, and a missing one still raises
FileNotFoundError for the caller to turn into its typed error. Only local files are cached: a
remote file is fetched whole anyway and its footer parsed from memory. The cache holds at most
``MAX_ENTRIES`` footers (a few KB each), least recently used out first, and forgets a file's
footer as soon as the snapshot cache announces the file left its table (``retired_files``).

``open_small`` is how the many-file reader opens files too small to be worth pyarrow's read-ahead:
``pre_buffer`` schedules the column reads on pyarrow's I/O pool and waits for them, which cost
more than the reads themselves for a 3 KB file (100-row file, footer cached: 113 -> 71 us with a
plain ``OSFile`` and no pre-buffering, measured in-process).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.storage.retired_files import RetiredFiles, on_retired

MAX_ENTRIES = 4096

_LOCK = threading.Lock()
# path -> (size, mtime_ns, footer): one entry per path, so a retired file is dropped by its path
_FOOTERS: OrderedDict[str, tuple[int, int, pq.FileMetaData]] = OrderedDict()


def local_footer(path: str) -> pq.FileMetaData:
    """The parsed footer of the local Parquet file ``path`` (cached while the file is unchanged).

    Raises FileNotFoundError when the file is gone, and what ``pyarrow`` raises for a file that
    is not Parquet; nothing is cached then."""
    info = os.stat(path)
    with _LOCK:
        cached = _FOOTERS.get(path)
        if cached is not None and cached[0] == info.st_size and cached[1] == info.st_mtime_ns:
            _FOOTERS.move_to_end(path)
            return cached[2]
    metadata = pq.read_metadata(path)
    with _LOCK:
        _FOOTERS[path] = (info.st_size, info.st_mtime_ns, metadata)
        _FOOTERS.move_to_end(path)
        while len(_FOOTERS) > MAX_ENTRIES:
            _FOOTERS.popitem(last=False)
    return metadata


@on_retired
def _forget_retired(files: RetiredFiles) -> None:
    """Drop the footers of data files that left their table: a parsed footer is a pyarrow
    object the garbage collector walks on every full collection (~3 us each, measured)."""
    with _LOCK:
        for path in files.data_paths:
            _FOOTERS.pop(path, None)


def cached_footer_paths() -> set[str]:
    """The paths whose footers are cached (tests)."""
    with _LOCK:
        return set(_FOOTERS)


def clear_footer_cache() -> None:
    """Forget every cached footer (tests; a process that wants the memory back)."""
    with _LOCK:
        _FOOTERS.clear()


def open_small(path: str, metadata: pq.FileMetaData) -> tuple[pa.OSFile, pq.ParquetFile]:
    """The local file ``path`` opened for a read without read-ahead, with its parsed footer; the
    caller closes the returned ``OSFile`` when done."""
    handle = pa.OSFile(path)
    try:
        return handle, pq.ParquetFile(handle, metadata=metadata, pre_buffer=False)
    except BaseException:
        handle.close()
        raise
