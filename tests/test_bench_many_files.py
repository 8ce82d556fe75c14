"""The many-files bench runs end to end on a small table and checks its own result."""

from __future__ import annotations

import json
from pathlib import Path

from dvengine.bench import many_files


def test_many_files_bench_measures_and_verifies_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert many_files.main(["--files", "3", "30", "--ops", "4", "--warm", "1", "--out", str(out)]) == 0
    report = json.loads((out / "many_files.json").read_text())
    assert [r["files"] for r in report["results"]] == [3, 30]
    for r in report["results"]:
        assert r["ops"] == 4 and 0 < r["wall_ms_min"] <= r["wall_ms_median"] <= r["wall_ms_max"]
    assert "| 30 |" in (out / "many_files.md").read_text()


def test_rows_the_bench_changes_are_distinct() -> None:
    rows = 3 * 10
    assert len({many_files._row(k, rows) for k in range(rows)}) == rows
