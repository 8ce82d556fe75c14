"""Executor side of UPDATE and MERGE: one task pass retires target rows AND writes the new rows.

A small UPDATE or MERGE on Spark used to be several jobs over a persisted join: validate the
new values, count clauses, check cardinality, build DVs, then write the new rows with Spark's
Parquet writer (and read every footer back on the driver). Each job costs a fixed 100-300 ms
here, so the job count, not the data, set the latency. This module does all of it in the task
that already holds a file's matched rows after the repartition by file:

- the new values arrive already evaluated by Spark (ANSI casts in the projection fail the job,
  with Spark's own error), and the task checks NULLs headed for NOT NULL columns and the
  table's CHECK constraints (on Arrow, as the local executor does);
- MERGE's cardinality check: every (file, row index) of one file meets in this task, so a target
  row matched twice is seen here (Delta's rule, same message as the other executors);
- bitmaps per file, unioned with the file's old DV, the DV/rewrite/remove decision, packed DV
  files (the same code as the DELETE job, ``dv_job``);
- new rows written with the embedded executor's writer (pyarrow: same physical schema, field
  ids, partition folders and stats as every other dvengine write) into a per-command staging
  folder the driver renames into place after the job, or removes if the command fails.

Only descriptors, counts and ``add`` actions travel back to the driver.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.engine.local.constraints import check_constraints
from dvengine.engine.local.not_null import null_into_not_null
from dvengine.engine.local.writer import write_data_files
from dvengine.engine.spark.dv_job import KIND_BLOB, Blobs, DvJobContext, FileOutcome, encode_outcomes, finish_file
from dvengine.errors import MergeCardinalityError, SchemaViolationError
from dvengine.protocol.row_tracking import INTERNAL_COLUMNS, MaterializedColumns
from dvengine.protocol.schema import StructType, to_arrow_type
from dvengine.writing.constraints import bind_constraint

KIND_FILE = "file"
KIND_ADD = "add"
KIND_COUNT = "count"
KIND_SOURCES = "sources"  # MERGE file tasks: int64 ids of the source rows that matched, as bytes
# MERGE file tasks: the target rows of one file (``file_uri``: the add's path as the log names it)
# that joined a source row and were not retired, as a serialized 64-bit roaring bitmap
KIND_KEPT = "kept"

RESULT_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), False),
        pa.field("file_uri", pa.string(), True),
        pa.field("action", pa.string(), True),
        pa.field("dv_json", pa.string(), True),
        pa.field("newly_deleted", pa.int64(), True),
        pa.field("add_json", pa.string(), True),
        pa.field("clause", pa.int32(), True),
        pa.field("n", pa.int64(), True),
        pa.field("payload", pa.binary(), True),
    ]
)
RESULT_DDL = (
    "kind string, file_uri string, action string, dv_json string, newly_deleted long, add_json string, clause int, "
    "n long, payload binary"
)

# New rows are flushed to files at this many rows, which bounds a task's memory.
FLUSH_ROWS = 1_000_000

CARDINALITY_MESSAGE = (
    "cannot perform MERGE: multiple source rows matched the same target row and could modify it in "
    "conflicting ways (Delta's DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE); deduplicate the "
    "source or make the condition match at most one source row per target row; nothing was written"
)


@dataclass(frozen=True, slots=True)
class RowsLayout:
    """Which columns of the rows frame mean what to the tasks."""

    value_columns: tuple[str, ...]  # batch columns holding the new row, in schema field order
    write_col: str | None = None  # boolean: this row's new values are written (None: every row)
    retire_col: str | None = None  # boolean: this row retires its target row (None: every row with a file)
    clause_col: str | None = None  # int: counted per value (MERGE clause ids)
    match_col: str | None = None  # boolean: target and source both present (MERGE cardinality check)
    bad_values_col: str | None = None  # string: names of columns whose new value does not cast ("" if none)


@dataclass(frozen=True, slots=True)
class RowsJobContext:
    """What a task needs besides its rows (shipped once per task by closure)."""

    dv: DvJobContext
    schema: StructType
    partition_columns: tuple[str, ...]
    num_indexed_cols: int
    staging_root: str  # new files go under it; the returned adds are relative to it
    operation: str
    layout: RowsLayout
    constraints: tuple[tuple[str, str], ...] = ()  # the rules new rows must satisfy (name, expression): writing.constraints.row_rule_texts
    # Row tracking enabled: where carried stable row ids / commit versions are stored (file tasks
    # carry them from the rows they copy or update; rows without them get NULL, i.e. fresh ids).
    materialized: MaterializedColumns | None = None
    write_id: str = ""  # in every data file name (tables reached through Hadoop: no staging folder)


def _mask(batch: pa.Table, column: str | None) -> pa.ChunkedArray | None:
    return None if column is None else pc.fill_null(batch.column(column), False)


class NewRows:
    """New rows of one task, written in chunks of ``FLUSH_ROWS`` to the staging folder."""

    def __init__(self, ctx: RowsJobContext) -> None:
        self.ctx = ctx
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.adds: list[str] = []
        self.target = [(f, to_arrow_type(f.type)) for f in ctx.schema.fields]
        self.blobs = Blobs(ctx.dv.jvm_names)  # files for the JVM to write (tables reached through Hadoop)
        self.constraints = tuple(bind_constraint(name, sql, ctx.schema) for name, sql in ctx.constraints)

    def add(self, rows: pa.Table) -> None:
        if rows.num_rows == 0:
            return
        columns = []
        for (_, arrow_type), name in zip(self.target, self.ctx.layout.value_columns):
            column = rows.column(name)
            columns.append(column if column.type == arrow_type else column.cast(arrow_type))
        table = pa.Table.from_arrays(columns, names=[f.name for f, _ in self.target])
        if self.ctx.materialized is not None:
            for internal in INTERNAL_COLUMNS:
                carried = rows.column(internal) if internal in rows.column_names else pa.nulls(rows.num_rows, pa.int64())
                table = table.append_column(internal, carried.cast(pa.int64()))
        _check_not_null(table, self.ctx)
        check_constraints(table, self.constraints)
        self.pending.append(table)
        self.pending_rows += rows.num_rows
        if self.pending_rows >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        rows = pa.concat_tables(self.pending)
        self.pending, self.pending_rows = [], 0
        written = write_data_files(
            rows, self.ctx.staging_root, self.ctx.schema, self.ctx.partition_columns, self.ctx.num_indexed_cols,
            fault_point_after=False, materialized=self.ctx.materialized,
            sink=self.blobs.sink, name_tag=self.ctx.write_id,
        )
        self.adds.extend(json.dumps(add.to_json()) for add in written)


def _check_not_null(table: pa.Table, ctx: RowsJobContext) -> None:
    """NULLs headed for NOT NULL fields, nested ones included (a NULL parent struct counts as NULL, as in Delta)."""
    bad = null_into_not_null(table, ctx.schema)
    if bad:
        raise SchemaViolationError(f"{ctx.operation} would write NULL into NOT NULL column {bad[0]!r}; nothing was written")


def _check_castable(rows: pa.Table, ctx: RowsJobContext) -> None:
    """Spark flagged (``try_cast`` gave NULL for a non-NULL value) new values that do not fit their column."""
    if ctx.layout.bad_values_col is None or rows.num_rows == 0:
        return
    flagged = pc.unique(rows.column(ctx.layout.bad_values_col)).to_pylist()
    bad = sorted({name for text in flagged if text for name in text.split(",")})
    if bad:
        raise SchemaViolationError(
            f"{ctx.operation} would write value(s) that cannot be cast to the target type of column(s) {bad}; "
            "nothing was written"
        )


def _check_cardinality(uris: np.ndarray, rows: np.ndarray) -> None:
    """Raise if one (file, row index) appears twice among the matched pairs of this task."""
    if len(rows) < 2:
        return
    order = np.lexsort((rows, uris))
    uris, rows = uris[order], rows[order]
    if np.any((uris[1:] == uris[:-1]) & (rows[1:] == rows[:-1])):
        raise MergeCardinalityError(CARDINALITY_MESSAGE)


def _group_by_file(uris: np.ndarray, rows: np.ndarray, per_file: dict[str, list[np.ndarray]]) -> None:
    order = np.argsort(uris, kind="stable")
    uris, rows = uris[order], rows[order]
    boundaries = np.flatnonzero(uris[1:] != uris[:-1]) + 1
    for start, stop in zip(np.r_[0, boundaries], np.r_[boundaries, len(uris)]):
        per_file.setdefault(str(uris[start]), []).append(rows[start:stop])


def retire_and_write(ctx: RowsJobContext) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A mapInArrow function: matched rows (row ids + new values) in, outcomes and adds out."""
    dv = ctx.dv

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        per_file: dict[str, list[np.ndarray]] = {}
        matched_uris: list[np.ndarray] = []
        matched_rows: list[np.ndarray] = []
        counts: dict[int, int] = {}
        new_rows = NewRows(ctx)
        for record_batch in batches:
            if record_batch.num_rows == 0:
                continue
            batch = pa.Table.from_batches([record_batch])
            if ctx.layout.clause_col is not None:
                for item in pc.value_counts(batch.column(ctx.layout.clause_col)).to_pylist():
                    if item["values"] is not None:
                        counts[int(item["values"])] = counts.get(int(item["values"]), 0) + int(item["counts"])
            has_file = pc.is_valid(batch.column(dv.file_path_col))
            retire = _mask(batch, ctx.layout.retire_col)
            retiring = batch.filter(has_file if retire is None else pc.and_(has_file, retire))
            if retiring.num_rows:
                _group_by_file(
                    retiring.column(dv.file_path_col).to_numpy(),
                    retiring.column(dv.row_index_col).to_numpy().astype(np.int64),
                    per_file,
                )
            match = _mask(batch, ctx.layout.match_col)
            if match is not None:
                matched = batch.filter(pc.and_(has_file, match))
                matched_uris.append(matched.column(dv.file_path_col).to_numpy())
                matched_rows.append(matched.column(dv.row_index_col).to_numpy().astype(np.int64))
            write = _mask(batch, ctx.layout.write_col)
            written = batch if write is None else batch.filter(write)
            _check_castable(written, ctx)
            new_rows.add(written)
        if matched_uris:
            _check_cardinality(np.concatenate(matched_uris), np.concatenate(matched_rows))
        new_rows.flush()
        outcomes = {uri: finish_file(dv, uri, chunks) for uri, chunks in per_file.items()}
        yield from result_batches(dv, outcomes, new_rows.adds, counts, blobs=new_rows.blobs)

    return run


def result_batches(
    dv: DvJobContext,
    outcomes: Mapping[str, FileOutcome],
    adds: list[str],
    counts: Mapping[int, int],
    matched_sources: np.ndarray | None = None,
    blobs: Blobs | None = None,
    kept_rows: Mapping[str, bytes] | None = None,
) -> Iterator[pa.RecordBatch]:
    """A task's result rows: writes its DVs (``encode_outcomes``), then one row per file it
    retired rows of, per data file it wrote (``add`` JSON relative to the staging folder) and per
    clause count; for MERGE file tasks, the matched source ids and one ``kept`` row per file
    whose matched rows were not all retired; and, on tables reached through Hadoop, one ``blob``
    row per file the JVM must write (``engine.spark.jvm_files``)."""
    blobs = blobs if blobs is not None else Blobs(dv.jvm_names)
    dv_json = encode_outcomes(dv, outcomes, blobs)
    kinds: list[str] = []
    out: dict[str, list[object]] = {name: [] for name in RESULT_SCHEMA.names}

    def row(kind: str, **values: object) -> None:
        kinds.append(kind)
        for name in RESULT_SCHEMA.names[1:]:
            out[name].append(values.get(name))

    for uri, outcome in outcomes.items():
        row(KIND_FILE, file_uri=uri, action=outcome.action.value, dv_json=dv_json.get(uri), newly_deleted=outcome.newly_deleted)
    for add in adds:
        row(KIND_ADD, add_json=add)
    for clause, n in counts.items():
        row(KIND_COUNT, clause=clause, n=n)
    if matched_sources is not None and len(matched_sources):
        row(KIND_SOURCES, payload=np.asarray(matched_sources, dtype="<i8").tobytes())
    for path, bitmap in (kept_rows or {}).items():
        row(KIND_KEPT, file_uri=path, payload=bitmap)
    for path, data in blobs.files:
        row(KIND_BLOB, file_uri=path, payload=data)
    if kinds:
        out["kind"] = list(kinds)
        yield pa.RecordBatch.from_pydict(out, schema=RESULT_SCHEMA)
