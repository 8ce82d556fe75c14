"""The high-frequency job: 100 consecutive single-row DELETEs and 100 UPDATEs on one table.

This is the workload deletion vectors exist for (GDPR deletes, corrections): each call changes
one row found by stats skipping. Latency per call is reported as p50 / p95 / max for dvengine
on each executor and for delta-rs, on fresh copies of one base table, in one run.

``--key-type string`` keys the rows by UUID strings instead of integers, in random order as CDC
and GDPR keys are: stats skip no file then, so every call looks its key up in every file (the
embedded executor through each file's string key index).

    python -m dvengine.bench.point [--rows N] [--files F] [--ops K] [--key-type int|string]
        [--engines local,spark,delta-rs] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.bench.outputs import write_report
from dvengine.bench.results import machine_facts

ENGINES = ("local", "spark", "auto", "delta-rs")
KEY_TYPES = ("int", "string")
_SCRAMBLE = 0x9E3779B97F4A7C15F39CC0605CEDC835  # odd: row number -> UUID is one-to-one mod 2**128


def key_of(row: int, key_type: str) -> str:
    """The SQL literal of row ``row``'s key: the number itself, or a UUID string that looks random."""
    if key_type == "int":
        return str(row)
    return f"'{uuid.UUID(int=(row * _SCRAMBLE) % 2**128)}'"


def _keys(ids: np.ndarray, key_type: str) -> pa.Array:
    if key_type == "int":
        return pa.array(ids)
    return pa.array([key_of(int(i), key_type).strip("'") for i in ids], pa.string())


def build_base(root: str, rows: int, files: int, key_type: str = "int") -> None:
    """``files`` files of contiguous row numbers; keyed by the numbers, min/max stats isolate the
    one file holding a key; keyed by UUID strings, they isolate none."""
    per_file = rows // files
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        rng = np.random.default_rng(i)
        table = pa.table({"id": _keys(ids, key_type), "value": rng.random(len(ids)), "cat": (ids % 16).astype(np.int32)})
        dvengine.write(table, root, mode="append" if i else "error")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ops(engine: str, table: str, spark: Any) -> tuple[Callable[[str], None], Callable[[str], None]]:
    """DELETE and UPDATE of the row whose key is the SQL literal given."""
    if engine == "delta-rs":
        from deltalake import DeltaTable as RsTable

        def rs_delete(key: str) -> None:
            RsTable(table).delete(f"id = {key}")

        def rs_update(key: str) -> None:
            RsTable(table).update(updates={"value": "-1.0"}, predicate=f"id = {key}")

        return rs_delete, rs_update
    session = spark if engine in ("spark", "auto") else None

    def delete(key: str) -> None:
        DeltaTable.forPath(session, table).delete(f"id = {key}", engine=engine)

    def update(key: str) -> None:
        DeltaTable.forPath(session, table).update(f"id = {key}", {"value": "-1.0"}, engine=engine)

    return delete, update


def run(rows: int, files: int, ops: int, engines: tuple[str, ...], work: str, key_type: str = "int") -> dict[str, Any]:
    base = os.path.join(work, "base")
    build_base(base, rows, files, key_type)
    spark = None
    if any(e in ("spark", "auto") for e in engines):
        from dvengine.engine.spark.session import get_or_create_session

        spark = get_or_create_session()
    rng = np.random.default_rng(7)
    keys = rng.choice(rows, size=2 * ops + 1, replace=False).tolist()  # the last one is the warm-up
    results: dict[str, Any] = {}
    for engine in engines:
        table = os.path.join(work, f"t-{engine}")
        shutil.copytree(base, table)
        delete, update = _ops(engine, table, spark)
        delete(key_of(int(keys[-1]), key_type))  # warm-up (JIT, imports, caches), not timed
        timings: dict[str, list[float]] = {"delete": [], "update": []}
        for i in range(ops):
            for kind, op, key in (("delete", delete, keys[2 * i]), ("update", update, keys[2 * i + 1])):
                started = time.perf_counter()
                op(key_of(int(key), key_type))
                timings[kind].append(time.perf_counter() - started)
        check = DeltaTable.forPath(None, table).toArrow()
        expected_rows = rows - ops - 1
        marked = int(np.count_nonzero(check.column("value").to_numpy() < 0))
        if check.num_rows != expected_rows or marked != ops:
            raise AssertionError(f"{engine}: {check.num_rows} rows / {marked} updated, expected {expected_rows} / {ops}")
        results[engine] = {
            kind: {
                "p50_ms": round(1000 * statistics.median(v), 2),
                "p95_ms": round(1000 * percentile(v, 0.95), 2),
                "max_ms": round(1000 * max(v), 2),
                "n": len(v),
            }
            for kind, v in timings.items()
        }
        shutil.rmtree(table, ignore_errors=True)
    return {
        "rows": rows,
        "files": files,
        "key_type": key_type,
        "ops_per_kind": ops,
        "machine": machine_facts(None),
        "results": results,
    }


_KEY_TEXT = {
    "int": "integer keys, contiguous per file (stats skipping finds the one file)",
    "string": "UUID string keys in random order (every file is a candidate)",
}


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Point DML: {report['ops_per_kind']} single-row DELETEs and UPDATEs in a row",
        "",
        f"{report['rows']:,} rows in {report['files']} files, {_KEY_TEXT[report.get('key_type', 'int')]}; each call "
        "opens the table, finds the row, changes it and commits. Warm (one untimed call first).",
        "",
        "| engine | DELETE p50 ms | DELETE p95 ms | UPDATE p50 ms | UPDATE p95 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for engine, r in report["results"].items():
        lines.append(
            f"| {engine} | {r['delete']['p50_ms']} | {r['delete']['p95_ms']} | {r['update']['p50_ms']} | {r['update']['p95_ms']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.point", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--key-type", choices=KEY_TYPES, default="int", help="integer ids or UUID strings")
    parser.add_argument("--engines", default="local,auto,spark,delta-rs")
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        parser.error(f"unknown engine(s) {unknown}; choose from {ENGINES}")
    work = tempfile.mkdtemp(prefix="dvengine-point-")
    try:
        report = run(args.rows, args.files, args.ops, engines, work, args.key_type)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    markdown = to_markdown(report)
    paths = write_report(args.out, "point", report, markdown)
    print(markdown)
    print(f"wrote {' and '.join(paths)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
