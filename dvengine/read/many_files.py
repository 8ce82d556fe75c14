"""Read the live rows of many files at once: the full-table read of ``toArrow`` and ``scan``.

A table written by a stream of small commits holds one large file (the base or a compacted one,
often with a DV) and tens of small ones. Read file by file, the large file's read and DV filter
ran on one core while the small files had long finished (the end table of the 2,000-round
growing-key soak: 25 files, 14 with DVs, read 1.53-1.61x a fresh 1-file table of the same rows; 1.44x after this change, in-process A/B).
So the work is split into tasks of similar weight and run on one pool, heaviest first:

- a file of at least ``THREADED_READ_ROWS`` rows (per its ``numRecords``) is opened first (footer
  and DV, all such files at once), then each of its columns is one task that decodes the column
  and drops the DV's rows from it (a column filter costs less than ``Table.filter``: see
  ``drop_deleted``); variable-width columns first, since decoding them costs the most;
- the other files are read (DV applied) in tasks of up to ``SMALL_FILES_PER_TASK`` files, largest
  first, after the column tasks: a stream's 100-row files cost ~0.1 ms each to read, about what a
  task of their own cost to submit and collect.

pyarrow releases the GIL while it decodes and filters, so the pool keeps every core busy until
the last task. The result is in file order, as one table in schema column order; a failing file
raises its typed error (the first failing file in file order).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import conform_table, to_arrow_schema
from dvengine.read.arrow_reader import (
    THREADED_READ_ROWS,
    FileColumns,
    open_data_source,
    read_columns,
    read_file_arrow,
    reopen,
)
from dvengine.read.dv_filter import KeepSpans
from dvengine.read.dv_spans_cache import keep_spans

# Tasks run at once (the CPU count, at least 2: reading also waits on I/O).
_READ_THREADS = max(2, os.cpu_count() or 1)
# Decoding a string or nested value cost ~4x a fixed-width one (1M rows: a dictionary-encoded
# string column 20 ms, three int64/double columns 21 ms together); only the order uses this.
_VARIABLE_WIDTH_WEIGHT = 4
# Files read by one task, among those under THREADED_READ_ROWS rows.
SMALL_FILES_PER_TASK = 8


class _Opened:
    """A large file opened for column tasks: where it is, its footer, and its DV's spans, worked
    out by the first column task that needs them (after its decode, while the other columns
    decode): worked out when the file was opened they held up every column task (~2-3 ms for a
    1M-row file with 42,000 deleted rows, the pool idle meanwhile). The spans of an unchanged DV
    come from the process's cache (``dv_spans_cache``)."""

    def __init__(self, snapshot: Snapshot, add: AddFile) -> None:
        self.origin, self.parquet = open_data_source(snapshot, add)
        self._snapshot, self._add = snapshot, add
        self._lock = threading.Lock()
        self._spans: tuple[KeepSpans | None] | None = None

    def spans(self) -> KeepSpans | None:
        with self._lock:
            if self._spans is None:
                self._spans = (keep_spans(self._snapshot.table_root, self._add, self.parquet.metadata.num_rows),)
            return self._spans[0]

    def live_rows(self) -> int:
        spans = self.spans()
        return int(self.parquet.metadata.num_rows) if spans is None else spans.live_rows


def _read_column(snapshot: Snapshot, add: AddFile, opened: _Opened, name: str) -> pa.ChunkedArray:
    """One column of a large file, its deleted rows dropped.

    A string or binary column that Parquet stores dictionary-encoded throughout
    (``_dictionary_dense``) is read as an Arrow dictionary, its deleted rows dropped from the
    indexes, and only then expanded to plain values: Parquet's own expansion while decoding cost
    more than Arrow's (a 1.45M-row column of 2 KB, 'r<round>' tags: 22.7 ms decoded plainly,
    4.2 ms as a dictionary + 7.0 ms expanded), and filtering int32 indexes costs less than
    filtering strings (0.6 vs 3.3 ms with 3.4 % of the rows deleted). The values are the same."""
    dictionary = _dictionary_dense(opened.parquet, name)
    parquet = reopen(opened.origin, opened.parquet, [name] if dictionary else ())
    column = read_columns(snapshot, add, parquet, [name], threads=False).column(0)
    spans = opened.spans()
    if spans is not None:
        column = spans.apply(column)
    if dictionary and pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    return column


def _dictionary_dense(parquet: pq.ParquetFile, name: str) -> bool:
    """Whether the top-level string/binary column ``name`` is dictionary-encoded in (nearly) every
    row of every row group, as far as the footer tells: a dictionary page, and under 1.5 bytes per
    value uncompressed, dictionary page included. A plain value costs at least 4 bytes (its
    length), so at most ~a third of the values fell back to plain encoding, and a large dictionary
    (high cardinality) does not pass either: Arrow would hash such values into a dictionary, which
    costs more than decoding unique values plainly (13 tags with NULLs: 0.64 bytes a value;
    distinct 10-character strings: 16)."""
    kind = parquet.schema_arrow.field(name).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return False
    meta = parquet.metadata
    index = parquet.schema_arrow.get_field_index(name)
    if meta.num_row_groups == 0 or index < 0:
        return False
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(index)
        if chunk.path_in_schema != name or not chunk.has_dictionary_page or chunk.total_uncompressed_size * 2 > chunk.num_values * 3:
            return False
    return True


def _read_files(snapshot: Snapshot, files: Sequence[AddFile], columns: Sequence[str] | None) -> list[pa.Table]:
    return [read_file_arrow(snapshot, add, columns) for add in files]


def _weight(parquet: pq.ParquetFile, name: str) -> int:
    kind = parquet.schema_arrow.field(name).type
    fixed = pa.types.is_primitive(kind)
    rows: int = parquet.metadata.num_rows
    return rows * (1 if fixed else _VARIABLE_WIDTH_WEIGHT)


def read_files_arrow(snapshot: Snapshot, files: Sequence[AddFile], columns: Sequence[str] | None = None) -> pa.Table:
    """The live rows of ``files`` (of ``snapshot``) as one Arrow table in schema column order;
    ``columns`` are logical names matched without regard to case."""
    logical = to_arrow_schema(snapshot.schema)
    target = pa.schema([logical.field(i).with_nullable(True) for i in range(len(logical))])
    if columns is not None:
        wanted = {c.lower() for c in columns}
        target = pa.schema([f for f in target if f.name.lower() in wanted])
    if not files:
        return target.empty_table()
    plan = FileColumns.of(snapshot, columns)
    large = [i for i, add in enumerate(files) if (add.num_records or 0) >= THREADED_READ_ROWS]
    whole = sorted(set(range(len(files))) - set(large), key=lambda i: -files[i].size)
    tables: list[pa.Table] = []
    with ThreadPoolExecutor(max_workers=_READ_THREADS) as pool:
        opening = {i: pool.submit(_Opened, snapshot, files[i]) for i in large}
        tasks: list[tuple[int, int, str, _Opened]] = []
        for i in large:
            try:
                opened = opening[i].result()
            except Exception:
                continue  # raised below, in file order
            tasks.extend((_weight(opened.parquet, name), i, name, opened) for name in plan.physical(opened.parquet))
        tasks.sort(key=lambda t: -t[0])
        column_futures: dict[int, dict[str, Future[pa.ChunkedArray]]] = {i: {} for i in large}
        for _cost, i, name, opened in tasks:
            column_futures[i][name] = pool.submit(_read_column, snapshot, files[i], opened, name)
        groups = [whole[k:k + SMALL_FILES_PER_TASK] for k in range(0, len(whole), SMALL_FILES_PER_TASK)]
        group_futures = [pool.submit(_read_files, snapshot, [files[i] for i in group], columns) for group in groups]
        whole_at = {i: (g, k) for g, group in enumerate(groups) for k, i in enumerate(group)}
        for i, add in enumerate(files):
            if i in whole_at:
                g, k = whole_at[i]
                tables.append(group_futures[g].result()[k])
                continue
            opened = opening[i].result()
            read = {name: future.result() for name, future in column_futures[i].items()}
            tables.append(plan.assemble(snapshot, add, read, opened.live_rows()))
    return conform_table(pa.concat_tables([t.select(target.names) for t in tables]), target)



def read_snapshot_arrow(snapshot: Snapshot, columns: Sequence[str] | None = None) -> pa.Table:
    """All live rows of a snapshot as one Arrow table in schema column order."""
    return read_files_arrow(snapshot, snapshot.files, columns)
