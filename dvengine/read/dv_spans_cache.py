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

import os
import threading
from collections import OrderedDict

import numpy as np

from dvengine.dv import absolute_dv_path, load_deletion_vector
from dvengine.protocol.actions import AddFile
from dvengine.read.dv_filter import KeepSpans
from dvengine.storage.uris import is_object_uri

MAX_BYTES = 128 * 1024 * 1024

_Key = tuple[str, str, int, int, int]
_Fingerprint = tuple[int, int] | None
_LOCK = threading.Lock()
_ENTRIES: OrderedDict[_Key, tuple[KeepSpans, _Fingerprint]] = OrderedDict()
_SIZE = [0]


def keep_spans(table_root: str, add: AddFile, num_rows: int) -> KeepSpans | None:
    """The spans of ``add``'s DV over its ``num_rows`` physical rows; None when it has no DV."""
    dv = add.deletion_vector
    if dv is None:
        return None
    key: _Key = (table_root, dv.unique_id, dv.size_in_bytes, dv.cardinality, num_rows)
    path = None if dv.is_inline else absolute_dv_path(table_root, dv)
    checked = path is not None and not is_object_uri(path)
    with _LOCK:
        hit = _ENTRIES.get(key)
        if hit is not None:
            _ENTRIES.move_to_end(key)
    if hit is not None:
        spans, fingerprint = hit
        if not checked or _fingerprint(path) == fingerprint:
            return spans
        _drop(key)
    fingerprint = _fingerprint(path) if checked else None
    deleted = load_deletion_vector(table_root, dv, num_records=num_rows)
    keep = np.ones(num_rows, dtype=bool)
    if len(deleted):
        keep[np.asarray(deleted.to_array(), dtype=np.int64)] = False
    spans = KeepSpans.of(keep)
    size = spans.nbytes
    if size > MAX_BYTES // 4 or (checked and fingerprint is None):
        return spans
    with _LOCK:
        if key not in _ENTRIES:
            _ENTRIES[key] = (spans, fingerprint)
            _SIZE[0] += size
        while _SIZE[0] > MAX_BYTES and _ENTRIES:
            _old, (old, _print) = _ENTRIES.popitem(last=False)
            _SIZE[0] -= old.nbytes
    return spans


def _fingerprint(path: str | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _drop(key: _Key) -> None:
    with _LOCK:
        entry = _ENTRIES.pop(key, None)
        if entry is not None:
            _SIZE[0] -= entry[0].nbytes


def clear_dv_spans_cache() -> None:
    with _LOCK:
        _ENTRIES.clear()
        _SIZE[0] = 0
