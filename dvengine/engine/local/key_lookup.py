"""The rows of one file whose key column holds one of some keys, through the file's cached index.

One entry point for every caller that looks keys up (a point-lookup predicate in ``match_file``,
MERGE's target-side narrowing in ``key_rows``): it picks the index that fits the column's Arrow
type and the keys' type, builds it once per immutable file into the column cache
(``column_cache.cached_derived``, same budget and LRU as the columns), and answers None when no
index fits, so the caller filters the column as before. The answer never depends on the schema
and the file agreeing: the Arrow types are checked here, not assumed from the schema.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dvengine.engine.local.column_cache import cached_derived
from dvengine.engine.local.key_index import KeyIndex, build_key_index, is_integer_column
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile


def indexed_rows(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray, keys: pa.Array) -> np.ndarray | None:
    """Ascending positions of the non-NULL rows of ``add``'s column ``name`` (its values are
    ``column``) equal to one of ``keys`` (``point_lookup.distinct_keys``), deleted rows included;
    None when no index serves this column and these keys."""
    if is_integer_column(column) and pa.types.is_integer(keys.type):
        return _integer_index(snapshot, add, name, column).rows_of(np.asarray(keys.to_numpy(), dtype=np.int64))
    return None


def _integer_index(snapshot: Snapshot, add: AddFile, name: str, column: pa.ChunkedArray) -> KeyIndex:
    return cached_derived(snapshot, add, f"index:{name}", lambda: (len(column), build_key_index(column)))[1]
