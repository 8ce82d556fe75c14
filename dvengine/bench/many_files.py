"""Benchmark: a single-row DML on a table of 100, 2,000 or 10,000 files (what grows with files).

A table's file count grows with it (a TB table holds thousands of files), while a point DELETE
or UPDATE touches one. Each table here is written in one commit as ``--files`` partitions of
``--rows-per-file`` rows (``id``, ``v``, ``part = id // rows``; partitioned because one write
makes one file per partition), so a predicate on ``id`` reads no partition column and stats
skipping leaves one candidate file. One process, as a user's job runs: the table is opened once,
``--warm`` operations run untimed, then ``--ops`` single-row DML alternate DELETE and UPDATE on
rows spread over the table; wall and CPU (``time.process_time``) per operation, median and
min-max. A checkpoint falls due every 10 commits and is timed with the operation that writes it,
so the mean includes it and the median mostly does not.

Run: ``python -m dvengine.bench.many_files [--files 100 2000 10000] [--out benchmarks/results/many-files]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable


def _table(root: str, files: int, rows_per_file: int) -> None:
    ids = np.arange(files * rows_per_file, dtype=np.int64)
    dvengine.write(pa.table({"id": ids, "v": ids.copy(), "part": ids // rows_per_file}), root, partitionBy=["part"])


def _row(k: int, rows: int) -> int:
    return (1 + k * 7919) % rows  # spread over the table's files, no row twice for k < rows


def measure(files: int, rows_per_file: int, ops: int, warm: int) -> dict[str, Any]:
    """Time ``ops`` single-row DML on a new table of ``files`` files (this process)."""
    with tempfile.TemporaryDirectory(prefix=f"dvengine-many-files-{files}-") as tmp:
        root = os.path.join(tmp, "t")
        start = time.perf_counter()
        _table(root, files, rows_per_file)
        build_s = time.perf_counter() - start
        table = DeltaTable.forPath(None, root)
        rows = files * rows_per_file
        walls: list[float] = []
        cpus: list[float] = []
        for k in range(warm + ops):
            x = _row(k, rows)
            wall, cpu = time.perf_counter(), time.process_time()
            if k % 2:
                table.deleteMetrics(f"id = {x}", engine="local")
            else:
                table.updateMetrics(f"id = {x}", {"v": str(-x)}, engine="local")
            if k >= warm:
                walls.append((time.perf_counter() - wall) * 1e3)
                cpus.append((time.process_time() - cpu) * 1e3)
        live = DeltaTable.forPath(None, root).toArrow()
        expected = rows - (warm + ops) // 2
        if live.num_rows != expected:
            raise AssertionError(f"{files} files: {live.num_rows} rows after the DML, expected {expected}")
    return {
        "files": files, "rows_per_file": rows_per_file, "ops": ops, "build_s": round(build_s, 2),
        "wall_ms_median": statistics.median(walls), "wall_ms_min": min(walls), "wall_ms_max": max(walls),
        "wall_ms_mean": statistics.fmean(walls),
        "cpu_ms_median": statistics.median(cpus), "cpu_ms_min": min(cpus), "cpu_ms_max": max(cpus),
    }


def _markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Single-row DML against the number of files in the table",
        "",
        f"rows per file {meta['rows_per_file']}, {meta['ops']} timed ops per table after {meta['warm']} untimed, "
        f"one process per table; load average before {meta['load_before']}, after {meta['load_after']}",
        "",
        "| files | wall ms median (min-max) | wall ms mean | CPU ms median (min-max) | table written in s |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['files']} | {r['wall_ms_median']:.1f} ({r['wall_ms_min']:.1f}-{r['wall_ms_max']:.1f}) | "
            f"{r['wall_ms_mean']:.1f} | {r['cpu_ms_median']:.1f} ({r['cpu_ms_min']:.1f}-{r['cpu_ms_max']:.1f}) | "
            f"{r['build_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.many_files", description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[100, 2000, 10000])
    parser.add_argument("--rows-per-file", type=int, default=10)
    parser.add_argument("--ops", type=int, default=40)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--out", default="bench-results/many-files")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process measuring one table
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.rows_per_file, args.ops, args.warm)))
        return 0
    load_before = [f"{x:.2f}" for x in os.getloadavg()]
    results = []
    for files in args.files:  # a fresh process per table: no cache of one table helps the next
        out = subprocess.run(
            [sys.executable, "-m", "dvengine.bench.many_files", "--one", str(files), "--rows-per-file",
             str(args.rows_per_file), "--ops", str(args.ops), "--warm", str(args.warm)],
            check=True, capture_output=True, text=True,
        ).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    meta = {"rows_per_file": args.rows_per_file, "ops": args.ops, "warm": args.warm, "load_before": load_before,
            "load_after": [f"{x:.2f}" for x in os.getloadavg()]}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "many_files.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    Path(args.out, "many_files.md").write_text(_markdown(results, meta))
    print(_markdown(results, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
