"""The rows of one file whose key column holds one of some keys, through the file's cached index.

One entry point for every caller that looks keys up (a point-lookup predicate in ``match_file``,
MERGE's target-side narrowing in ``key_rows``): it picks the index that fits the column's Arrow
type and the keys' type, builds it once per immutable file into the column cache
(``column_cache.cached_derived``, same budget and LRU as the columns), and answers None when no
index fits, so the caller filters the column as before. The answer never depends on the schema
and the file agreeing: the Arrow types are checked here, not assumed from the schema.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.engine.local.column_cache import cached_derived, holds_derived
from dvengine.engine.local.key_index import KeyIndex, build_key_index, is_integer_column
from dvengine.engine.local.string_key_index import (
    StringKeyIndex,
    build_string_key_index,
    is_string_column,
    string_hashes,
)
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile


@dataclass(frozen=True)
class LookupKeys:
    """Keys to look up, prepared once for every file a command looks them up in.

    ``values``: the distinct non-NULL keys (int64 or date32, sorted; or string). ``searched``:
    what the files' indexes search for them, sorted distinct int64: the integers themselves, a
    date's days since 1970-01-01 (the date32 value), or the strings' hashes (``string_hashes``
    costs ~80 us even for one key, numpy's per-call overhead over its word passes: paid once per
    command, not once per file)."""

    values: pa.Array
    searched: np.ndarray


def lookup_keys(values: pa.Array | pa.ChunkedArray) -> LookupKeys | None:
    """``values`` (NULLs and duplicates allowed) as LookupKeys; None for a type no index serves."""
    present = pc.drop_null(values)
    if pa.types.is_integer(present.type):
        searched = np.unique(np.asarray(present.to_numpy(), dtype=np.int64))
        return LookupKeys(pa.array(searched), searched)
    if pa.types.is_date32(present.type):
        searched = np.unique(_days(present))
        return LookupKeys(pa.array(searched.astype(np.int32)).cast(pa.date32()), searched)
    if is_string_column(present):
        distinct = pc.unique(present)
        return LookupKeys(distinct, np.unique(string_hashes(distinct)))
    return None


def indexed_rows(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray, keys: LookupKeys) -> np.ndarray | None:
    """Ascending positions of the non-NULL rows of ``add``'s column ``name`` (its values are
    ``column``) equal to one of ``keys``, deleted rows included; None when no index serves this
    column and these keys."""
    kind = keys.values.type
    if is_integer_column(column) and pa.types.is_integer(kind):
        return _integer_index(snapshot, add, name, column).rows_of(keys.searched)
    if pa.types.is_date32(column.type) and pa.types.is_date32(kind):
        return _date_index(snapshot, add, name, column).rows_of(keys.searched)
    if is_string_column(column) and is_string_column(keys.values):
        index = _string_index(snapshot, add, name, column)
        return None if index is None else index.rows_of(column, keys.values, keys.searched)
    return None


def _integer_index(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray) -> KeyIndex:
    return cached_derived(snapshot, add, f"index:{name}", lambda: (len(column), build_key_index(column)))[1]


def _string_index(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray) -> StringKeyIndex | None:
    """The string index of the file's column, built at its second lookup; None at the first.

    Building costs ~30-40 filters of the column (1M UUIDs: ~0.25 s against ~8 ms), and a string
    key column is almost never sorted, so the cost is always paid (an integer one usually is
    sorted, and its index costs a sortedness check). A one-off command (a GDPR delete by user
    id, where stats skip nothing and every file is a candidate) would pay it for every file and
    fill the cache with indexes never used again; a stream of upserts looks the same files up
    round after round and pays one extra filter per file. A marker in the column cache remembers
    the first lookup and lives and dies with the file's entries (with the cache off: no index)."""
    what = f"string-index:{name}"
    if not holds_derived(snapshot, add, what):
        seen = f"string-lookup:{name}"
        if not holds_derived(snapshot, add, seen):
            cached_derived(snapshot, add, seen, lambda: (len(column), _LookedUp()))
            return None
    return cached_derived(snapshot, add, what, lambda: (len(column), build_string_key_index(column)))[1]


@dataclass(frozen=True)
class _LookedUp:
    """The column cache's record that a file's string column was looked up once."""

    nbytes: int = 0


def _date_index(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray) -> KeyIndex:
    """The integer index over a date column's days (date32 is an int32 day count)."""
    days = f"date-index:{name}"
    return cached_derived(snapshot, add, days, lambda: (len(column), build_key_index(column.cast(pa.int32()))))[1]


def _days(dates: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(dates.cast(pa.int32()).to_numpy(), dtype=np.int64)
