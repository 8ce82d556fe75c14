"""The embedded executor's half of ZORDER BY and liquid clustering: rewrite a bin along a curve.

A bin's live rows (DVs applied, by the reference Arrow reader) are sorted along the curve over
the clustering columns (:mod:`dvengine.engine.local.curves`) and cut into ``num_files`` runs of
about equal row count, each written by the usual data-file writer (names, stats, column mapping,
partition folders as for any dvengine file). Sorting the whole bin, rather than range-
partitioning it as Spark does, gives each file a contiguous stretch of the curve, hence narrow
min/max stats on the clustering columns, which is the point (cuts snap to cell boundaries of the
curve: ``curves.cut_points``). Memory is bounded by one bin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from dvengine.engine.local.curves import HILBERT, curve_layout
from dvengine.engine.local.optimize import live_rows, materialized_names
from dvengine.engine.local.writer import remove_data_files, write_data_files
from dvengine.log import Snapshot
from dvengine.maintenance import clustering, zorder
from dvengine.protocol.actions import AddFile
from dvengine.writing.stats import num_indexed_cols

# the files of a bin -> how many files to write for it
FileCount = Callable[[Sequence[AddFile]], int]
# the written files of one bin -> the same files with tags (liquid clustering marks its ZCube)
Tagger = Callable[[list[AddFile]], list[AddFile]]


def curve_rewriter(
    columns: Sequence[str],
    curve: str,
    num_ranges: int,
    file_count: FileCount,
    tag: Tagger | None = None,
    align: bool = True,
) -> Callable[[Snapshot, Sequence[AddFile]], list[AddFile]]:
    """A ``BinRewriter`` that writes a bin's rows in ``curve`` order over ``columns``."""

    def rewrite(snapshot: Snapshot, files: Sequence[AddFile]) -> list[AddFile]:
        rows = live_rows(snapshot, files)
        if rows.num_rows == 0:
            return []
        count = max(1, min(file_count(files), rows.num_rows))
        order, bounds = curve_layout(rows, columns, curve, count, num_ranges, align)
        rows = rows.take(pa.array(order))
        adds: list[AddFile] = []
        try:
            for i in range(count):
                chunk = rows.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i]))
                adds.extend(
                    write_data_files(
                        chunk,
                        snapshot.table_root,
                        snapshot.schema,
                        snapshot.partition_columns,
                        num_indexed_cols(snapshot.configuration),
                        fault_point_after=i == count - 1,
                        materialized=materialized_names(snapshot),
                    )
                )
        except BaseException:
            remove_data_files(snapshot.table_root, adds)
            raise
        return tag(adds) if tag is not None else adds

    return rewrite


def clustering_rewriter(
    columns: Sequence[str], conf: Callable[[str], str | None], max_file_size: int
) -> Callable[[Snapshot, Sequence[AddFile]], list[AddFile]]:
    """The rewriter of liquid clustering: a bin along the Hilbert curve (Z-order for one column)
    into ``max(1, bin bytes / max_file_size)`` files tagged as one new ZCube.

    OPTIMIZE passes ``optimize.maxFileSize``; auto compaction of a clustered table passes
    ``autoCompact.maxFileSize``, as Delta's AutoCompact hands its own size bounds to the same
    OptimizeExecutor."""
    return curve_rewriter(
        columns, HILBERT, zorder.num_ranges(conf), lambda files: zorder.target_file_count(files, max_file_size),
        clustering.zcube_tagger(columns),
    )
