"""Drop a deletion vector's rows from a file's columns, copying only the stretches that hold them.

Filtering copies every surviving value, so a 1M-row file with a DV paid a full copy per column on
every read even when its deleted rows sit in one corner. A stream's late corrections do exactly
that: in the growing-key soak the base file's 18,747 deleted rows all lie in its last 5 % (the ids
that were newest when they were corrected). So the file is cut into blocks of ``BLOCK_ROWS``;
runs of blocks without a deleted row are kept as zero-copy slices and only runs with deleted rows
are filtered. When deletes are spread over every block (uniform keys) this is one pass over the
whole column, as before.

How a span with deleted rows is copied depends on the column: ``filter`` walks the keep-mask 64
rows at a time and copies runs of all-kept words as blocks, so it is fast when deletes are
clustered and slow when nearly every 64-row word holds one; ``take`` with the kept row indexes
gathers fixed-width values at a constant cost per row but copies strings value by value. So a
fixed-width column takes when more than ``TAKE_DELETED_SHARE`` of the span is deleted, everything
else filters. Measured numbers are in spec_notes/reader-features-and-readers.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Rows per block: a deleted row makes its whole block be filtered (copied). Smaller blocks copy
# less around clustered deletes but cut a column into more chunks; 65,536 leaves at most 16
# chunks for a 1M-row file.
BLOCK_ROWS = 65_536
# Share of a span's rows deleted above which fixed-width columns are gathered with ``take``: a
# 950k-row file with 4.4 % of its rows deleted uniformly filtered an int64 / double column in
# 2.0 ms and took it in 1.15 ms (strings: 2.2 vs 4.4 ms); with 1.9 % deleted in one corner the
# filter of the whole file cost 0.7-0.8 ms and take 1.24 ms (pyarrow 26, medians of 15).
TAKE_DELETED_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    stop: int
    mask: pa.BooleanArray | None  # None: no deleted row in the span, kept as a zero-copy slice
    indexes: pa.Int64Array | None  # kept rows (relative to start) when fixed-width columns take


@dataclass(frozen=True, slots=True)
class KeepSpans:
    """A file's rows as spans in order, each kept as it is or copied without its deleted rows;
    ``live_rows`` rows survive."""

    spans: tuple[_Span, ...]
    live_rows: int

    @classmethod
    def of(cls, keep: np.ndarray) -> KeepSpans:
        """The spans of a boolean keep-mask (True = the row is live)."""
        rows = len(keep)
        blocks = (rows + BLOCK_ROWS - 1) // BLOCK_ROWS
        dirty = np.zeros(blocks, dtype=bool)
        dirty[np.unique(np.flatnonzero(~keep) // BLOCK_ROWS)] = True
        spans: list[_Span] = []
        start_block = 0
        while start_block < blocks:
            stop_block = start_block + 1
            while stop_block < blocks and dirty[stop_block] == dirty[start_block]:
                stop_block += 1
            start, stop = start_block * BLOCK_ROWS, min(rows, stop_block * BLOCK_ROWS)
            if not dirty[start_block]:
                spans.append(_Span(start, stop, None, None))
            else:
                part = keep[start:stop]
                kept = np.flatnonzero(part)
                share = 1 - len(kept) / (stop - start)
                indexes = pa.array(kept, type=pa.int64()) if share > TAKE_DELETED_SHARE else None
                spans.append(_Span(start, stop, pa.array(part), indexes))
            start_block = stop_block
        return cls(tuple(spans), int(np.count_nonzero(keep)))

    @property
    def nbytes(self) -> int:
        """Bytes the spans keep alive (their masks and kept-row indexes)."""
        return sum(
            (0 if s.mask is None else s.mask.nbytes) + (0 if s.indexes is None else s.indexes.nbytes) for s in self.spans
        )

    def apply(self, column: pa.ChunkedArray) -> pa.ChunkedArray:
        """``column`` (all the file's physical rows) without the deleted rows."""
        gather = _fixed_width(column.type)
        if len(self.spans) == 1:
            return self._copy(column, self.spans[0], gather)
        chunks: list[pa.Array] = []
        for span in self.spans:
            chunks.extend(self._copy(column.slice(span.start, span.stop - span.start), span, gather).chunks)
        return pa.chunked_array(chunks, type=column.type)

    @staticmethod
    def _copy(piece: pa.ChunkedArray, span: _Span, gather: bool) -> pa.ChunkedArray:
        if span.mask is None:
            return piece
        if gather and span.indexes is not None:
            return pc.take(piece, span.indexes)
        return pc.filter(piece, span.mask)


def _fixed_width(kind: pa.DataType) -> bool:
    """Integers, floats, decimals, dates and timestamps: values ``take`` gathers in one pass."""
    return (pa.types.is_primitive(kind) and not pa.types.is_boolean(kind)) or pa.types.is_decimal(kind)
