"""Executor side of DML: turn matched (file, row index) pairs into deletion vectors.

The verification scan's matches are repartitioned by file so each file's row indexes meet in
one task. The task builds one bitmap per file, unions it with the file's existing DV, decides
DV / rewrite / remove, and writes all its new DVs packed into a single DV file. Only
descriptors and counts travel back to the driver, never row indexes, so the driver's cost does
not grow with the number of deleted rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64
from pyspark import TaskContext

from dvengine.dv import bitmap_from_row_indexes, encode_deletion_vectors, load_deletion_vector
from dvengine.engine.spark.paths import HadoopNames
from dvengine.errors import DeletionVectorError
from dvengine.planning.decisions import DmlOptions, FileAction, decide_file_action
from dvengine.protocol.actions import AddFile

RESULT_SCHEMA = pa.schema(
    [
        pa.field("file_uri", pa.string(), False),
        pa.field("action", pa.string(), False),
        pa.field("dv_json", pa.string(), True),
        pa.field("newly_deleted", pa.int64(), False),
        pa.field("kind", pa.string(), False),
        pa.field("n", pa.int64(), True),
        pa.field("payload", pa.binary(), True),
    ]
)
RESULT_DDL = "file_uri string, action string, dv_json string, newly_deleted long, kind string, n long, payload binary"
KIND_FILE = "file"
# A DV file for the JVM to write (tables reached through Hadoop): file_uri is its Hadoop path.
KIND_BLOB = "blob"


@dataclass(frozen=True, slots=True)
class DvJobContext:
    """Everything a task needs, shipped once per task by closure (small: one entry per candidate file)."""

    table_root: str
    targets: Mapping[str, AddFile]
    options: DmlOptions
    dv_supported: bool
    file_path_col: str
    row_index_col: str
    dv_file_ids: tuple[tuple[str, str], ...]  # one pre-assigned DV file identity per task (partition)
    # Tables reached through Hadoop (``engine.spark.jvm_files``): how Hadoop names the table's files,
    # and the candidate files' old DVs (file uri -> portable roaring bytes) loaded on the driver,
    # since the task cannot read the table itself. None for local folders.
    jvm_names: HadoopNames | None = None
    old_dvs: Mapping[str, bytes] | None = None


@dataclass(frozen=True, slots=True)
class FileOutcome:
    action: FileAction
    all_deleted: BitMap64
    newly_deleted: int


def finish_file(ctx: DvJobContext, uri: str, chunks: list[np.ndarray]) -> FileOutcome:
    add = ctx.targets.get(uri)
    if add is None:
        raise DeletionVectorError(f"verification scan returned rows of {uri}, which is not a candidate file")
    new_rows = bitmap_from_row_indexes(np.concatenate(chunks))
    physical = add.num_records
    if physical is not None and len(new_rows) and new_rows.max() >= physical:
        raise DeletionVectorError(f"row index {new_rows.max()} is beyond numRecords={physical} of {add.path}")
    merged = new_rows
    previously = 0
    if add.deletion_vector is not None:
        if ctx.old_dvs is not None:
            old = BitMap64.deserialize(ctx.old_dvs[uri])
        else:
            old = load_deletion_vector(ctx.table_root, add.deletion_vector, num_records=physical)
        previously = len(old)
        merged = old | new_rows
    newly = len(merged) - previously
    action = decide_file_action(physical, previously, newly, ctx.options, ctx.dv_supported)
    return FileOutcome(action, merged, newly)


def _task_dv_file_id(ctx: DvJobContext) -> tuple[str, str]:
    """The DV file identity the driver assigned to this task (a retried task reuses it)."""
    task = TaskContext.get()
    partition = 0 if task is None else task.partitionId()
    return ctx.dv_file_ids[partition % len(ctx.dv_file_ids)]


class Blobs:
    """Files a task encoded for the JVM to write: (Hadoop path, bytes), or written at once when
    the table is a local folder (``names`` None)."""

    def __init__(self, names: HadoopNames | None) -> None:
        self.names = names
        self.files: list[tuple[str, bytes]] = []

    @property
    def sink(self) -> Callable[[str, bytes], None] | None:
        return None if self.names is None else self.keep

    def keep(self, path: str, data: bytes) -> None:
        assert self.names is not None
        self.files.append((self.names.path(path), data))


def encode_outcomes(ctx: DvJobContext, outcomes: Mapping[str, FileOutcome], blobs: Blobs) -> dict[str, str]:
    """Write the new DVs of this task's files (packed into the task's one DV file, or inline;
    the file goes to ``blobs`` on tables reached through Hadoop); returns file uri -> descriptor
    JSON for the files that keep a DV."""
    dv_uris = [uri for uri, o in outcomes.items() if o.action is FileAction.DELETION_VECTOR]
    if not dv_uris:
        return {}
    sink = blobs.sink
    descriptors = encode_deletion_vectors(
        ctx.table_root,
        [outcomes[uri].all_deleted for uri in dv_uris],
        ctx.options.inline_max_bytes,
        ctx.options.dv_random_prefix_len,
        _task_dv_file_id(ctx),
        **({} if sink is None else {"sink": sink}),
    )
    return {uri: json.dumps(d.to_json()) for uri, d in zip(dv_uris, descriptors)}


def build_deletion_vectors(ctx: DvJobContext) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A mapInArrow function: batches of (file uri, row index) in, one result row per file out."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        per_file: dict[str, list[np.ndarray]] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            uris = batch.column(ctx.file_path_col).to_numpy(zero_copy_only=False)
            rows = batch.column(ctx.row_index_col).to_numpy(zero_copy_only=False).astype(np.int64)
            order = np.argsort(uris, kind="stable")
            uris, rows = uris[order], rows[order]
            boundaries = np.flatnonzero(uris[1:] != uris[:-1]) + 1
            for start, stop in zip(np.r_[0, boundaries], np.r_[boundaries, len(uris)]):
                per_file.setdefault(str(uris[start]), []).append(rows[start:stop])
        if not per_file:
            return
        outcomes = {uri: finish_file(ctx, uri, chunks) for uri, chunks in per_file.items()}
        blobs = Blobs(ctx.jvm_names)
        dv_json = encode_outcomes(ctx, outcomes, blobs)
        out: dict[str, list[Any]] = {
            "file_uri": [*outcomes, *(path for path, _ in blobs.files)],
            "action": [o.action.value for o in outcomes.values()] + [KIND_BLOB] * len(blobs.files),
            "dv_json": [dv_json.get(uri) for uri in outcomes] + [None] * len(blobs.files),
            "newly_deleted": [o.newly_deleted for o in outcomes.values()] + [0] * len(blobs.files),
            "kind": [KIND_FILE] * len(outcomes) + [KIND_BLOB] * len(blobs.files),
            "n": [None] * (len(outcomes) + len(blobs.files)),
            "payload": [None] * len(outcomes) + [data for _, data in blobs.files],
        }
        yield pa.RecordBatch.from_pydict(out, schema=RESULT_SCHEMA)

    return run
