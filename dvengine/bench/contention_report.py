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


def _is_dvengine(r: dict[str, Any]) -> bool:
    return bool(r.get("engine", "dvengine") == "dvengine")


def markdown(results: list[dict[str, Any]], meta: dict[str, Any], engine_ratios: list[dict[str, Any]] | None = None) -> str:
    """The report. With only dvengine's rows it is the table it always was; rows of another engine
    (delta-rs) add an ``engine`` column, a note on what its cells mean, and ``engine_ratios``
    (``engine_ratio_rows``) below the table."""
    on_store = any(r.get("requests_per_op") for r in results)
    engines = not all(_is_dvengine(r) for r in results)
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
        *([] if not engines else [
            "",
            "`engine`: whose writers ran, each engine on its own copy of the same hot table (made by one "
            "function: the same Parquet file, the deletionVectors feature on). delta-rs writes copy-on-write (each "
            "op rewrites the whole file) and has no row-level resolution (`row-level` -); its conflicts surface as "
            "`CommitFailedError` and are re-planned like dvengine's. Its `retries inside` are other writers' commits "
            "it conflict-checked and committed past inside one call (delta-rs returns no commit-attempt count); it "
            "rebases nothing" + ("; its store requests are not counted (its own client)." if on_store else "."),
        ]),
        "",
        ("| engine " if engines else "") + "| row-level | W | committed | conflicts surfaced | retries inside | files rebased | ops/s median (min-max) | vs W=1, same round: median (min-max) | vs 1xW*N, same round: median (min-max) | writer CPU ms/op | cores busy | DML window s (to process exit s) | verified |"
        + (" store requests per op |" if on_store else ""),
        ("|---" if engines else "") + "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if on_store else ""),
    ]
    for r in results:
        who = who_label(r["writers"], r["ops_per_writer"], r["serial"], r["independent"])
        row_level = "-" if r["row_level"] is None else "on" if r["row_level"] else "off"
        lines.append(
            (f"| {r.get('engine', 'dvengine')} " if engines else "")
            + f"| {row_level} | {who} | {r['committed']} | {r['surfaced_conflicts']} | "
            f"{r['internal_retries']} | {r['rebased_files'] if _is_dvengine(r) else '-'} | {r['ops_per_s']:.1f} ({r['ops_min']:.1f}-{r['ops_max']:.1f}) | "
            f"{_ratio_cell(r, 'vs_one')} | {_ratio_cell(r, 'vs_serial')} | {r['cpu_ms_per_op']:.1f} | "
            f"{r['cores_busy']:.2f} | {r['window_s']:.2f} ({r['process_s']:.2f}) | {r['verified']} |"
            + (f" {', '.join(f'{k} {v:.2f}' for k, v in r.get('requests_per_op', {}).items())} |" if on_store else "")
        )
    if engine_ratios:
        lines += [
            "",
            "dvengine / delta-rs: each round's dvengine ops/s over delta-rs ops/s for the same W and kind, both run "
            "in that round one after the other (median, min-max over rounds).",
            "",
            "| W | dvengine row-level | dvengine ops/s / delta-rs ops/s, same round: median (min-max) |",
            "|---|---|---|",
        ]
        for c in engine_ratios:
            cell = "-" if c["ratio"] is None else f"{c['ratio']:.2f}x ({c['ratio_min']:.2f}-{c['ratio_max']:.2f})"
            lines.append(f"| {c['who']} | {'on' if c['row_level'] else 'off'} | {cell} |")
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


@dataclass
class ContenderRuns:
    """Every round's runs of one contender (an engine; for dvengine, with row-level on or off), by W:
    W writers of one table, the same-total baseline ``1xW*N`` (for W > 1) and the ceiling."""

    by_writers: dict[int, list[RunResult]]
    serial: dict[int, list[RunResult]]
    ceiling: dict[int, list[RunResult]]

    @classmethod
    def planned(cls, writers: list[int], same_total: bool, ceiling: bool) -> ContenderRuns:
        serial: dict[int, list[RunResult]] = {w: [] for w in writers if w > 1 and same_total}
        return cls({w: [] for w in writers}, serial, {w: [] for w in serial if ceiling})

    def kinds(self, count: int) -> list[tuple[bool, bool]]:
        """(one process, independent tables) of every run due at W = ``count`` in a round, in order:
        the W writers, then the same-total baseline, then the ceiling."""
        return [(False, False)] + ([(True, False)] if count in self.serial else []) + (
            [(True, True)] if count in self.ceiling else [])

    def _kind(self, one_process: bool, independent: bool) -> dict[int, list[RunResult]]:
        return self.ceiling if independent else self.serial if one_process else self.by_writers

    def add(self, count: int, one_process: bool, independent: bool, run: RunResult) -> None:
        self._kind(one_process, independent)[count].append(run)

    def runs(self, count: int, one_process: bool, independent: bool) -> list[RunResult] | None:
        return self._kind(one_process, independent).get(count)

    def summary_rows(self) -> list[dict[str, Any]]:
        """The report's rows: for every W, the writers, their same-total baseline, the ceiling."""
        ones = self.by_writers.get(1)
        rows = []
        for count, runs in self.by_writers.items():
            rows.append(summary_row(runs, ones, self.serial.get(count)))
            if count in self.serial:
                rows.append(summary_row(self.serial[count], ones, None))
            if count in self.ceiling:
                rows.append(summary_row(self.ceiling[count], ones, self.serial[count]))
        return rows


def engine_ratio_rows(dvengine: ContenderRuns, delta_rs: ContenderRuns, row_level: bool, ops: int) -> list[dict[str, Any]]:
    """dvengine's ops/s over delta-rs's for every W and kind both ran, each round's own ratio (the
    two ran one after the other in that round, so a swing of the machine's load hits both)."""
    rows = []
    for count in dvengine.by_writers:
        for one_process, independent in dvengine.kinds(count):
            ratios = _ratios(dvengine.runs(count, one_process, independent) or [],
                             delta_rs.runs(count, one_process, independent))
            rows.append({
                "who": who_label(count, ops, one_process, independent), "writers": count, "serial": one_process and not independent,
                "independent": independent, "row_level": row_level,
                "ratio": None if ratios is None else ratios[""],
                "ratio_min": None if ratios is None else ratios["_min"],
                "ratio_max": None if ratios is None else ratios["_max"],
            })
    return rows
