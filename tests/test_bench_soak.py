"""Smoke test of the soak benchmark (dvengine/bench/soak.py): a few rounds on a small table, every
contender's rows checked against the model and the other engine's reader, and the report's
shape. The real runs (2,000+ rounds on 1M rows) are in benchmarks/results/soak/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvengine.bench.soak import GcClock, run_from_args, run_soak


@pytest.mark.parametrize("shape", ["uniform", "growing"])
def test_soak_smoke(tmp_path: Path, shape: str) -> None:
    report = run_soak(12, shape, 3_000, tmp_path, read_every=4, profile=True)
    results = report["results"]
    assert set(results) == {"dvengine", "dvengine-nocompact", "delta-rs"}
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
    # dvengine checkpoints every 10th commit: round 9 or 10 wrote version 10's checkpoint
    assert sum(e[1] for e in results["dvengine-nocompact"]["events"]) >= 1
    assert results["delta-rs"]["dv_files_end"] == 0
    assert results["dvengine-nocompact"]["dv_files_end"] >= 1  # 12 rounds of updates left DVs behind
    for f in ("soak.json", "soak.md", "latency.png", "read_files.png", "profile-dvengine.txt"):
        assert (tmp_path / f).stat().st_size > 0
    assert json.loads((tmp_path / "soak.json").read_text())["rounds"] == 12


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
