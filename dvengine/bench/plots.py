"""PNG plots (matplotlib, Agg): latency, bytes written and read-after time vs fraction touched.

One panel per DML kind, one line per contender, log-log axes: the fractions span 1e-7 (one row
of 10M) to 0.5, and times and bytes span orders of magnitude, so linear axes would flatten
every small-fraction point onto zero.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

STYLES: dict[str, dict[str, Any]] = {
    "dvengine-dv": {"color": "tab:blue", "marker": "o"},
    "dvengine-local": {"color": "tab:cyan", "marker": "v"},
    "dvengine-spark": {"color": "tab:purple", "marker": "P"},
    "dvengine-rewrite": {"color": "tab:orange", "marker": "s"},
    # auto often equals dv exactly: hollow, larger markers drawn on top keep both lines visible
    "dvengine-auto": {"color": "tab:green", "marker": "^", "markerfacecolor": "none", "markersize": 10, "zorder": 3},
    "delta-rs": {"color": "tab:red", "marker": "D"},
    "floor": {"color": "black", "marker": "x"},
}
READER_LINE = {"spark": "-", "arrow": "--", "querybuilder": "-", "pyarrow": "-"}
Getter = Callable[[dict[str, Any]], list[tuple[str, float]]]


def _kinds(summaries: list[dict[str, Any]]) -> list[str]:
    return [k for k in ("delete", "update", "merge") if any(s["kind"] == k for s in summaries)]


def _figure(
    summaries: list[dict[str, Any]], title: str, ylabel: str, get: Getter, path: str, skip: set[str]
) -> str | None:
    # every summary with verified runs; a partly failed one plots only its verified runs' medians
    ok = [s for s in summaries if s.get("runs", 0) > 0 and s["contender"] not in skip]
    kinds = _kinds(ok)
    if not kinds:
        return None
    width = max(5.2 * len(kinds), 9.0)  # one panel still needs room for the title and legend
    fig, axes = plt.subplots(1, len(kinds), figsize=(width, 4.4), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for s in ok:
            if s["kind"] != kind:
                continue
            for label, value in get(s):
                if value > 0:
                    series.setdefault((s["contender"], label), []).append((s["fraction"], value))
        for (contender, label), points in sorted(series.items()):
            points.sort()
            style = STYLES.get(contender, {})
            name = contender if label == "" else f"{contender} ({label})"
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                linestyle=READER_LINE.get(label, "-"),
                label=name,
                **style,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(kind.upper())
        ax.set_xlabel("fraction of rows touched")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        _at_least_a_decade(ax)
    handles: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    ncol = max(1, min(len(handles), int(width // 3.2)))
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=ncol, fontsize=8)
    fig.suptitle(textwrap.fill(title, width=int(width * 11)))
    fig.tight_layout(rect=(0, 0.06 + 0.04 * ((len(handles) - 1) // ncol), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _at_least_a_decade(ax: Any) -> None:
    """Widen a log y axis spanning less than 10x, where matplotlib would print cluttered 2x10^-1 ticks."""
    low, high = ax.get_ylim()
    if low > 0 and high / low < 10:
        middle = (low * high) ** 0.5
        ax.set_ylim(middle / 10**0.5, middle * 10**0.5)


def _total_bytes(s: dict[str, Any]) -> list[tuple[str, float]]:
    """Data + DV + log bytes: an inline DV lives in the commit, so data + DV files alone can be 0."""
    if s["bytes_written"] is None:
        return []
    return [("", s["bytes_written"] + (s.get("log_bytes_written") or 0))]


def write_plots(payload: dict[str, Any], out_dir: str) -> list[str]:
    summaries = payload["summaries"]
    cfg = payload["config"]
    size = f"{cfg['rows']:,} rows, {cfg['files']} files"
    made = [
        _figure(
            summaries,
            f"Operation latency (median of {cfg['repeat']}), {size}",
            "seconds",
            lambda s: [("", s["median_s"])] if s["median_s"] is not None else [],
            os.path.join(out_dir, "latency.png"),
            set(),
        ),
        _figure(
            summaries,
            f"Bytes written (data + DV + log files), {size}",
            "bytes",
            _total_bytes,
            os.path.join(out_dir, "bytes_written.png"),
            {"floor"},
        ),
        _figure(
            summaries,
            f"Full-table read right after the operation (solid: engine SQL/DataFrame, dashed: dvengine toArrow), {size}",
            "seconds",
            lambda s: sorted(s["read_after_s"].items()),
            os.path.join(out_dir, "read_after.png"),
            set(),
        ),
    ]
    return [p for p in made if p is not None]
