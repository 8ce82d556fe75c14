"""results.md: the tables a reader needs, ratios against delta-rs and against the floor.

Ratios are ``contender median / reference median``: above 1 the contender is slower. A failed
or unavailable contender shows its status instead of a number, never a time.
"""

from __future__ import annotations

import math
from typing import Any

from dvengine.bench.runner import human_bytes

REF_DELTARS = "delta-rs"
REF_FLOOR = "floor"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio(value: float | None, ref: float | None) -> str:
    if value is None or ref is None or ref <= 0:
        return "-"
    return f"{value / ref:.2f}x"


def _k(value: Any) -> str:
    if value is None:
        return "-"
    if value == "inf" or (isinstance(value, float) and math.isinf(value)):
        return "never"
    return f"{float(value):.1f}"


def _files(s: dict[str, Any]) -> str:
    if s["files_removed"] is None:
        return "-"
    text = f"{s['files_removed']:.0f} / {s['data_files_written']:.0f} + {s['dv_files_written']:.0f}"
    return text if s.get("dvs_written") is None else f"{text} ({s['dvs_written']:.0f} DVs)"


def _bytes(s: dict[str, Any]) -> str:
    if s["bytes_written"] is None:
        return "-"
    return f"{human_bytes(s['bytes_written'])} + {human_bytes(s.get('log_bytes_written'))}"


def _reads(s: dict[str, Any], baseline: dict[str, dict[str, float]]) -> str:
    """Read-after times, each with its ratio to the same reader on the untouched base table: the
    read penalty the operation left behind (DVs to apply, more files) in one number."""
    engine = "dvengine" if s["contender"].startswith("dvengine") else s["contender"]
    base = baseline.get(engine, {})
    parts = []
    for reader, seconds in s["read_after_s"].items():
        ratio = f" ({seconds / base[reader]:.2f}x base)" if base.get(reader) else ""
        parts.append(f"{reader} {seconds:.3f}{ratio}")
    return ", ".join(parts) or "-"


def _jobs(s: dict[str, Any]) -> str:
    return "-" if s.get("spark_jobs") is None else f"{s['spark_jobs']:.0f}"


def machine_lines(payload: dict[str, Any]) -> list[str]:
    m, cfg = payload["machine"], payload["config"]
    mem = m.get("memory_bytes")
    load = payload.get("load_average") or {}
    bases = ", ".join(f"{e}: {b['files']} files, {human_bytes(b['bytes'])}" for e, b in payload["base_tables"].items())
    lines = [
        (
            f"- run: {payload['started_at']} ({payload['duration_s']:.0f} s), {'quick' if cfg['quick'] else 'full'} mode,"
            f" {cfg['repeat']} repetition(s), median reported with min-max"
        ),
        (
            f"- machine: {m['cores']} cores, {human_bytes(mem)} RAM, {m['cpu_model']}; load average at start"
            f" {load.get('start')}, at end {load.get('end')} (shared machine)"
        ),
        (
            f"- versions: python {m['python']}, pyspark {m['pyspark']}, pyarrow {m['pyarrow']},"
            f" deltalake {m['deltalake']}, duckdb {m['duckdb']}, java {m['java']}, dvengine {m['dvengine_commit']}"
        ),
        (
            f"- table: {cfg['rows']:,} rows in {cfg['files']} files{' partitioned by cat' if cfg['partitioned'] else ''};"
            f" bases: {bases}; bases pristine after run: {payload['bases_pristine_after_run']}"
        ),
        f"- dvengine auto mode rewrite threshold in effect: {payload['rewrite_threshold_in_effect']}",
    ]
    if cfg.get("spark_session", "dvengine") != "dvengine":
        lines.append(f"- dvengine's contenders ran in a {cfg['spark_session']} Spark session (--spark-session)")
    if cfg.get("spark_conf"):
        lines.append("- Spark confs set for this run: " + ", ".join(f"`{k}={v}`" for k, v in cfg["spark_conf"].items()))
    return lines


def workload_table(payload: dict[str, Any], info: dict[str, Any]) -> list[str]:
    rows = [s for s in payload["summaries"] if s["workload"] == info["name"]]
    ref = {s["contender"]: s for s in rows}
    deltars = ref.get(REF_DELTARS, {}).get("median_s")
    floor = ref.get(REF_FLOOR, {}).get("median_s")
    what = info["predicate"] or f"MERGE ON {info['merge_condition']}"
    lines = [
        f"### {info['name']}: {info['shape']} (`{what}`)",
        "",
        f"{info['matched_rows']:,} rows matched ({pct(info['fraction'])}) in {info['files_holding_matches']} files"
        + (f", {info['new_rows']:,} inserted" if info["new_rows"] else ""),
        "",
        "| contender | median s | min-max s | vs delta-rs | vs floor | Spark jobs | files removed / data + DV files written (DVs) | bytes written (data+DV + log) | read after (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in rows:
        if s["status"] != "ok" and s["median_s"] is None:
            lines.append(f"| {s['contender']} | {s['status']} | | | | | | | {(s['error'] or '')[:240]} |")
            continue
        reads = _reads(s, payload.get("baseline_read_s") or {})
        if s["status"] != "ok":  # some runs verified, some failed: show both, never hide the failure
            runs = s["runs"] + s.get("failed_runs", 0)
            reads = f"**FAILED in {s.get('failed_runs', 0)} of {runs} runs**: {(s['error'] or '')[:240]}"
        lines.append(
            f"| {s['contender']} | {_s(s['median_s'])} | {_s(s['min_s'])}-{_s(s['max_s'])} | {_ratio(s['median_s'], deltars)}"
            f" | {_ratio(s['median_s'], floor)} | {_jobs(s)} | {_files(s)} | {_bytes(s)} | {reads} |"
        )
    return [*lines, ""]


def pct(fraction: float) -> str:
    """A fraction as a percentage with three significant digits (1 row of 10M: 1e-05%)."""
    return f"{fraction * 100:.3g}%"


def crossover_lines(crossover: dict[str, Any]) -> list[str]:
    lines = [
        "## DV vs rewrite crossover",
        "",
        (
            "Break-even reads k = (rewrite write - DV write) / (DV read - rewrite read): after k full-table reads"
            f" ({crossover['reader']} `toDF()` aggregate unless noted) the rewrite has paid for itself. 'marginal'"
            " removes the fixed read price any DV costs (the penalty at the smallest fraction), which a per-file"
            " threshold cannot avoid; the threshold is derived from the marginal k."
        ),
        "",
    ]
    for kind, section in crossover["kinds"].items():
        lines += [
            f"### {kind}",
            "",
            f"Fixed DV read price (penalty at the smallest fraction): {section['fixed_read_penalty_s']:.3f} s",
            "",
            (
                "| fraction | write DV s | write rewrite s | bytes DV | bytes rewrite | read DV s | read rewrite s"
                " | read DV arrow s | read rewrite arrow s | k | k marginal | k arrow |"
            ),
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in section["points"]:
            lines.append(
                f"| {pct(p['fraction'])} | {_s(p['write_dv_s'])} | {_s(p['write_rewrite_s'])} | {human_bytes(p['bytes_dv'])}"
                f" | {human_bytes(p['bytes_rewrite'])} | {_s(p['read_dv_s'])} | {_s(p['read_rewrite_s'])}"
                f" | {_s(p['read_dv_arrow_s'])} | {_s(p['read_rewrite_arrow_s'])} | {_k(p['break_even_reads'])}"
                f" | {_k(p['break_even_reads_marginal'])} | {_k(p['break_even_reads_arrow'])} |"
            )
        lines.append("")
        for reads, threshold in section["threshold"].items():
            where = "above the largest fraction measured" if threshold is None else f"{threshold:.3f}"
            lines.append(
                f"- rewrite pays back (marginal k) within {float(reads):g} full read(s) from a fraction of: {where}"
            )
        lines.append("")
    return lines


def render_markdown(payload: dict[str, Any]) -> str:
    lines = ["# dvengine benchmark results", "", *machine_lines(payload), ""]
    baseline = payload.get("baseline_read_s") or {}
    if baseline:
        lines.append(
            "Full-table read of the untouched base: "
            + "; ".join(f"{e}: " + ", ".join(f"{k} {v:.3f} s" for k, v in r.items()) for e, r in baseline.items())
        )
        lines.append("")
    lines += [
        (
            "Times are the operation alone (table open + DML + commit) on a warm session; a contender's time counts"
            " only after DuckDB's delta_scan and its own reader saw the expected rows. 'vs' columns: median ratio"
            " (above 1 = slower). Spark jobs: jobs the operation started, from Spark's status tracker (median)."
            " Read after: full-table count + sums right after the operation, with the ratio to the same"
            " reader on the untouched base table."
        ),
        "",
        "## Workloads",
        "",
    ]
    for info in payload["workloads"]:
        lines += workload_table(payload, info)
    if payload.get("crossover"):
        lines += crossover_lines(payload["crossover"])
    return "\n".join(lines) + "\n"
