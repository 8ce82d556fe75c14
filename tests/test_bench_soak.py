"""Smoke test of the soak benchmark (dvengine/bench/soak.py): a few rounds on a small table, every
contender's rows checked against the model and the other engine's reader, and the report's
shape. The real runs (2,000+ rounds on 1M rows) are in benchmarks/results/soak/."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

from dvengine.bench.soak import FAIL_ENV, GcClock, run_from_args, run_soak


def _assert_soak_report(report: dict[str, Any], out: Path, contenders: set[str]) -> None:
    """The report's shape and invariants after 12 rounds, read_every=4, profile=True."""
    results = report["results"]
    assert set(results) == contenders
    for name, r in results.items():
        assert r["correct"], (name, r["problems"])
        assert len(r["latencies_ms"]) == 12 and len(r["p50_per_decile_ms"]) == 10
        assert r["bytes_written"] > 0 and r["files_end"] >= 1
        assert [p[0] for p in r["reads"]] == [0, 4, 8, 12]
        # per-round events from the log: every round committed its MERGE (+ DELETE every 10th)
        assert [e[0] >= (2 if i % 10 == 9 else 1) for i, e in enumerate(r["events"])] == [True] * 12
        assert sum(r["tail"][f"{k}_rounds"] for k in ("plain", "checkpoint", "compaction")) == 12
        assert len(r["read_end_samples_s"]) == len(r["read_fresh_samples_s"]) == 9
        assert len(r["gc_rounds"]) == 12 and all(g[0] >= g[2] >= 0 and g[1] >= 0 for g in r["gc_rounds"])
        assert r["tail"]["p99_ms_without_gc"] <= max(r["latencies_ms"]) and len(r["cpu_ms"]) == 12
        assert 0 <= r["tail"]["top_1pct_waiting"] <= sum(r["tail"]["top_1pct"].values())
    assert results["delta-rs"]["dv_files_end"] == 0
    # the machine-speed reference: round 0, then every max(1, 12 // 40) = 1 rounds
    assert [r for r, _ in report["reference_ms"]] == list(range(13))
    assert all(ms > 0 for _, ms in report["reference_ms"])
    for f in ("soak.json", "soak.md", "latency.png", "read_files.png", "profile-dvengine.txt"):
        assert (out / f).stat().st_size > 0
    saved = json.loads((out / "soak.json").read_text())
    assert saved["rounds"] == 12 and saved["workers"] is report["workers"]
    assert "drift of the reference (last/first decile)" in (out / "soak.md").read_text()


@pytest.mark.parametrize("shape", ["uniform", "growing"])
def test_soak_smoke(tmp_path: Path, shape: str) -> None:
    report = run_soak(12, shape, 3_000, tmp_path, read_every=4, profile=True)
    _assert_soak_report(report, tmp_path, {"dvengine", "dvengine-nocompact", "delta-rs"})
    results = report["results"]
    # dvengine checkpoints every 10th commit: round 9 or 10 wrote version 10's checkpoint
    assert sum(e[1] for e in results["dvengine-nocompact"]["events"]) >= 1
    assert results["dvengine-nocompact"]["dv_files_end"] >= 1  # 12 rounds of updates left DVs behind
    assert report["workers"] is False and "worker_pids" not in report
    assert "All contenders shared one process" in (tmp_path / "soak.md").read_text()


def test_soak_workers_run_each_contender_in_its_own_process(tmp_path: Path) -> None:
    report = run_soak(12, "uniform", 3_000, tmp_path, read_every=4, profile=True, workers=True,
                      contenders=("dvengine", "delta-rs"))
    _assert_soak_report(report, tmp_path, {"dvengine", "delta-rs"})
    assert report["workers"] is True
    pids = report["worker_pids"]
    assert pids["parent"] == os.getpid()
    assert len({pids["parent"], pids["dvengine"], pids["delta-rs"]}) == 3  # two workers, neither the parent
    assert "cumulative" in (tmp_path / "profile-dvengine.txt").read_text()  # pstats of the worker's last round
    assert not (tmp_path / "profile-delta-rs.txt").exists()
    assert "its own worker process" in (tmp_path / "soak.md").read_text()


def test_soak_worker_error_reaches_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # FAIL_ENV is read only by the worker loop (spawned workers inherit the environment)
    monkeypatch.setenv(FAIL_ENV, "delta-rs:3")
    with pytest.raises(RuntimeError, match=r"soak contender delta-rs failed in round 3") as info:
        run_soak(5, "uniform", 2_000, tmp_path, read_every=5, workers=True, contenders=("dvengine", "delta-rs"))
    assert "Traceback" in str(info.value) and f"{FAIL_ENV} asked delta-rs to fail in round 3" in str(info.value)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("soak-")]  # joined


def test_soak_vacuums_delta_rs_and_still_counts_its_bytes(tmp_path: Path) -> None:
    # through the CLI's entry point, as `dvengine bench --soak 6 --soak-vacuum-every 2` runs it
    assert run_from_args(6, "uniform", 2_000, str(tmp_path), False, ["dvengine", "delta-rs"], vacuum_every=2) == 0
    report = json.loads((tmp_path / "uniform-6" / "soak.json").read_text())
    assert report["vacuum_every"] == 2
    results = report["results"]
    assert set(results) == {"dvengine", "delta-rs"}  # nocompact left out
    rs = results["delta-rs"]
    assert rs["correct"] and results["dvengine"]["correct"]
    assert rs["bytes_vacuumed"] > 0 and results["dvengine"]["bytes_vacuumed"] == 0
    # the same job without VACUUM writes about the same bytes: vacuumed files were counted, not lost
    plain = run_soak(6, "uniform", 2_000, tmp_path / "plain", read_every=3, contenders=("delta-rs",))
    assert rs["bytes_written"] == pytest.approx(plain["results"]["delta-rs"]["bytes_written"], rel=0.05)
    assert "VACUUMed (retention 0) every 2 rounds" in (tmp_path / "uniform-6" / "soak.md").read_text()


def test_gc_clock_times_full_collections() -> None:
    import gc

    clock = GcClock()
    gc.callbacks.append(clock)
    try:
        gc.collect(0)
        young = clock.reading()
        gc.collect()
        total_s, full, full_s = clock.reading()
    finally:
        gc.callbacks.remove(clock)
    assert young[1] == 0 and young[0] > 0  # a young collection is timed, not counted as full
    assert full == 1 and 0 < full_s <= total_s - young[0] + 1e-9
