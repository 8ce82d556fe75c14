"""The keep-spans of deletion vectors (``dv_filter.KeepSpans``), kept per process.

A full read of a file with a DV loads the DV, expands it into a keep-mask and cuts that into
spans (``KeepSpans.of``) before any column is filtered: for the 1.45M-row base file of a soak
table with 48,840 rows deleted uniformly, ~0.3 ms for the mask and ~3.3 ms for the spans (the
kept-row indexes of every dirty block), on every read of an unchanged table, while the fresh
1-file table of the same rows pays none of it. A DV never changes once written: a file DV is
stored under a new unique name (or at a new offset) and the log names a new descriptor whenever a
file's deleted rows change, and an inline DV *is* its descriptor's text. So spans are keyed by
the table root, the descriptor's unique id, size and cardinality, and the data file's row count.

A file DV is stat'ed on every hit (size and modification time, a few microseconds) and the entry
dropped when it changed or is gone, so a DV file damaged or deleted behind the log fails the
read with a DeletionVectorError as an uncached read would. Object stores are not checked (their
DV files are written once under unique names, and a HEAD per file per read would cost what the
cache saves). The total is bounded by ``MAX_BYTES`` (the spans' masks and kept-row indexes,
~8 bytes per kept row of a dirty block), least recently used first out.
"""

from __future__ import annotations

import numpy as np

from dvengine.dv import absolute_dv_path, load_deletion_vector
from dvengine.protocol.actions import AddFile
from dvengine.read.dv_filter import KeepSpans
from dvengine.storage.file_checked_cache import FileCheckedCache
from dvengine.storage.retired_files import RetiredFiles, on_retired

MAX_BYTES = 128 * 1024 * 1024

_Key = tuple[str, str, int, int, int]
_CACHE: FileCheckedCache[_Key, KeepSpans] = FileCheckedCache(lambda: MAX_BYTES, lambda spans: spans.nbytes)


def keep_spans(table_root: str, add: AddFile, num_rows: int) -> KeepSpans | None:
    """The spans of ``add``'s DV over its ``num_rows`` physical rows; None when it has no DV."""
    dv = add.deletion_vector
    if dv is None:
        return None

    def build() -> KeepSpans:
        deleted = load_deletion_vector(table_root, dv, num_records=num_rows)
        keep = np.ones(num_rows, dtype=bool)
        if len(deleted):
            keep[np.asarray(deleted.to_array(), dtype=np.int64)] = False
        return KeepSpans.of(keep)

    key: _Key = (table_root, dv.unique_id, dv.size_in_bytes, dv.cardinality, num_rows)
    path = None if dv.is_inline else absolute_dv_path(table_root, dv)
    return _CACHE.get(key, path, build, tag=(table_root, dv.unique_id))


@on_retired
def _forget_retired(files: RetiredFiles) -> None:
    """Drop the spans of DVs no live file carries any more (a file's new DV replaced them)."""
    _CACHE.forget((files.table_root, dv_id) for dv_id in files.dv_ids)


def cached_dv_ids(table_root: str) -> set[str]:
    """The DV unique ids of ``table_root`` the cache holds spans of (tests)."""
    return {str(tag[1]) for tag in _CACHE.tags() if isinstance(tag, tuple) and tag[0] == table_root}


def clear_dv_spans_cache() -> None:
    _CACHE.clear()
