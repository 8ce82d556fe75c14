"""Spark-free table building and DV DML for maintenance, crash and concurrency tests.

Why it exists: those tests need many small commits (and, for concurrency, several OS processes
committing at once) and the property under test is the log and the commit protocol, not Spark.
So tables are created from pyarrow-written Parquet files and rows are deleted/updated with the
real core pieces - predicate binding, candidate planning, the DV codec, stats, Transaction and
its conflict rules - exactly as the Spark DML assembles them, minus the JVM. A child process
then starts in about a second instead of ten. The tests at the bottom check that tables built
this way read identically through all readers, so the helpers themselves are validated.

(Named ``test_*`` only because of file-ownership rules in this repository.)
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.commit.commit_info import delta_json
from dvengine.commit.transaction import Transaction
from dvengine.dv import bitmap_from_row_indexes, encode_deletion_vectors, load_deletion_vector
from dvengine.expressions import parse_predicate, to_pyarrow_expression
from dvengine.log import Snapshot, load_snapshot
from dvengine.planning.candidates import might_match_function, plan_candidates
from dvengine.protocol.actions import Action, AddFile, Metadata
from dvengine.protocol.features import DEFAULT_NEW_TABLE_PROTOCOL
from dvengine.protocol.schema import from_arrow_schema
from dvengine.protocol.stats import FileStats, stats_for_dv_file
from dvengine.storage.logstore import resolve_data_path
from dvengine.writing.files import build_add_file
from dvengine.writing.stats import stats_from_parquet_metadata

DV_TABLE_CONFIG = {"delta.enableDeletionVectors": "true"}


def _write_file(root: str, table: pa.Table, snapshot_schema: Any, partition: tuple[str, Any] | None) -> AddFile:
    folder = "" if partition is None else f"{partition[0]}={partition[1]}"
    relative = os.path.join(folder, f"part-{uuid.uuid4().hex}.snappy.parquet") if folder else f"part-{uuid.uuid4().hex}.snappy.parquet"
    target = os.path.join(root, relative)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    data = table if partition is None else table.drop_columns([partition[0]])
    pq.write_table(data, target, compression="snappy")
    st = os.stat(target)
    stats = stats_from_parquet_metadata(pq.read_metadata(target), snapshot_schema)
    values = {} if partition is None else {partition[0]: str(partition[1])}
    return build_add_file(relative, values, st.st_size, int(st.st_mtime * 1000), stats)


def write_files(root: str, batches: Sequence[pa.Table], partition_by: str | None = None) -> list[AddFile]:
    """Write each batch as one Parquet file (split by partition value when partitioned)."""
    schema = from_arrow_schema(batches[0].schema)
    adds = []
    for batch in batches:
        if partition_by is None:
            adds.append(_write_file(root, batch, schema, None))
            continue
        for value in sorted(set(batch.column(partition_by).to_pylist())):
            part = batch.filter(pc.equal(batch.column(partition_by), value))
            adds.append(_write_file(root, part, schema, (partition_by, value)))
    return adds


def create_table(
    root: str | Path,
    batches: Sequence[pa.Table],
    partition_by: str | None = None,
    configuration: dict[str, str] | None = None,
) -> int:
    """Create a DV-enabled table whose version 0 holds one file per batch (per partition)."""
    path = str(root)
    os.makedirs(path, exist_ok=True)
    adds = write_files(path, batches, partition_by)
    txn = Transaction(path, None, "CREATE TABLE", {"isManaged": "false", "partitionBy": delta_json([] if partition_by is None else [partition_by])})
    txn.update_protocol(DEFAULT_NEW_TABLE_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()),
            schema_string=from_arrow_schema(batches[0].schema).to_json_string(),
            partition_columns=() if partition_by is None else (partition_by,),
            configuration={**DV_TABLE_CONFIG, **(configuration or {})},
            created_time=int(time.time() * 1000),
        )
    )
    txn.add_actions(adds)
    return txn.commit({"numFiles": len(adds)})


def append(root: str | Path, batch: pa.Table, op_id: str | None = None) -> int:
    path = str(root)
    snapshot = load_snapshot(path)
    adds = write_files(path, [batch], snapshot.partition_columns[0] if snapshot.partition_columns else None)
    params: dict[str, Any] = {"mode": "Append"}
    if op_id is not None:
        params["opId"] = op_id
    txn = Transaction(path, snapshot, "WRITE", params)
    txn.add_actions(adds)
    return txn.commit({"numFiles": len(adds), "numOutputRows": batch.num_rows})


def _matching_rows(snapshot: Snapshot, add: AddFile, predicate_sql: str) -> np.ndarray:
    """Physical row indexes of ``add`` matching the predicate (including already-deleted ones)."""
    table = pq.read_table(resolve_data_path(snapshot.table_root, add.path))
    for name, value in snapshot.partition_values_logical(add).items():
        table = table.append_column(name, pa.array([value] * table.num_rows, type=pa.string() if isinstance(value, str) else None))
    table = table.append_column("__row", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    predicate = parse_predicate(predicate_sql, snapshot.schema)
    return np.asarray(table.filter(to_pyarrow_expression(predicate)).column("__row").to_numpy(), dtype=np.int64)


def _physical(add: AddFile) -> int:
    stats = FileStats.parse(add.stats)
    assert stats is not None and stats.num_records is not None
    return stats.num_records


def retire_rows_core(snapshot: Snapshot, predicate_sql: str, now_ms: int) -> tuple[list[Action], list[AddFile], int]:
    """DV actions deleting the rows matching ``predicate_sql``: (actions, candidates read, rows deleted)."""
    predicate = parse_predicate(predicate_sql, snapshot.schema)
    plan = plan_candidates(snapshot, predicate)
    actions: list[Action] = []
    bitmaps = []
    dv_targets: list[AddFile] = []
    deleted = 0
    for add in plan.candidates:
        new_rows = bitmap_from_row_indexes(_matching_rows(snapshot, add, predicate_sql))
        old = None if add.deletion_vector is None else load_deletion_vector(snapshot.table_root, add.deletion_vector)
        merged = new_rows if old is None else (old | new_rows)
        newly = len(merged) - (0 if old is None else len(old))
        if newly == 0:
            continue
        deleted += newly
        actions.append(add.to_remove(now_ms))
        if len(merged) == _physical(add):
            continue
        bitmaps.append(merged)
        dv_targets.append(add)
    descriptors = encode_deletion_vectors(snapshot.table_root, bitmaps, inline_max_bytes=-1)
    for add, dv in zip(dv_targets, descriptors, strict=True):
        actions.append(replace(add, deletion_vector=dv, stats=stats_for_dv_file(add.stats), data_change=True))
    return actions, list(plan.candidates), deleted


def core_delete(root: str | Path, predicate_sql: str, op_id: str | None = None) -> tuple[int | None, int]:
    """DELETE ... WHERE predicate with DVs and no Spark: (committed version or None, rows deleted)."""
    path = str(root)
    snapshot = load_snapshot(path)
    actions, read, deleted = retire_rows_core(snapshot, predicate_sql, int(time.time() * 1000))
    params: dict[str, Any] = {"predicate": delta_json([predicate_sql])}
    if op_id is not None:
        params["opId"] = op_id
    txn = Transaction(path, snapshot, "DELETE", params)
    txn.record_read(read, might_match_function(snapshot, parse_predicate(predicate_sql, snapshot.schema)))
    if not actions:
        return None, 0
    txn.add_actions(actions)
    return txn.commit({"numDeletedRows": deleted}), deleted


def core_update(root: str | Path, predicate_sql: str, new_rows: pa.Table, op_id: str | None = None) -> int | None:
    """UPDATE as Delta does it with DVs: DV the old rows and add a file with their new values, one commit."""
    path = str(root)
    snapshot = load_snapshot(path)
    actions, read, deleted = retire_rows_core(snapshot, predicate_sql, int(time.time() * 1000))
    if deleted == 0:
        return None
    assert deleted == new_rows.num_rows, "the caller passes exactly the updated rows"
    params: dict[str, Any] = {"predicate": delta_json([predicate_sql])}
    if op_id is not None:
        params["opId"] = op_id
    txn = Transaction(path, snapshot, "UPDATE", params)
    txn.record_read(read, might_match_function(snapshot, parse_predicate(predicate_sql, snapshot.schema)))
    txn.add_actions(actions + write_files(path, [new_rows]))
    return txn.commit({"numUpdatedRows": deleted})


def rows_of(root: str | Path, version: int | None = None, timestamp: Any = None) -> list[tuple[Any, ...]]:
    from dvengine import DeltaTable

    table = DeltaTable.forPath(None, root).toArrow(version=version, timestamp=timestamp)
    return sorted(tuple(r.values()) for r in table.to_pylist())


# --- tests of the helpers themselves -----------------------------------------------------------


def test_core_delete_and_update_read_the_same_everywhere(tmp_path: Path, spark: Any) -> None:
    from interop import assert_all_readers

    root = tmp_path / "t"
    ids = list(range(40))
    create_table(root, [pa.table({"id": ids[:20], "v": [i * 10 for i in ids[:20]]}),
                        pa.table({"id": ids[20:], "v": [i * 10 for i in ids[20:]]})])
    model = {i: i * 10 for i in ids}
    assert core_delete(root, "id in (0, 3, 6, 9, 12, 21, 24, 27, 30, 33, 36, 39)")[1] == 12
    for i in (0, 3, 6, 9, 12, 21, 24, 27, 30, 33, 36, 39):
        del model[i]
    assert core_delete(root, "id < 2")[1] == 1  # id 0 already gone, id 1 left
    del model[1]
    assert core_delete(root, "id < 2") == (None, 0)
    core_update(root, "id = 5", pa.table({"id": [5], "v": [-5]}))
    model[5] = -5
    assert_all_readers(spark, root, ["id", "v"], sorted(model.items()))
