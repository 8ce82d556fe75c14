"""How the in-process executor should read Parquet from an object store: measured, not assumed.

A point DELETE reads one file's footer and one column. Three ways to hand that file to pyarrow:
``obstore-get`` (one GET of the whole object into memory, then pyarrow reads from the buffer) and
``pyarrow-s3fs`` (pyarrow's own S3FileSystem, ranged reads: footer, then the column chunks).
obstore's ranged file-like (``open_reader``) is not usable by pyarrow 26 directly (its PythonFile
wrapper reports the object closed), so it is not a contender. Run against a local moto server:

    python -m dvengine.bench.parquet_source [--rows N] [--repeats K] [--out DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.bench.object_store import create_bucket, local_s3_server
from dvengine.bench.outputs import write_report


def _readers(endpoint: str, options: dict[str, str]) -> dict[str, Callable[[str], pa.Table]]:
    import obstore
    from obstore.store import S3Store
    from pyarrow import fs

    store = S3Store("bench", config=cast(Any, options))
    s3fs = fs.S3FileSystem(
        access_key=options["AWS_ACCESS_KEY_ID"], secret_key=options["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        endpoint_override=endpoint.removeprefix("http://"), scheme="http",
    )

    def obstore_get(key: str) -> pa.Table:
        data = obstore.get(store, key).bytes()
        return pq.ParquetFile(pa.BufferReader(bytes(data))).read(columns=["id"])

    def pyarrow_s3fs(key: str) -> pa.Table:
        with s3fs.open_input_file(f"bench/{key}") as fh:
            return pq.ParquetFile(fh).read(columns=["id"])

    return {"obstore-get": obstore_get, "pyarrow-s3fs": pyarrow_s3fs}


def run(rows: int, repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with local_s3_server() as (endpoint, options, _log):
        create_bucket(endpoint, "bench")
        import obstore
        from obstore.store import S3Store

        ids = np.arange(rows, dtype=np.int64)
        table = pa.table({"id": ids, "value": np.random.default_rng(0).random(rows), "cat": (ids % 16).astype(np.int32)})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue().to_pybytes()
        obstore.put(S3Store("bench", config=cast(Any, options)), "file.parquet", data)
        for name, read in _readers(endpoint, options).items():
            read("file.parquet")  # warm-up
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                got = read("file.parquet")
                times.append(time.perf_counter() - started)
                assert got.num_rows == rows
            ordered = sorted(times)
            results[name] = {
                "p50_ms": round(1000 * statistics.median(ordered), 2),
                "min_ms": round(1000 * ordered[0], 2),
                "max_ms": round(1000 * ordered[-1], 2),
                "n": repeats,
            }
    return {"rows": rows, "file_bytes": len(data), "columns_read": ["id"], "results": results}


def to_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Reading one column of a Parquet file on S3 (local moto server): {report['rows']:,} rows, "
        f"{report['file_bytes'] / 1e6:.1f} MB",
        "",
        f"Load before/after: {report.get('load_before', '?')} / {report.get('load_after', '?')}.",
        "",
        "| reader | p50 ms | min ms | max ms | n |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in report["results"].items():
        lines.append(f"| {name} | {r['p50_ms']} | {r['min_ms']} | {r['max_ms']} | {r['n']} |")
    return "\n".join(lines) + "\n"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dvengine.bench.parquet_source", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default="bench-results")
    args = parser.parse_args(argv)
    before = _uptime()
    report = run(args.rows, args.repeats)
    report["load_before"], report["load_after"] = before, _uptime()
    write_report(args.out, "parquet-source", report, to_markdown(report))
    print(to_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
