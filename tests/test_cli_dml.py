"""CLI create/delete end to end: the printed metrics and the rows `show` prints afterwards."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from interop import rows_delta_rs

from dvengine.cli.main import main as cli_main
from dvengine.log import load_snapshot


def _run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli_main(args)
    return code, out.getvalue()


def test_create_delete_show(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64()), "grp": [f"g{i % 4}" for i in range(100)]}), source)
    table = tmp_path / "t"
    code, out = _run(["create", str(table), "--from", str(source), "--partition-by", "grp"])
    assert code == 0 and json.loads(out)["version"] == 0
    code, out = _run(["delete", str(table), "--where", "id % 5 = 0 AND grp <> 'g0'", "--mode", "dv"])
    metrics = json.loads(out)
    expected = [(i, f"g{i % 4}") for i in range(100) if not (i % 5 == 0 and i % 4 != 0)]
    assert code == 0 and metrics["numDeletedRows"] == 100 - len(expected)
    # Each file covers a run of 25 consecutive ids of one group, which always holds a multiple of 5: each gets a DV.
    files_outside_g0 = [a for a in load_snapshot(str(table), version=0).files if a.partition_values["grp"] != "g0"]
    assert metrics["numDeletionVectorsAdded"] == len(files_outside_g0)
    code, out = _run(["show", str(table), "--format", "jsonl"])
    shown = sorted((o["id"], o["grp"]) for o in map(json.loads, out.splitlines()))
    assert shown == expected
    assert rows_delta_rs(table, ["id", "grp"]) == expected


def test_cli_reports_typed_errors(tmp_path: Path, capsys: Any) -> None:
    assert cli_main(["show", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "TableNotFoundError" in err and "not a Delta table" in err


def test_update_and_upsert_commands(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": pa.array(range(50), pa.int64()), "v": pa.array([1.0] * 50)}), source)
    table = tmp_path / "t"
    assert _run(["create", str(table), "--from", str(source)])[0] == 0
    code, out = _run(["update", str(table), "--set", "v = v * 10", "--set", "id=id+1000", "--where", "id < 5", "--mode", "dv"])
    assert code == 0 and json.loads(out)["numUpdatedRows"] == 5 and json.loads(out)["numCopiedRows"] == 0
    changes = tmp_path / "changes.parquet"
    pq.write_table(pa.table({"id": pa.array([10, 11, 500], pa.int64()), "v": pa.array([-1.0, -2.0, -3.0])}), changes)
    code, out = _run(["upsert", str(table), "--source", str(changes), "--key", "id", "--mode", "dv"])
    metrics = json.loads(out)
    assert code == 0 and (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (2, 1)
    model = {i: 1.0 for i in range(5, 50)} | {i + 1000: 10.0 for i in range(5)} | {10: -1.0, 11: -2.0, 500: -3.0}
    assert rows_delta_rs(table, ["id", "v"]) == sorted(model.items())


def test_update_command_rejects_malformed_assignment(tmp_path: Path, capsys: Any) -> None:
    assert cli_main(["update", str(tmp_path), "--set", "no_equals_sign"]) == 2
    assert "COLUMN=EXPRESSION" in capsys.readouterr().err


def test_delta_spark_style_merge_entry_point(spark: Any, tmp_path: Path) -> None:
    from dvengine import DeltaTable, write

    write(pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array([0] * 10, pa.int64())}), str(tmp_path / "t"), spark=spark)
    source = spark.createDataFrame([(3, 33), (20, 200)], "id long, v long").alias("s")
    target = DeltaTable.forPath(spark, tmp_path / "t").alias("t")
    metrics = (
        target.merge(source, "t.id = s.id")
        .whenMatchedUpdate(set={"v": "s.v + t.v"})
        .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"})
        .executeMetrics()
    )
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (1, 1)
    expected = sorted({**{i: 0 for i in range(10)}, 3: 33, 20: 200}.items())
    assert rows_delta_rs(tmp_path / "t", ["id", "v"]) == expected
    assert [h["operation"] for h in target.historyRecords()] == ["MERGE", "WRITE"]
