"""How much stats skipping each OPTIMIZE layout buys, and what it costs: ``python -m dvengine.bench.layout``.

One table of random (x, y) rows appended as many small files (every file spans both columns'
whole range, so nothing skips), then, on a fresh copy each: bin-packing compaction, ZORDER BY
(x, y) with Delta's equal-count file cuts, ZORDER BY with dvengine's cell-aligned cuts, and liquid
clustering (Hilbert). For each: OPTIMIZE wall time (median and range over repeats), the number of
files a point predicate on x and on y still touches (mean over probes, from the stats in the log),
and the files written. Run it under ``flock /tmp/dvengine-heavy.lock`` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.engine.local import cluster_rewrite
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot
from dvengine.read.scan_plan import plan_scan

LAYOUTS = ("compaction", "zorder-even-cuts", "zorder", "clustering-hilbert")


def build(root: str, rows: int, files: int, clustered: bool) -> None:
    rng = np.random.default_rng(42)
    if clustered:
        (DeltaTable.create(None).location(root).addColumn("x", "BIGINT").addColumn("y", "BIGINT")
         .addColumn("payload", "STRING").clusterBy("x", "y").execute())
    per = rows // files
    for i in range(files):
        data = {"x": rng.integers(0, 1_000_000, per), "y": rng.integers(0, 1_000_000, per),
                "payload": [f"row-{i}-{j}" for j in range(per)]}
        dvengine.write(pa.table(data), root, mode="append")


def touched(root: str, column: str, probes: list[int]) -> float:
    snap = load_snapshot(root)
    return statistics.mean(len(plan_scan(snap, parse_predicate(f"{column} = {v}", snap.schema), None).files) for v in probes)


def optimize(root: str, layout: str) -> None:
    t = DeltaTable.forPath(None, root)
    if layout == "compaction":
        t.optimize().executeCompaction()
    elif layout in ("zorder", "zorder-even-cuts"):
        original = cluster_rewrite.curve_rewriter
        if layout == "zorder-even-cuts":
            def even(*args: Any, **kwargs: Any) -> Any:
                return original(*args, **{**kwargs, "align": False})
            cluster_rewrite.curve_rewriter = even
        try:
            t.optimize().executeZOrderBy("x", "y")
        finally:
            cluster_rewrite.curve_rewriter = original
    else:
        t.optimize().executeCompaction()  # the table is clustered: OPTIMIZE clusters


def run(rows: int, files: int, out_files: int, repeats: int, work: str) -> dict[str, Any]:
    probes = [int(v) for v in np.random.default_rng(7).integers(0, 1_000_000, 20)]
    results: dict[str, Any] = {}
    for layout in LAYOUTS:
        base = os.path.join(work, f"base-{layout}")
        build(base, rows, files, clustered=layout.startswith("clustering"))
        size = sum(f.size for f in load_snapshot(base).files)
        # maxFileSize so that every curve layout writes about out_files files; compaction bin-packs to the same size
        os.environ["SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXFILESIZE"] = str(size // out_files)
        times = []
        for r in range(repeats):
            root = os.path.join(work, f"{layout}-{r}")
            shutil.copytree(base, root)
            start = time.perf_counter()
            optimize(root, layout)
            times.append(time.perf_counter() - start)
        results[layout] = {
            "optimize_s_median": statistics.median(times), "optimize_s_min": min(times), "optimize_s_max": max(times),
            "files_before": files, "files_after": len(load_snapshot(root).files),
            "touched_x_before": touched(base, "x", probes), "touched_y_before": touched(base, "y", probes),
            "touched_x": touched(root, "x", probes), "touched_y": touched(root, "y", probes),
        }
    return {"rows": rows, "files": files, "out_files": out_files, "repeats": repeats, "probes": len(probes), "layouts": results}


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# OPTIMIZE layouts: {report['rows']:,} rows in {report['files']} random files, ~{report['out_files']} files out",
        "",
        f"Files a point predicate touches (mean of {report['probes']} probes), OPTIMIZE time median [min-max] of "
        f"{report['repeats']} runs.",
        "",
        "| layout | files after | x = v touches | y = v touches | OPTIMIZE s |",
        "|---|---|---|---|---|",
    ]
    for name, r in report["layouts"].items():
        lines.append(
            f"| {name} | {r['files_after']} | {r['touched_x']:.1f} (was {r['touched_x_before']:.0f}) | "
            f"{r['touched_y']:.1f} (was {r['touched_y_before']:.0f}) | {r['optimize_s_median']:.2f} "
            f"[{r['optimize_s_min']:.2f}-{r['optimize_s_max']:.2f}] |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--out-files", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results/layout")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        report = run(args.rows, args.files, args.out_files, args.repeats, work)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "layout.json"), "w") as fh:
        json.dump(report, fh, indent=2)
    with open(os.path.join(args.out, "layout.md"), "w") as fh:
        fh.write(to_markdown(report))
    print(to_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
