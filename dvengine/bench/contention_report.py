"""What one contention run found, and how the runs of every round become the report's rows.

``RunResult`` is filled by the orchestrator (``contention.run_contention``) from the writers'
records and the verification; ``summary_row`` folds one (W, kind) cell's rounds into medians and
same-round ratios, and ``markdown`` renders the rows. Kept apart from the orchestrator so the
arithmetic of the ratios and the table layout can be read (and changed) on their own.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunResult:
    """One (engine, writers, row-level) run: counts, throughput and what verification found."""

    writers: int
    ops_per_writer: int
    row_level: bool | None  # dvengine's row-level resolution; None for an engine without it (delta-rs)
    serial: bool = False  # one process ran all ``writers`` writers' operations (the same-total baseline)
    # ``writers`` processes each ran the same-total baseline on its own copy of the table (the ceiling)
    independent: bool = False
    committed: int = 0
    warm_ops: int = 0  # operations per lane run before the start signal (committed, not timed)
    timed: int = 0  # committed operations inside the DML window (ops/s and CPU per op use these)
    surfaced_conflicts: int = 0
    # Races resolved inside the engine, never reaching the caller: dvengine's commit attempts beyond
    # the first; delta-rs's other writers' commits it conflict-checked and committed past
    internal_retries: int = 0
    rebased_files: int = 0
    gave_up: int = 0
    elapsed_s: float = 0.0  # DML window: start signal -> the last writer's last DML (ops/s uses this)
    process_elapsed_s: float = 0.0  # start signal -> the last writer process exited (teardown included)
    cpu_s: float = 0.0  # CPU time (user + system) of all writers while running their operations
    ops_per_s: float = 0.0
    versions_gap_free: bool = False
    each_op_once: bool = False
    rows_match_model: bool = False
    delta_rs_matches: bool | None = None
    duckdb_matches: bool | None = None
    errors: list[str] = field(default_factory=list)
    conflict_messages: list[str] = field(default_factory=list)  # the first 5 that surfaced
    # Object-store requests the writers sent in the DML window, by kind (empty for a local table)
    store_requests: dict[str, int] = field(default_factory=dict)
    engine: str = "dvengine"  # whose writers ran: dvengine or delta-rs (contention.ENGINES)

    @property
    def verified(self) -> bool:
        return (self.versions_gap_free and self.each_op_once and self.rows_match_model
                and self.delta_rs_matches is not False and self.duckdb_matches is not False)


def who_label(writers: int, ops: int, serial: bool, independent: bool) -> str:
    """The row label: ``4`` writers of one table, ``1x4*50`` one process doing their ops, ``4 x 1x4*50``
    four such processes on tables of their own (the ceiling)."""
    if independent:
        return f"{writers} x 1x{writers}*{ops}"
    return f"1x{writers}*{ops}" if serial else str(writers)


def _ratio_cell(r: dict[str, Any], key: str) -> str:
    if r.get(key) is None:
        return "-"
    return f"{r[key]:.2f}x ({r[key + '_min']:.2f}-{r[key + '_max']:.2f})"


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    on_store = any(r.get("requests_per_op") for r in results)
    lines = [
        "# Contention: W writer processes x N single-row DML on one file"
        + (" each (one per writer, one table)" if meta.get("layout") == "file-per-writer" else ""),
        "",
        f"tables: {meta.get('store', 'local folder')}; layout: {meta.get('layout', 'hot-file')}",
        "",
        f"rows {meta['rows']}, {meta['ops']} ops per writer (the first {meta.get('warm_ops', 0)} of each before the "
        f"start signal, untimed), {meta['repeats']} rounds of every W (median, min-max of ops/s); "
        f"load average before {meta['load_before']}, after {meta['load_after']}",
        "",
        "Ratios are medians of each round's own ratio (min-max over rounds). `vs W=1`: one writer doing its own "
        f"{meta['ops']} ops. `vs 1xW*N`: one writer process doing the same W*{meta['ops']} ops as the W writers "
        "(same rows, same final table; rows `1xW*N` below). "
        "`W x 1xW*N`: W processes each doing that baseline on its own copy of the table, nothing shared but the "
        "machine: its `vs 1xW*N` is the most W writers of one table could reach here.",
        "",
        "| row-level | W | committed | conflicts surfaced | retries inside | files rebased | ops/s median (min-max) | vs W=1, same round: median (min-max) | vs 1xW*N, same round: median (min-max) | writer CPU ms/op | cores busy | DML window s (to process exit s) | verified |"
        + (" store requests per op |" if on_store else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if on_store else ""),
    ]
    for r in results:
        who = who_label(r["writers"], r["ops_per_writer"], r["serial"], r["independent"])
        lines.append(
            f"| {'on' if r['row_level'] else 'off'} | {who} | {r['committed']} | {r['surfaced_conflicts']} | "
            f"{r['internal_retries']} | {r['rebased_files']} | {r['ops_per_s']:.1f} ({r['ops_min']:.1f}-{r['ops_max']:.1f}) | "
            f"{_ratio_cell(r, 'vs_one')} | {_ratio_cell(r, 'vs_serial')} | {r['cpu_ms_per_op']:.1f} | "
            f"{r['cores_busy']:.2f} | {r['window_s']:.2f} ({r['process_s']:.2f}) | {r['verified']} |"
            + (f" {', '.join(f'{k} {v:.2f}' for k, v in r.get('requests_per_op', {}).items())} |" if on_store else "")
        )
    return "\n".join(lines) + "\n"


def _ratios(runs: list[RunResult], bases: list[RunResult] | None) -> dict[str, float] | None:
    """Median and range of each round's ratio of ``runs`` to ``bases`` (None: no baseline)."""
    if not bases:
        return None
    ratios = [r.ops_per_s / b.ops_per_s for r, b in zip(runs, bases, strict=True) if b.ops_per_s]
    if not ratios:
        return None
    return {"": statistics.median(ratios), "_min": min(ratios), "_max": max(ratios)}


def _requests_per_op(runs: list[RunResult]) -> dict[str, float]:
    """Object-store requests per timed op over ``runs``, by kind (empty for a local table)."""
    timed = sum(r.timed for r in runs)
    kinds: dict[str, int] = {}
    for r in runs:
        for kind, n in r.store_requests.items():
            kinds[kind] = kinds.get(kind, 0) + n
    return {kind: n / timed for kind, n in sorted(kinds.items())} if timed else {}


def summary_row(runs: list[RunResult], ones: list[RunResult] | None, serial: list[RunResult] | None) -> dict[str, Any]:
    rates = [r.ops_per_s for r in runs]
    row: dict[str, Any] = {
        **asdict(runs[0]),
        "committed": sum(r.committed for r in runs),
        "surfaced_conflicts": sum(r.surfaced_conflicts for r in runs),
        "internal_retries": sum(r.internal_retries for r in runs),
        "rebased_files": sum(r.rebased_files for r in runs),
        "ops_per_s": statistics.median(rates), "ops_min": min(rates), "ops_max": max(rates),
        "cpu_ms_per_op": statistics.median([1000 * r.cpu_s / r.timed for r in runs if r.timed] or [0.0]),
        # The writers' CPU over the window: how many cores they kept busy (2.0 is all of this machine).
        "cores_busy": statistics.median([r.cpu_s / r.elapsed_s for r in runs if r.elapsed_s] or [0.0]),
        "window_s": statistics.median(r.elapsed_s for r in runs),
        "process_s": statistics.median(r.process_elapsed_s for r in runs),
        "verified": all(r.verified for r in runs),
        "requests_per_op": _requests_per_op(runs),
        "runs": [asdict(r) for r in runs],
    }
    for key, bases in (("vs_one", ones), ("vs_serial", serial)):
        ratios = _ratios(runs, bases)
        row[key] = None if ratios is None else ratios[""]
        if ratios is not None:
            row[key + "_min"], row[key + "_max"] = ratios["_min"], ratios["_max"]
    return row
