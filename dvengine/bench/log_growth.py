"""Benchmark: snapshot load time as a table accumulates many small commits.

High-frequency small updates mean thousands of commits a day. Without checkpoints every load
replays every JSON commit, so load time grows with history; with a checkpoint every
``delta.checkpointInterval`` commits, a load reads one checkpoint plus at most that many JSON
files, so it should stay flat. Both tables are built side by side in one run from the same 20
files and the same commits: each commit deletes one more row of one file with a deletion vector
(remove + re-add with the grown DV), the high-frequency small-update pattern, so the number of
live files stays fixed and only the history grows. No Spark is involved.

Run: ``python -m dvengine.bench.log_growth [--commits 1000] [--out benchmarks/results]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from dvengine.bench.results import machine_facts
from dvengine.commit.transaction import Transaction
from dvengine.dv import encode_deletion_vectors, load_deletion_vector
from dvengine.log import load_snapshot
from dvengine.protocol.actions import Metadata
from dvengine.protocol.features import DEFAULT_NEW_TABLE_PROTOCOL
from dvengine.protocol.schema import from_arrow_schema
from dvengine.protocol.stats import stats_for_dv_file
from dvengine.writing.files import build_add_file
from dvengine.writing.stats import stats_from_parquet_metadata

ROWS_PER_FILE = 100
NUM_FILES = 20


def _new_file(root: Path, start: int) -> Any:
    table = pa.table({"id": pa.array(range(start, start + ROWS_PER_FILE), pa.int64())})
    name = f"part-{uuid.uuid4().hex}.snappy.parquet"
    pq.write_table(table, root / name)
    md = pq.read_metadata(root / name)
    stats = stats_from_parquet_metadata(md, from_arrow_schema(table.schema))
    st = (root / name).stat()
    return build_add_file(name, {}, st.st_size, int(st.st_mtime * 1000), stats)


def _create(root: Path, checkpoint_interval: int) -> None:
    """Version 0: protocol, metadata and NUM_FILES small files."""
    schema = from_arrow_schema(pa.schema([pa.field("id", pa.int64())]))
    txn = Transaction(str(root), None, "CREATE TABLE", {})
    txn.update_protocol(DEFAULT_NEW_TABLE_PROTOCOL)
    txn.update_metadata(
        Metadata(
            id=str(uuid.uuid4()),
            schema_string=schema.to_json_string(),
            configuration={"delta.enableDeletionVectors": "true", "delta.checkpointInterval": str(checkpoint_interval)},
            created_time=int(time.time() * 1000),
        )
    )
    txn.add_actions([_new_file(root, i * ROWS_PER_FILE) for i in range(NUM_FILES)])
    txn.commit()


def _commit(root: Path, k: int) -> None:
    """Delete row ``k // NUM_FILES`` of file ``k % NUM_FILES`` with a DV (union with its old DV)."""
    snapshot = load_snapshot(str(root))
    target = snapshot.files[k % len(snapshot.files)]
    rows = BitMap64([k // NUM_FILES])
    if target.deletion_vector is not None:
        rows |= load_deletion_vector(str(root), target.deletion_vector)
    (dv,) = encode_deletion_vectors(str(root), [rows], inline_max_bytes=64)
    txn = Transaction(str(root), snapshot, "DELETE", {"predicate": "[]"})
    txn.record_read([target], None)
    txn.add_actions(
        [
            target.to_remove(int(time.time() * 1000)),
            replace(target, deletion_vector=dv, stats=stats_for_dv_file(target.stats)),
        ]
    )
    txn.commit()


def _time_load(root: Path, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        load_snapshot(str(root))
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def run(commits: int, out: Path) -> dict[str, Any]:
    checkpoints = sorted({10, 50, 100, 250, 500, 750, commits} & set(range(1, commits + 1)))
    results: dict[str, list[dict[str, float]]] = {"with checkpoints (interval 10)": [], "no checkpoints": []}
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"with checkpoints (interval 10)": Path(tmp) / "ckpt", "no checkpoints": Path(tmp) / "plain"}
        for name, root in roots.items():
            root.mkdir()
            _create(root, 10 if "with" in name else 1_000_000_000)
        for k in range(1, commits + 1):
            for root in roots.values():
                _commit(root, k)
            if k in checkpoints:
                for name, root in roots.items():
                    results[name].append({"commits": k, "load_seconds": _time_load(root)})
                print(
                    f"[log-growth] {k} commits: "
                    + ", ".join(f"{n}: {results[n][-1]['load_seconds'] * 1000:.1f} ms" for n in results),
                    flush=True,
                )
    report = {
        "machine": machine_facts(None),
        "commits": commits,
        "results": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "log_growth.json").write_text(json.dumps(report, indent=2))
    _plot(results, out / "log_growth.png")
    return report


def _plot(results: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in results.items():
        ax.plot([p["commits"] for p in points], [p["load_seconds"] * 1000 for p in points], marker="o", label=name)
    ax.set_xlabel("commits in the table")
    ax.set_ylabel("snapshot load time (ms, median of 5)")
    ax.set_title("dvengine snapshot load time vs number of commits")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    run(args.commits, args.out)


if __name__ == "__main__":
    main()
