"""The ``remove`` rows of a classic checkpoint, encoded to Arrow once per tombstone per process.

A checkpoint carries every tombstone still inside ``delta.deletedFileRetentionDuration`` (7 days
by default). A stream of small DML retires a few (path, DV) pairs per commit, so after 2,000
rounds of the soak a checkpoint held 7,245 removes (~36,000 projected at 10,000 rounds), and
turning them from actions into Python dicts and then into Arrow (``pa.Table.from_pylist``) cost
~20 ms of every 10th commit at 7,245 rows, growing with history. The tombstones of one checkpoint
are mostly those of the previous one: the snapshot cache carries the same ``RemoveFile`` objects
forward from version to version. So the encoded rows are kept per table with the objects they
encode, and the next checkpoint encodes only the tombstones it has not seen, and drops the rows of
those that left (re-added or expired) with one Arrow filter.

Identity, not equality, decides what was seen: the cache holds the objects, so an ``id`` cannot
be reused while its row is cached, and the actions are frozen, so the same object means the same
row. Tombstones that come from a fresh replay are new objects and are encoded again (correct, just
the old cost once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dvengine.protocol.actions import RemoveFile

# Tables whose encoded tombstones are kept at once (a few MB each at tens of thousands of rows).
MAX_TABLES = 16
# Appending each checkpoint's new rows adds a chunk; past this many they are combined (a copy).
MAX_CHUNKS = 32


@dataclass(frozen=True)
class _Encoded:
    schema: pa.Schema
    objects: tuple[RemoveFile, ...]  # row i of ``table`` encodes objects[i]
    table: pa.Table


_LOCK = threading.Lock()
_CACHE: OrderedDict[str, _Encoded] = OrderedDict()


def _encode(
    removes: Sequence[RemoveFile], schema: pa.Schema, to_row: Callable[[RemoveFile], dict[str, Any]]
) -> pa.Table:
    return pa.Table.from_pylist([{"remove": to_row(r)} for r in removes], schema=schema)


def tombstone_table(
    table_root: str,
    tombstones: Sequence[RemoveFile],
    schema: pa.Schema,
    to_row: Callable[[RemoveFile], dict[str, Any]],
) -> pa.Table:
    """``tombstones`` (already filtered by retention) as checkpoint rows of ``schema`` (``remove``
    set, every other action column null), reusing this process's rows of the table's last call."""
    with _LOCK:
        previous = _CACHE.get(table_root)
    if previous is None or not previous.schema.equals(schema):
        objects = tuple(tombstones)
        table = _encode(objects, schema, to_row)
    else:
        wanted = {id(r) for r in tombstones}
        keep = [id(o) in wanted for o in previous.objects]
        kept = tuple(o for o, k in zip(previous.objects, keep, strict=True) if k)
        seen = {id(o) for o in kept}
        new = [r for r in tombstones if id(r) not in seen]
        parts = [previous.table.filter(pa.array(keep, pa.bool_())) if not all(keep) else previous.table]
        if new:
            parts.append(_encode(new, schema, to_row))
        objects = kept + tuple(new)
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        if table.column("remove").num_chunks > MAX_CHUNKS:  # one chunk per checkpoint otherwise
            table = table.combine_chunks()
    with _LOCK:
        _CACHE[table_root] = _Encoded(schema, objects, table)
        _CACHE.move_to_end(table_root)
        while len(_CACHE) > MAX_TABLES:
            _CACHE.popitem(last=False)
    return table


def clear_tombstone_rows() -> None:
    """Forget every table's encoded rows (tests; memory)."""
    with _LOCK:
        _CACHE.clear()
