"""Read the rows of a snapshot into Arrow, applying deletion vectors, with no JVM.

This is the reference reader: small, exact, and used by the CLI and by tests as a second
opinion next to the Spark reader. Rows come back under logical column names, in schema order,
with partition columns typed from the log (never parsed from folder names, which the protocol
does not guarantee) and columns missing from older files filled with nulls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.dv import load_deletion_vector
from dvengine.errors import DataFileError, DeletionVectorError, LogCorruptedError
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import StructField, to_arrow_field
from dvengine.read.dv_filter import KeepSpans
from dvengine.read.dv_spans_cache import keep_spans
from dvengine.read.footer_cache import local_footer, open_small
from dvengine.read.mapped_nested import to_logical
from dvengine.storage import resolve_data_path, storage_for

# Files with fewer rows are decoded on the calling thread (see read_physical_rows).
THREADED_READ_ROWS = 65_536


def deleted_row_mask(table_root: str, add: AddFile, num_rows: int) -> np.ndarray | None:
    """Boolean keep-mask for a file's physical rows, or None when the file has no DV."""
    if add.deletion_vector is None:
        return None
    deleted = load_deletion_vector(table_root, add.deletion_vector, num_records=num_rows)
    keep = np.ones(num_rows, dtype=bool)
    if len(deleted):
        keep[np.asarray(deleted.to_array(), dtype=np.int64)] = False
    return keep


def unreadable_data_file(snapshot: Snapshot, add: AddFile, path: str, exc: BaseException) -> DataFileError:
    """The error for a data file that exists but Arrow cannot read (not Parquet, truncated, corrupt).

    Arrow's message names neither the file nor the table; this one names both and keeps Arrow's
    reason (the caller chains ``exc`` as the cause).
    """
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else ""
    return DataFileError(
        f"data file {add.path} of table {snapshot.table_root} cannot be read as Parquet ({path}): "
        f"{type(exc).__name__}: {reason}"
    )


def open_data_file(snapshot: Snapshot, add: AddFile) -> pq.ParquetFile:
    """Open a data file named by the log, checking its row count against ``stats.numRecords``.

    Row indexes of a DV only mean something if the file is the one the log describes, so a
    mismatch is an error, never a guess.
    """
    return open_data_source(snapshot, add)[1]


def open_data_source(snapshot: Snapshot, add: AddFile) -> tuple[str | pa.Buffer, pq.ParquetFile]:
    """:func:`open_data_file`, also returning what it was opened from (a local path, or the bytes
    of a remote file) so more readers can open it again with the same footer (``reopen``).
    A local file's footer comes from the process's footer cache (``footer_cache``)."""
    path = resolve_data_path(snapshot.table_root, add.path)
    try:
        source = storage_for(path).parquet_source(path)
        if isinstance(source, str):
            origin: str | pa.Buffer = source
            parquet = pq.ParquetFile(source, metadata=local_footer(source))
        else:
            origin = source.read_buffer()
            parquet = pq.ParquetFile(pa.BufferReader(origin))
    except FileNotFoundError:
        raise _missing(snapshot, add) from None
    except (pa.ArrowException, OSError) as exc:
        raise unreadable_data_file(snapshot, add, path, exc) from exc
    _check_row_count(add, parquet)
    return origin, parquet


@contextlib.contextmanager
def opened_for_read(snapshot: Snapshot, add: AddFile) -> Iterator[pq.ParquetFile]:
    """A data file opened for one read: :func:`open_data_file`, except that a local file under
    ``THREADED_READ_ROWS`` rows is opened without pyarrow's read-ahead (``footer_cache.open_small``:
    a 100-row file's read cost 113 -> 71 us) and closed when the block ends."""
    path = resolve_data_path(snapshot.table_root, add.path)
    if not storage_for(path).is_local or (add.num_records or THREADED_READ_ROWS) >= THREADED_READ_ROWS:
        yield open_data_file(snapshot, add)
        return
    try:
        handle, parquet = open_small(path, local_footer(path))
    except FileNotFoundError:
        raise _missing(snapshot, add) from None
    except (pa.ArrowException, OSError) as exc:
        raise unreadable_data_file(snapshot, add, path, exc) from exc
    with handle:
        _check_row_count(add, parquet)
        yield parquet


def _missing(snapshot: Snapshot, add: AddFile) -> LogCorruptedError:
    return LogCorruptedError(f"data file {add.path} listed in the log of {snapshot.table_root} is missing")


def _check_row_count(add: AddFile, parquet: pq.ParquetFile) -> None:
    num_rows = parquet.metadata.num_rows
    physical = add.num_records
    if physical is not None and physical != num_rows:
        raise DeletionVectorError(
            f"file {add.path} has {num_rows} physical rows but its stats say numRecords={physical}; "
            "row indexes of its deletion vector cannot be trusted"
        )


def reopen(origin: str | pa.Buffer, parquet: pq.ParquetFile, read_dictionary: Sequence[str] = ()) -> pq.ParquetFile:
    """A second reader of a file opened by :func:`open_data_source`, sharing its parsed footer
    (one ``ParquetFile`` is not documented as safe to read from two threads at once);
    ``read_dictionary``: columns to read as Arrow dictionaries (``many_files``)."""
    return pq.ParquetFile(
        origin if isinstance(origin, str) else pa.BufferReader(origin),
        metadata=parquet.metadata,
        read_dictionary=list(read_dictionary) or None,
    )


def physical_row_count(snapshot: Snapshot, add: AddFile) -> int:
    """Physical rows of a file: ``stats.numRecords``, else its Parquet footer."""
    physical = add.num_records
    return physical if physical is not None else open_data_file(snapshot, add).metadata.num_rows


@dataclass(frozen=True, slots=True)
class FileColumns:
    """What a read of one file returns: ``wanted`` logical fields in schema order, of which
    ``partition`` (lower-case names) come from the log, the rest from Parquet by physical name."""

    wanted: tuple[StructField, ...]
    partition: frozenset[str]

    @classmethod
    def of(cls, snapshot: Snapshot, columns: Sequence[str] | None) -> FileColumns:
        wanted_lower = None if columns is None else {c.lower() for c in columns}
        wanted = tuple(f for f in snapshot.schema.fields if wanted_lower is None or f.name.lower() in wanted_lower)
        return cls(wanted, frozenset(c.lower() for c in snapshot.partition_columns))

    def physical(self, parquet: pq.ParquetFile) -> list[str]:
        """The physical columns to read from ``parquet`` (those it has; the rest read as nulls)."""
        present = set(parquet.schema_arrow.names)
        return [f.physical_name for f in self.wanted if f.name.lower() not in self.partition and f.physical_name in present]

    def assemble(
        self, snapshot: Snapshot, add: AddFile, read: Mapping[str, pa.ChunkedArray], num_rows: int
    ) -> pa.Table:
        """The file's table under logical names from its ``read`` physical columns (all ``num_rows``
        long), partition values typed from the log, missing columns as nulls."""
        arrays: list[pa.Array | pa.ChunkedArray] = []
        fields: list[pa.Field] = []
        part_values = snapshot.partition_values_logical(add) if self.partition else {}
        for f in self.wanted:
            target = to_arrow_field(f)
            if f.name.lower() in self.partition:
                arrays.append(pa.array([part_values.get(f.name)] * num_rows, type=target.type))
            elif f.physical_name in read:
                by_name = to_logical(read[f.physical_name], f, target.type)  # nested fields by physical name
                arrays.append(_cast_physical(read[f.physical_name], target) if by_name is None else by_name)
            else:
                arrays.append(pa.nulls(num_rows, type=target.type))
            fields.append(target.with_nullable(True))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def read_columns(
    snapshot: Snapshot, add: AddFile, parquet: pq.ParquetFile, names: Sequence[str], threads: bool
) -> pa.Table:
    try:
        return parquet.read(columns=list(names), use_threads=threads)
    except (pa.ArrowException, OSError) as exc:
        raise unreadable_data_file(snapshot, add, resolve_data_path(snapshot.table_root, add.path), exc) from exc


def read_physical_rows(
    snapshot: Snapshot,
    add: AddFile,
    columns: Sequence[str] | None = None,
    parquet: pq.ParquetFile | None = None,
) -> pa.Table:
    """Every physical row of one file (deleted ones too, in file order, so position = row index),
    data columns then partition columns under logical names, in schema order."""
    plan = FileColumns.of(snapshot, columns)
    if parquet is None:
        parquet = open_data_file(snapshot, add)
    # pyarrow's column threads pay off on large files only; a stream's 100-row files are read on
    # the caller's file pool, where handing 4 columns to other threads cost more CPU than
    # decoding them (0.19 -> 0.16 ms per 100-row file, 41 files of a growing-key stream table).
    num_rows = parquet.metadata.num_rows
    table = read_columns(snapshot, add, parquet, plan.physical(parquet), num_rows >= THREADED_READ_ROWS)
    return plan.assemble(snapshot, add, {name: table.column(name) for name in table.column_names}, num_rows)


def read_file_arrow(
    snapshot: Snapshot,
    add: AddFile,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Live rows of one logical file (logical names, schema order), its DV applied."""
    with opened_for_read(snapshot, add) as parquet:
        table = read_physical_rows(snapshot, add, columns, parquet)
    return without_deleted_rows(snapshot, add, table)


def without_deleted_rows(snapshot: Snapshot, add: AddFile, physical: pa.Table) -> pa.Table:
    """``physical`` (every physical row of ``add``, as ``read_physical_rows`` gives them) without
    the rows its DV deletes (the cached keep-spans, column by column)."""
    spans = keep_spans(snapshot.table_root, add, physical.num_rows)
    return physical if spans is None else pa.Table.from_arrays([spans.apply(c) for c in physical.columns], schema=physical.schema)


def drop_deleted(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """``table`` without the rows ``keep`` marks False, filtered column by column, copying only
    the blocks that hold deleted rows (``dv_filter.KeepSpans``).

    ``Table.filter`` cost 1.8x the sum of its columns' filters (pyarrow 26: 9.7 vs 5.4 ms median
    for a 1M-row, 4-column file with 18,747 deleted rows, 41 alternating runs), and a file with a
    DV is filtered on every read.
    """
    spans = KeepSpans.of(keep)
    return pa.Table.from_arrays([spans.apply(column) for column in table.columns], schema=table.schema)


def _cast_physical(column: pa.ChunkedArray, target: pa.Field) -> pa.ChunkedArray:
    """Cast a physical column to its logical Arrow type (see :func:`relabel_by_position`)."""
    return relabel_by_position(column, target.type)


def relabel_by_position(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """``column`` as ``target``: nested struct fields re-labelled by position, then cast.

    Under column mapping nested fields carry physical names in Parquet and logical names in the
    schema; both share positions. Used in both directions (reading and writing). Structs are
    rebuilt by position at every depth, inside list elements and map keys and values: a plain
    Arrow cast would match their fields by name and fill every renamed one with NULL.
    """
    if column.type == target:
        return column
    return pa.chunked_array([_relabel(chunk, target) for chunk in column.chunks], type=target)


def _relabel(array: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_struct(target) and pa.types.is_struct(array.type) and array.type.num_fields == target.num_fields:
        children = [_relabel(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if pa.types.is_list(target) and pa.types.is_list(array.type):
        values = _relabel(array.values, target.value_type)
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=array.is_null())
    if pa.types.is_map(target) and pa.types.is_map(array.type):
        # Arrow's cast matches struct fields by *name* (a target field missing from the value comes
        # out NULL), so a struct key or value of a map must be relabelled here, as list elements are
        keys = _relabel(array.keys, target.key_type)
        items = _relabel(array.items, target.item_type)
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=array.is_null())
    return array.cast(target)


def partition_value_table(snapshot: Snapshot) -> Mapping[str, dict[str, object]]:
    """Typed partition values of every live file, keyed by ``add.path``."""
    return {add.path: snapshot.partition_values_logical(add) for add in snapshot.files}
