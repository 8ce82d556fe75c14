"""Tell the process-wide caches which table files have left the table, so they forget them.

Several caches keep what was derived from a table's immutable files: parsed Parquet footers,
columns and key indexes, DV keep-spans, parsed ``add.stats`` and the ranges skipping takes from
them. Each is bounded (entries or bytes), but only by its own cap, so a long stream of small
commits filled them with entries of files that compaction or a new DV had already retired: after
10,000 soak rounds ~35,000 such objects, which every full garbage collection walked (a collection
took 85 ms instead of ~4, in the slowest 1 % of rounds), for files no command would read again.

The snapshot cache knows exactly which files a commit retired (it applies the commit's removes
and adds to the cached state), so it announces them here, and each cache forgets its entries for
them. This module sits in the lowest layer so the log can announce and the read, planning and
engine layers can listen without any upward import. A retired file may still be read through an
older snapshot (time travel, a concurrent reader); it is then computed again, as on a cache miss.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetiredFiles:
    """What one advance of a cached snapshot retired.

    ``data_paths``: resolved paths (``resolve_data_path``) of data files no longer in the table at
    all (a file whose DV was replaced keeps its path and is not here); ``dv_ids``: unique ids of
    deletion vectors no live file carries any more; ``stats``: ``add.stats`` strings of retired
    logical files that no live file of the advance carries."""

    table_root: str
    data_paths: frozenset[str]
    dv_ids: frozenset[str]
    stats: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.data_paths or self.dv_ids or self.stats)


Listener = Callable[[RetiredFiles], None]

_LOCK = threading.Lock()
_LISTENERS: list[Listener] = []


def on_retired(listener: Listener) -> Listener:
    """Register ``listener`` (a cache's forget function) for every announcement; returns it, so
    it can decorate the function. Listeners must be cheap and must not raise for unknown files."""
    with _LOCK:
        if listener not in _LISTENERS:
            _LISTENERS.append(listener)
    return listener


def announce_retired(files: RetiredFiles) -> None:
    """Tell every registered cache that ``files`` left their table (nothing when it is empty)."""
    if not files:
        return
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(files)
