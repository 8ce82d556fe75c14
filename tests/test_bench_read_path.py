"""The read-path bench on a tiny table: every case runs, DV'd reads are checked against the Arrow
reader by the bench itself, and the report carries paired ratios for each case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dvengine.bench import read_path


def test_read_path_bench_runs_checks_and_reports(spark: Any, tmp_path: Path) -> None:
    report = read_path.run(rows=4000, files=2, repeat=2, work=str(tmp_path), dv_readers=("jvm", "python"))
    cases = report["cases"]
    assert set(cases) == {
        "toDF, no DVs", "format('delta'), no DVs",
        "toDF (jvm), 1 file with a 1-row DV", "toDF (python), 1 file with a 1-row DV",
        "toDF (jvm), DVs on 1% of rows in every file", "format('delta') (jvm), DVs on 1% of rows in every file",
        "toDF (python), DVs on 1% of rows in every file", "format('delta') (python), DVs on 1% of rows in every file",
        "toArrow, DVs on 1% of rows in every file",
    }
    # 4000 rows, id 7 deleted, then id % 100 = 3 (40 rows): what the DV'd Spark reads returned
    assert cases["toDF (jvm), 1 file with a 1-row DV"]["result"].startswith("(3999, ")
    assert cases["toDF (python), DVs on 1% of rows in every file"]["result"].startswith("(3959, ")
    assert cases["toArrow, DVs on 1% of rows in every file"]["result"] == "3959"
    for case in cases.values():
        assert case["x_floor"] > 0 and case["min_s"] <= case["median_s"] <= case["max_s"]
    markdown = read_path.to_markdown(report)
    assert "| toDF (jvm), 1 file with a 1-row DV |" in markdown and "ratio quartiles" in markdown


def test_a_wrong_read_fails_the_bench(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that ignored DVs would look fast; the bench refuses to report it. (The Python plan
    drops a few deleted rows with a filter: make it drop none.)"""
    from dvengine.engine.spark import reader

    monkeypatch.setattr(reader, "_deleted_rows_sql", lambda snapshot, files: "false")
    with pytest.raises(AssertionError, match="returned .* the Arrow reader"):
        read_path.run(rows=2000, files=2, repeat=1, work=str(tmp_path), dv_readers=("python",))


def test_phases_can_be_measured_alone(spark: Any, tmp_path: Path) -> None:
    report = read_path.run(rows=2000, files=2, repeat=1, work=str(tmp_path), dv_readers=("jvm",), phases=("one-dv",))
    assert list(report["cases"]) == ["toDF (jvm), 1 file with a 1-row DV"]
    assert report["cases"]["toDF (jvm), 1 file with a 1-row DV"]["result"].startswith("(1999, ")
