"""CLI create/delete end to end: the printed metrics and the rows `show` prints afterwards."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.cli import main as cli_main
from dvengine.log import load_snapshot
from interop import rows_delta_rs


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
    assert cli_main(["show", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "TableNotFoundError" in err and "not a Delta table" in err
