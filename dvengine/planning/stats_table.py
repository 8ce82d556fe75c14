"""The per-snapshot column table stats skipping evaluates in one pass over all files.

Each (column reference, file) pair becomes the :class:`Range` the per-file path would derive
(partition value, else min/max/nullCount stats). Ranges are cached process-wide by (column,
stats string, partition values), so a snapshot that differs from the previous one by a few files
(a writer's next command after one UPDATE) computes Ranges for those few files only and looks the
rest up; the columns built for a snapshot are cached with it, so planning and re-planning on the
same snapshot reuse them. The ranges of a file version that left the table are dropped when the
snapshot cache announces it (``retired_files``).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dvengine.expressions.ranges import Range
from dvengine.expressions.refs import ColumnRef
from dvengine.expressions.skipping import file_column_range, partition_lookup
from dvengine.expressions.vector_skipping import ColumnVec
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.stats import FileStats
from dvengine.storage.retired_files import RetiredFiles, on_retired

# add.stats -> {(column signature, partition values key): Range}; keyed by the stats string first
# so the ranges of a retired file version go with it (``retired_files``)
_RANGE_CACHE: dict[str | None, dict[tuple[Hashable, ...], Range]] = {}
_RANGE_CACHE_LIMIT = 65_536  # stats strings; cleared wholesale when full (a new table's files refill it)
_SNAPSHOTS_KEPT = 8
_BY_SNAPSHOT: OrderedDict[int, tuple[weakref.ref[Snapshot], dict[tuple[Hashable, ...], ColumnVec]]] = OrderedDict()


def _signature(ref: ColumnRef) -> tuple[Hashable, ...]:
    """Everything :func:`file_column_range` reads from ``ref`` (target_alias is always None here)."""
    return (ref.qualifier, ref.path, ref.physical_path, repr(ref.leaf.type))


def _columns_of(snapshot: Snapshot) -> dict[tuple[Hashable, ...], ColumnVec]:
    entry = _BY_SNAPSHOT.get(id(snapshot))
    if entry is not None and entry[0]() is snapshot:
        _BY_SNAPSHOT.move_to_end(id(snapshot))
        return entry[1]
    columns: dict[tuple[Hashable, ...], ColumnVec] = {}
    _BY_SNAPSHOT[id(snapshot)] = (weakref.ref(snapshot), columns)
    while len(_BY_SNAPSHOT) > _SNAPSHOTS_KEPT:
        _BY_SNAPSHOT.popitem(last=False)
    return columns


class SnapshotColumns:
    """Column Ranges for ``files`` (a subset of ``snapshot.files`` identified by ``subset_key``)."""

    def __init__(
        self,
        snapshot: Snapshot,
        files: Sequence[AddFile],
        values: Sequence[Mapping[str, object]],
        value_keys: Sequence[Hashable],
        subset_key: Hashable,
    ) -> None:
        self._files = files
        self._values = values
        self._value_keys = value_keys
        self._subset_key = subset_key
        self._cache = _columns_of(snapshot)

    def column(self, ref: ColumnRef) -> ColumnVec:
        sig = _signature(ref)
        key = (sig, self._subset_key)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = ColumnVec(self._ranges(ref, sig))
        return found

    def _ranges(self, ref: ColumnRef, sig: tuple[Hashable, ...]) -> list[Range]:
        if len(_RANGE_CACHE) > _RANGE_CACHE_LIMIT:
            _RANGE_CACHE.clear()
        out: list[Range] = []
        for add, values, value_key in zip(self._files, self._values, self._value_keys, strict=True):
            by_column = _RANGE_CACHE.get(add.stats)
            if by_column is None:
                by_column = _RANGE_CACHE.setdefault(add.stats, {})
            cache_key: tuple[Any, ...] = (sig, value_key)
            rng = by_column.get(cache_key)
            if rng is None:
                rng = file_column_range(ref, FileStats.parse(add.stats), partition_lookup(values))
                by_column[cache_key] = rng
            out.append(rng)
        return out


@on_retired
def _forget_retired(files: RetiredFiles) -> None:
    """Drop the ranges of stats strings no live file carries any more."""
    for stats in files.stats:
        _RANGE_CACHE.pop(stats, None)


def cached_range_stats() -> set[str | None]:
    """The stats strings the range cache holds ranges of (tests)."""
    return set(_RANGE_CACHE)
