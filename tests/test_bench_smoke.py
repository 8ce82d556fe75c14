"""Smoke run of the benchmark harness on a tiny table, through every contender.

Uses the session's SparkSession (never a second one) and checks what matters about a run: every
measurement of an available contender passed its correctness checks, the JSON holds the
measurements, machine facts and summaries, and the report and plots exist.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dvengine.api.table import DeltaTable
from dvengine.bench.config import BenchConfig
from dvengine.bench.outputs import write_outputs
from dvengine.bench.runner import run_benchmark

# dvengine-auto runs the same code paths as dv/rewrite; leaving it out keeps the test well under 60 s.
CONTENDERS = ("dvengine-dv", "dvengine-spark", "dvengine-rewrite", "delta-rs", "floor")


def test_bench_smoke_run(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = BenchConfig(
        rows=2_000,
        files=2,
        repeat=1,
        workloads=("delete-1row", "update-1row", "merge-1k"),
        out_dir=str(out),
        work_dir=str(tmp_path / "work"),
        warmup=False,
        contenders=CONTENDERS,
        spark_conf={"dvengine.spark.dmlStrategy": "files"},  # what --spark-conf sets for the run
    )
    lines: list[str] = []
    assert spark.conf.get("dvengine.spark.dmlStrategy", None) is None
    payload = run_benchmark(config, spark=spark, log=lines.append)
    paths = write_outputs(payload, str(out))
    assert spark.conf.get("dvengine.spark.dmlStrategy", None) is None  # restored after the run
    assert "- Spark confs set for this run: `dvengine.spark.dmlStrategy=files`" in (out / "results.md").read_text()

    saved = json.loads((out / "results.json").read_text())
    assert saved["machine"]["cores"] and saved["machine"]["pyspark"] and saved["machine"]["deltalake"]
    assert saved["bases_pristine_after_run"] is True
    assert {b["files"] for b in saved["base_tables"].values()} == {2}
    by_key = {(m["workload"], m["contender"]): m for m in saved["measurements"]}
    for workload in config.workloads:
        kind = workload.split("-")[0]
        for contender in CONTENDERS:
            m = by_key[(workload, contender)]
            if contender.startswith("dvengine") and kind != "delete" and not hasattr(DeltaTable, kind):
                assert m["status"] == "not available"
                continue
            assert m["status"] == "ok", (workload, contender, m["error"])
            assert m["seconds"] is not None and m["seconds"] > 0
            assert "metrics" in m["verified_by"]
            if contender != "floor":
                assert "duckdb" in m["verified_by"]
                assert m["files_removed"] >= 1
            assert m["read_after"], (workload, contender)
    one_row = by_key[("delete-1row", "dvengine-dv")]
    assert one_row["files_removed"] == 1 and one_row["data_files_written"] == 0  # stats skipping + a DV, no rewrite
    assert by_key[("delete-1row", "delta-rs")]["files_removed"] == 1
    # Spark jobs per command, from Spark's status tracker: the auto executor picks the in-process
    # one for a table this small (no Spark job at all); the forced Spark executor needs at least one.
    for workload in config.workloads:
        assert by_key[(workload, "dvengine-dv")]["spark_jobs"] == 0, workload
        assert by_key[(workload, "dvengine-spark")]["spark_jobs"] >= 1, workload
        assert by_key[(workload, "delta-rs")]["spark_jobs"] is None
    assert any("delete-1row" in line and "dvengine-dv" in line and line.rstrip().endswith(")") for line in lines)
    assert (out / "results.md").read_text().startswith("# dvengine benchmark results")
    assert {Path(p).name for p in paths} >= {"results.json", "results.md", "latency.png", "read_after.png"}
    assert not (tmp_path / "work" / "runs").exists()  # per-measurement copies are cleaned up
