"""Writing UUID-named V2 checkpoints with sidecars (``v2Checkpoint`` + ``delta.checkpointPolicy=v2``).

Truth: a table whose CREATE TABLE commit is written as Delta Spark writes it with
`TBLPROPERTIES ('delta.feature.v2Checkpoint'='supported', 'delta.checkpointPolicy'='v2')`, a model of
its rows, and DuckDB (delta-kernel-rs) and delta-rs reading the table at the checkpointed version
after every JSON commit before it is deleted, so the checkpoint alone must carry the state.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError
from dvengine.log import clear_snapshot_cache, load_snapshot
from dvengine.log.checkpoint_writer import last_checkpoint_json, write_checkpoint
from dvengine.maintenance.properties import set_table_properties

COLUMNS = ["id", "g"]


def _delta_spark_v2_table(root: Path) -> str:
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "g", "type": "long", "nullable": True, "metadata": {}}]}
    config = {"delta.enableDeletionVectors": "true", "delta.checkpointPolicy": "v2"}
    now = int(time.time() * 1000)
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "operationParameters": {
            "partitionBy": "[]", "clusterBy": "[]", "description": None, "isManaged": "false",
            "properties": json.dumps(config)}, "isolationLevel": "Serializable", "isBlindAppend": True,
            "operationMetrics": {}, "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": config, "createdTime": now}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "v2Checkpoint"],
                      "writerFeatures": ["deletionVectors", "v2Checkpoint"]}},
    ]
    os.makedirs(root / "_delta_log")
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return str(root)


def _ints(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "g": pa.array([i % 3 for i in ids], pa.int64())})


def _only_the_checkpoint_left(root: str, version: int) -> None:
    """Delete every commit up to ``version`` (and any classic checkpoint) so readers must use the V2 one."""
    log = Path(root, "_delta_log")
    for f in log.iterdir():
        if f.name.endswith(".json") and ".checkpoint." not in f.name and int(f.name[:20]) <= version:
            f.unlink()
    assert not list(log.glob("*.checkpoint.parquet"))
    clear_snapshot_cache()


def test_v2_checkpoint_with_sidecar_is_read_by_every_reader(tmp_path: Path) -> None:
    root = _delta_spark_v2_table(tmp_path / "t")
    model = {i: i % 3 for i in range(20)}
    dvengine.write(_ints(range(10)), root, mode="append")
    dvengine.write(_ints(range(10, 20)), root, mode="append")
    table = DeltaTable.forPath(None, root)
    table.delete("g = 0 AND id < 10", mode="dv")  # a DV on the first file
    model = {i: g for i, g in model.items() if not (g == 0 and i < 10)}
    path = write_checkpoint(load_snapshot(root))
    log = Path(root, "_delta_log")
    name = Path(path).name
    assert name.startswith(f"{3:020d}.checkpoint.") and name.endswith(".parquet") and len(name) == 20 + 12 + 36 + 8
    top = pq.read_table(path).to_pylist()
    meta = [r["checkpointMetadata"] for r in top if r["checkpointMetadata"]]
    assert len(meta) == 1 and meta[0]["version"] == 3
    sidecars = [r["sidecar"] for r in top if r["sidecar"]]
    assert len(sidecars) == 1 and not any(r["add"] or r["remove"] for r in top)  # all file actions in the sidecar
    side = log / "_sidecars" / sidecars[0]["path"]
    assert side.stat().st_size == sidecars[0]["sizeInBytes"]
    side_rows = pq.read_table(side).to_pylist()
    assert sum(1 for r in side_rows if r["add"]) == 2 and dict(meta[0]["tags"])["numOfAddFiles"] == "2"
    assert [r["add"]["deletionVector"] is not None for r in side_rows if r["add"]].count(True) == 1
    assert last_checkpoint_json(root)["version"] == 3  # type: ignore[index]
    _only_the_checkpoint_left(root, 3)
    want = sort_rows(model.items())
    assert rows_arrow(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want
    assert rows_delta_rs(root, COLUMNS) == want
    # DML continues after it (DV on a file known only from the sidecar), and the next checkpoint is V2 too
    DeltaTable.forPath(None, root).update("id = 11", {"g": "100"}, mode="dv")
    model[11] = 100
    dvengine.write(_ints(range(20, 22)), root, mode="append")
    model.update({20: 2, 21: 0})
    write_checkpoint(load_snapshot(root))
    assert len(list(log.glob(f"{5:020d}.checkpoint.*.parquet"))) == 1 and len(list((log / "_sidecars").iterdir())) == 2
    _only_the_checkpoint_left(root, 5)
    want = sort_rows(model.items())
    assert rows_arrow(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want
    assert rows_delta_rs(root, COLUMNS) == want


def test_interval_checkpoints_of_a_v2_table_are_v2(tmp_path: Path) -> None:
    root = _delta_spark_v2_table(tmp_path / "t")
    set_table_properties(root, {"delta.checkpointInterval": "2"})  # version 1
    dvengine.write(_ints(range(3)), root, mode="append")  # version 2: due, written in the background
    dvengine.wait_for_checkpoints()
    log = Path(root, "_delta_log")
    assert len(list(log.glob(f"{2:020d}.checkpoint.*.parquet"))) == 1 and not list(log.glob("*.checkpoint.parquet"))
    _only_the_checkpoint_left(root, 2)
    assert rows_duckdb(root, COLUMNS) == sort_rows((i, i % 3) for i in range(3))


def test_an_empty_table_checkpoints_without_sidecars(tmp_path: Path) -> None:
    root = _delta_spark_v2_table(tmp_path / "t")
    path = write_checkpoint(load_snapshot(root))
    top = pq.read_table(path).to_pylist()
    assert [r["checkpointMetadata"]["version"] for r in top if r["checkpointMetadata"]] == [0]
    assert not any(r["sidecar"] for r in top) and not Path(root, "_delta_log", "_sidecars").exists()
    assert load_snapshot(root).version == 0


def test_the_policy_property_adds_the_feature_and_classic_stays_classic(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_ints(range(3)), root)
    write_checkpoint(load_snapshot(root))
    assert Path(root, "_delta_log", f"{0:020d}.checkpoint.parquet").exists()  # no feature: classic
    set_table_properties(root, {"delta.checkpointPolicy": "v2"})
    protocol = load_snapshot(root).protocol
    assert "v2Checkpoint" in (protocol.reader_features or ()) and "v2Checkpoint" in (protocol.writer_features or ())
    write_checkpoint(load_snapshot(root))
    assert len(list(Path(root, "_delta_log").glob(f"{1:020d}.checkpoint.*.parquet"))) == 1
    with pytest.raises(InvalidArgumentError, match="checkpointPolicy"):
        set_table_properties(root, {"delta.checkpointPolicy": "v3"})


def test_dvengine_created_v2_table(tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    dvengine.write(_ints(range(4)), root, configuration={"delta.checkpointPolicy": "v2"})
    assert "v2Checkpoint" in (load_snapshot(root).protocol.writer_features or ())
    write_checkpoint(load_snapshot(root))
    _only_the_checkpoint_left(root, 0)
    rows: list[Any] = rows_delta_rs(root, COLUMNS)
    assert rows == sort_rows((i, i % 3) for i in range(4)) == rows_duckdb(root, COLUMNS)
