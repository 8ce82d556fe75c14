"""The soak benchmark's report: Markdown table with ratios against delta-rs, and PNG plots of
latency, full-read time and file counts over the rounds (see :mod:`dvengine.bench.soak`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def reference_every(rounds: int) -> int:
    """Rounds between two timings of the machine-speed reference (also timed at round 0)."""
    return max(1, rounds // 40)


def reference_deciles(reference_ms: list[list[float]], rounds: int) -> list[float]:
    """The reference's p50 per decile of the rounds, the deciles cut as the contenders' are
    (decile i = rounds i*n//10+1 .. (i+1)*n//10; round 0's timing counts in the first)."""
    out = []
    for i in range(10):
        lo, hi = i * rounds // 10 + 1, (i + 1) * rounds // 10
        ms = [m for r, m in reference_ms if lo <= max(r, 1) <= hi]
        out.append(float(np.median(ms)) if ms else float("nan"))
    return out


def render_markdown(report: dict[str, Any]) -> str:
    res = report["results"]
    workers = bool(report.get("workers"))
    lines = [
        f"# Soak: {report['rounds']} rounds, {report['shape']} keys, {report['rows']:,} rows",
        "",
        f"{report['upsert_keys']}-key MERGE per round (half updates, half new keys), {report['delete_keys']}-key DELETE "
        f"every {report['delete_every']}th round; each round opens the table by path, no SparkSession. "
        f"Load average before {report['load_avg_before'][0]:.2f}, after {report['load_avg_after'][0]:.2f} "
        f"({report['cpus']} cores, shared); wall time {report['wall_s']:.0f} s."
        + (f" The delta-rs table was VACUUMed (retention 0) every {report['vacuum_every']} rounds outside the "
           "timed rounds; its MB written include the vacuumed files." if report.get("vacuum_every") else "")
        + (" Each contender ran in its own worker process (`--soak-workers`), which timed its rounds and reads "
           "itself; they did not share a process." if workers else
           " All contenders shared one process (no `--soak-workers`)."),
        "",
        "| contender | total s | p50 first decile ms | p50 last decile ms | last/first | p50 ms | p99 ms | p99/p50 "
        "| files end (fresh) | DV files end | read end s | read fresh s | read ratio | MB written | correct |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res.items():
        d = r["p50_per_decile_ms"]
        lines.append(
            f"| {name} | {r['total_s']:.1f} | {d[0]:.0f} | {d[-1]:.0f} | {d[-1] / d[0]:.2f} | {r['p50_ms']:.0f} | "
            f"{r['p99_ms']:.0f} | {r['p99_ms'] / r['p50_ms']:.2f} | {r['files_end']} ({r['fresh_files']}) | "
            f"{r['dv_files_end']} | {r['read_end_s']:.3f} | {r['read_fresh_s']:.3f} | "
            f"{r['read_end_s'] / r['read_fresh_s']:.2f} | {r['bytes_written'] / 1e6:.0f} | "
            f"{'yes' if r['correct'] else 'NO: ' + '; '.join(r['problems'])} |"
        )
    waits = [(name, r["background_wait_s"]) for name, r in res.items() if r.get("background_wait_s")]
    if waits:
        lines += ["", "Background work (dvengine's checkpoints, written off the committing thread) waited for "
                  + ("before each other contender's round" if len(res) > 1 else "at the end")
                  + ", counted in the total, not in any round: "
                  + ", ".join(f"{name} {w:.1f} s" for name, w in waits) + "."]
    syncs = [(name, r["sync_after_rounds_s"]) for name, r in res.items() if r.get("sync_after_rounds_s")]
    if syncs:
        lines += ["", "Dirty pages written back (`os.sync()`) after each contender's round, so that one "
                  "contender's writeback never lands in another's timed round; not counted in any total: "
                  + ", ".join(f"{name} {w:.1f} s" for name, w in syncs) + "."]
    lines += ["", "p50 per decile (ms):", "", "| contender | " + " | ".join(f"d{i + 1}" for i in range(10)) + " |",
              "|---|" + "---|" * 10]
    for name, r in res.items():
        lines.append(f"| {name} | " + " | ".join(f"{x:.0f}" for x in r["p50_per_decile_ms"]) + " |")
    lines += _reference_lines(report)
    lines += _tail_lines(res, workers) + _read_lines(res)
    if "delta-rs" in res:
        base = res["delta-rs"]
        lines += ["", "Ratios against delta-rs (same run):", ""]
        for name, r in res.items():
            if name == "delta-rs":
                continue
            lines.append(f"- {name}: total time {r['total_s'] / base['total_s']:.2f}x, bytes written "
                         f"{r['bytes_written'] / max(1, base['bytes_written']):.3f}x, last-decile p50 "
                         f"{r['p50_per_decile_ms'][-1] / base['p50_per_decile_ms'][-1]:.2f}x")
    return "\n".join(lines) + "\n"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _reference_lines(report: dict[str, Any]) -> list[str]:
    """The machine-speed reference's row under the deciles table, and its drift."""
    ref = report.get("reference_ms")
    if not ref:
        return []
    d = reference_deciles(ref, report["rounds"])
    known = [x for x in d if x == x]  # not nan
    drift = f"{known[-1] / known[0]:.2f}x" if len(known) >= 2 else "-"
    return ["| machine reference | " + " | ".join(f"{x:.1f}" for x in d) + " |", "",
            f"Machine reference (a fixed CPU task timed by the parent between rounds every "
            f"{reference_every(report['rounds'])} rounds, {len(ref)} timings, in no contender's figures): "
            f"p50 {float(np.median([m for _, m in ref])):.1f} ms, drift of the reference (last/first decile) {drift}."]


def _tail_lines(res: dict[str, Any], workers: bool = False) -> list[str]:
    """Where the tail is: rounds by what they did (from the log), their p50 and max, and how many of
    the rounds over 3x p50 and in the top 1 % were of each kind."""
    rows = [(n, r["tail"]) for n, r in res.items() if "tail" in r]
    if not rows:
        return []
    lines = ["", "Rounds by what they committed (a compaction round also counts as such when it checkpointed; "
             "slow = over 3x the contender's p50):", "",
             "| contender | kind | rounds | p50 ms | max ms | slow | in top 1 % |", "|---|---|---|---|---|---|---|"]
    for name, t in rows:
        for kind in ("plain", "checkpoint", "compaction"):
            lines.append(f"| {name} | {kind} | {t[f'{kind}_rounds']} | {_ms(t[f'{kind}_p50_ms'])} | "
                         f"{_ms(t[f'{kind}_max_ms'])} | {t['over_factor'][kind]} | {t['top_1pct'][kind]} |")
    gc_rows = [(n, t) for n, t in rows if "full_gc_rounds" in t]
    if gc_rows:
        lines += ["", "Garbage-collector pauses (timed with gc.callbacks; "
                  + ("each contender in its own process):" if workers else "all contenders share the process):"), ""]
        for name, t in gc_rows:
            slow = sum(t["over_factor_with_full_gc"].values())
            top = sum(t["top_1pct_with_full_gc"].values())
            lines.append(
                f"- {name}: {t['full_gc_rounds']} rounds ran a full collection (median {t['full_gc_ms_p50']:.0f} ms), "
                f"GC pauses {t['gc_ms_total'] / 1000:.1f} s in all; of the slow rounds {slow}, of the top 1 % {top} "
                f"ran one; p99 with each round's GC pauses taken out {t['p99_ms_without_gc']:.0f} ms"
                + (f"; slow rounds that used under half their wall time in CPU (waiting on the shared machine "
                   f"or I/O): {t['over_factor_waiting']} of {sum(t['over_factor'].values())}, top 1 %: "
                   f"{t['top_1pct_waiting']} of {sum(t['top_1pct'].values())}" if "over_factor_waiting" in t else "")
            )
    return lines


def _read_lines(res: dict[str, Any]) -> list[str]:
    rows = [(n, r) for n, r in res.items() if r.get("read_end_samples_s")]
    if not rows:
        return []
    lines = ["", f"Full reads at the end, {len(rows[0][1]['read_end_samples_s'])} of each, alternating, warm "
             "(median, min-max, ms):", ""]
    for name, r in rows:
        e, f = r["read_end_samples_s"], r["read_fresh_samples_s"]
        lines.append(f"- {name}: end table {r['read_end_s'] * 1000:.1f} ({min(e) * 1000:.1f}-{max(e) * 1000:.1f}), "
                     f"fresh table {r['read_fresh_s'] * 1000:.1f} ({min(f) * 1000:.1f}-{max(f) * 1000:.1f})")
    return lines


def plot_soak(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = report["results"]
    title = f"{report['rounds']} rounds, {report['shape']} keys, {report['rows']:,} rows"
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, r in res.items():
        ls = np.array(r["latencies_ms"])
        w = max(1, len(ls) // 50)
        rolling = [float(np.median(ls[max(0, i - w):i + 1])) for i in range(len(ls))]
        ax.plot(range(1, len(ls) + 1), rolling, label=name)
    ax.set_xlabel("round")
    ax.set_ylabel("round latency, rolling median (ms)")
    ax.set_title(f"Soak latency: {title}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, r in res.items():
        ax1.plot([p[0] for p in r["reads"]], [p[1] for p in r["reads"]], marker=".", label=name)
        ax2.plot([p[0] for p in r["layout"]], [p[1] for p in r["layout"]], label=f"{name} files")
        ax2.plot([p[0] for p in r["layout"]], [p[2] for p in r["layout"]], linestyle="--", label=f"{name} DV files")
    ax1.set_xlabel("round")
    ax1.set_ylabel("full read (s)")
    ax1.set_title("Full-table read over rounds")
    ax2.set_xlabel("round")
    ax2.set_ylabel("files")
    ax2.set_title("Live files and files with DVs")
    for a in (ax1, ax2):
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "read_files.png", dpi=110)
    plt.close(fig)
