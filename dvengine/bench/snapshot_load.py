"""Benchmark: snapshot load of a table with 10 commits against one with 10,000 (issue #22's target: <= 2x).

Both tables hold the same number of live files (``--files``, default 1,000 fake adds; a snapshot
load never opens data files) and take Delta's default checkpoint interval (10). Every commit
after the first replaces one file (remove + add), so only the history differs. Three loads are
timed, interleaved between the two tables, median and spread over ``--repeats``:

- ``cold``: the snapshot cache is empty, as in a new process: listing, newest checkpoint, tail;
- ``reopen``: the same table opened again with nothing new (one read of the cached commit);
- ``reopen_after_commit``: another writer committed once since (the per-round case of a stream).

Run: ``python -m dvengine.bench.snapshot_load [--commits 10000] [--out benchmarks/results/snapshot-load]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from dvengine.commit.transaction import Transaction
from dvengine.log import clear_snapshot_cache, load_snapshot
from dvengine.log import snapshot_cache as cache
from dvengine.protocol.actions import AddFile, Metadata
from dvengine.protocol.features import DEFAULT_NEW_TABLE_PROTOCOL
from dvengine.protocol.schema import from_arrow_schema


def _fake_add(n: int) -> AddFile:
    stats = json.dumps({"numRecords": 1000, "minValues": {"id": n * 1000}, "maxValues": {"id": n * 1000 + 999},
                        "nullCount": {"id": 0}})
    return AddFile(f"part-{n:08d}-{uuid.uuid4().hex}.snappy.parquet", {}, 10_000, int(time.time() * 1000), True, stats)


def _create(root: str, files: int) -> None:
    schema = from_arrow_schema(pa.schema([pa.field("id", pa.int64())]))
    txn = Transaction(root, None, "CREATE TABLE", {})
    txn.update_protocol(DEFAULT_NEW_TABLE_PROTOCOL)
    txn.update_metadata(Metadata(id=str(uuid.uuid4()), schema_string=schema.to_json_string(),
                                 configuration={"delta.enableDeletionVectors": "true"},
                                 created_time=int(time.time() * 1000)))
    txn.add_actions([_fake_add(i) for i in range(files)])
    txn.commit()


def _replace_one(root: str, k: int) -> None:
    snapshot = load_snapshot(root)
    old = snapshot.files[k % len(snapshot.files)]
    txn = Transaction(root, snapshot, "WRITE", {"mode": "Overwrite"})
    txn.record_read([old], None)
    txn.add_actions([old.to_remove(int(time.time() * 1000)), _fake_add(len(snapshot.files) + k)])
    txn.commit()


def _build(root: str, commits: int, files: int) -> None:
    _create(root, files)
    for k in range(1, commits):
        _replace_one(root, k)


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _summary(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples)}


def run(commits: int, files: int, repeats: int, out: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"10": f"{tmp}/small", str(commits): f"{tmp}/large"}
        started = time.perf_counter()
        for n, root in roots.items():
            _build(root, int(n), files)
        build_s = time.perf_counter() - started
        samples: dict[str, dict[str, list[float]]] = {n: {"cold": [], "reopen": [], "reopen_after_commit": []}
                                                       for n in roots}
        for i in range(repeats):
            for n, root in roots.items():
                clear_snapshot_cache()
                samples[n]["cold"].append(_timed(lambda r=root: load_snapshot(r)))  # type: ignore[misc]
                samples[n]["reopen"].append(_timed(lambda r=root: load_snapshot(r)))  # type: ignore[misc]
                os.environ[cache.ENV_SWITCH] = "false"  # "another writer": its commit does not warm our cache
                try:
                    _replace_one(root, 7 + i)
                finally:
                    del os.environ[cache.ENV_SWITCH]
                samples[n]["reopen_after_commit"].append(_timed(lambda r=root: load_snapshot(r)))  # type: ignore[misc]
    load_after = os.getloadavg()
    result: dict[str, Any] = {
        "files": files, "repeats": repeats, "build_seconds": build_s,
        "load_avg_before": load_before, "load_avg_after": load_after,
        "tables": {n: {kind: _summary(v) for kind, v in s.items()} for n, s in samples.items()},
    }
    big, small = result["tables"][str(commits)], result["tables"]["10"]
    result["ratios"] = {kind: big[kind]["p50_ms"] / small[kind]["p50_ms"] for kind in big}
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshot_load.json").write_text(json.dumps(result, indent=2))
    lines = [
        f"# Snapshot load: 10 vs {commits} commits ({files} live files, checkpoint interval 10)",
        "",
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; median (min-max) of {repeats}",
        "",
        f"| load | 10 commits (ms) | {commits} commits (ms) | ratio |",
        "|---|---|---|---|",
    ]
    for kind in ("cold", "reopen", "reopen_after_commit"):
        s, b = small[kind], big[kind]
        lines.append(f"| {kind} | {s['p50_ms']:.2f} ({s['min_ms']:.2f}-{s['max_ms']:.2f}) | "
                     f"{b['p50_ms']:.2f} ({b['min_ms']:.2f}-{b['max_ms']:.2f}) | {result['ratios'][kind]:.2f}x |")
    (out / "snapshot_load.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/snapshot-load"))
    args = parser.parse_args()
    run(args.commits, args.files, args.repeats, args.out)


if __name__ == "__main__":
    main()
