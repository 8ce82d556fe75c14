"""Interleaved A/B timing of pairs of runs, shared by the small Spark feature benches.

Each workload is a pair (old, new) of callables; every round runs both, alternating which goes
first so neither always pays a warmer or colder JVM; round 0 only warms up and is not counted.
The summary gives each contender's median / min / max and the ratio of the second's median to
the first's, and the results go to ``results.json`` / ``results.md`` in one layout.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Contender = tuple[str, Callable[[], Any]]
Pair = tuple[Contender, Contender]


def time_pairs(pairs_of_round: Callable[[int], Mapping[str, Pair]], repeats: int) -> tuple[dict[str, dict[str, list[float]]], dict[str, tuple[str, str]]]:
    """Run ``repeats`` counted rounds after a warm-up round; ``pairs_of_round(rnd)`` gives that
    round's pairs (a round may need fresh inputs). Returns the seconds per workload and contender,
    and each workload's (first, second) contender names."""
    times: dict[str, dict[str, list[float]]] = {}
    names: dict[str, tuple[str, str]] = {}
    for rnd in range(repeats + 1):
        for workload, pair in pairs_of_round(rnd).items():
            names[workload] = (pair[0][0], pair[1][0])
            for name, run in pair if rnd % 2 == 0 else pair[::-1]:
                started = time.perf_counter()
                run()
                seconds = time.perf_counter() - started
                if rnd:  # round 0 warms the JVM
                    times.setdefault(workload, {}).setdefault(name, []).append(seconds)
    return times, names


def summarize_pairs(times: Mapping[str, Mapping[str, list[float]]], names: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """Per workload: each contender's median / min / max seconds, and ``ratio`` = second / first."""
    summary: dict[str, Any] = {}
    for workload, by_name in times.items():
        first, second = names[workload]
        medians = {name: statistics.median(values) for name, values in by_name.items()}
        summary[workload] = {
            name: {"median_s": round(medians[name], 3), "min_s": round(min(v), 3), "max_s": round(max(v), 3)}
            for name, v in by_name.items()
        }
        summary[workload]["ratio"] = round(medians[second] / medians[first], 3)
    return summary


def write_pair_results(out: Path, result: Mapping[str, Any], title: str, names: Mapping[str, tuple[str, str]],
                       ratio_header: str) -> list[str]:
    """``results.json`` (``result``, holding the ``summary``) and ``results.md`` (one row per
    contender, the ratio on the second's row) under ``out``; returns the Markdown lines."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [title, "", f"load average before {result['load_before']}, after {result['load_after']}", "",
             f"| workload | contender | median s | min-max s | {ratio_header} |", "|---|---|---|---|---|"]
    for workload, entry in result["summary"].items():
        first, second = names[workload]
        for name in (first, second):
            stats = entry[name]
            ratio = "" if name == first else f"{entry['ratio']:.2f}x"
            lines.append(f"| {workload} | {name} | {stats['median_s']:.3f} | {stats['min_s']:.3f}-{stats['max_s']:.3f} | {ratio} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    return lines
