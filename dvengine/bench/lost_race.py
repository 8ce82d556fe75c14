"""Benchmark: what a lost race costs one writer, in CPU, per winner it must catch up with.

Under contention every commit of a writer of a hot file finds a few winners in the log since
its read version, and reads, checks and rebases onto each (commit/transaction.py, "catch-up").
That work is what grows with the number of writers (spec_notes/isolation-and-concurrency.md,
"Against the same-total baseline, phase by phase"), but the contention bench measures it only
through ops/s of several processes on a shared 2-core machine, where one round can differ from
the next by 2x. This bench isolates it, in one process's thread CPU time:

1. a table: one hot file of ``--rows`` rows, ``--deleted`` of them already deleted (a
   hot file after a day of deletes carries a DV file, not an inline DV);
2. per sample, the loser runs a real single-row DELETE or UPDATE (the public
   API, in a thread) and is held at the start of ``Transaction.commit``;
3. another process commits ``k`` single-row DELETE/UPDATEs on other rows of the file (the
   winners, as other writer processes would, so none of their bytes or DVs is in this process's
   caches), and ``max(k) - k`` more on a decoy table, so that for every ``k`` the same work runs
   on the machine between the hold and the release (it cools this process's CPU caches alike);
4. the loser's commit is released and its thread CPU measured: catch-up (read, parse, conflict
   rules, row-level rebase), serialize, stage, link.

Reported per ``k``: median, min and max CPU of the commit; the slope per winner (median at the
largest ``k`` minus the median at the smallest, over their difference); and, with ``k`` = 0 and 1
measured, the first winner apart from each further one (a lost race has a fixed price: the
rebase). Every sample's rows are checked afterwards against a model (the loser's row and every
winner's row changed exactly once).

Run: ``python -m dvengine.bench.lost_race [--rows 100000] [--deleted 0 3000] [--winners 0 1 3 7]
[--samples 15] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dvengine.api.table import DeltaTable
from dvengine.bench.contention import create_hot_table, single_row_dml
from dvengine.commands.options import CONF_MAX_STALENESS, env_key
from dvengine.commit.transaction import Transaction

# Rows the winners of sample s change: one block per sample, away from the loser's rows, so no
# sample's DVs equal another's (an inline DV decoded in an earlier sample would be a cache hit).
_WINNER_BLOCK = 16


def _loser_row(rows: int, sample: int) -> int:
    return rows // 2 + sample


def _winner_rows(rows: int, sample: int, winners: int) -> list[int]:
    start = rows // 4 + sample * _WINNER_BLOCK
    return [start + i for i in range(winners)]


def _change(table: DeltaTable, row: int, delete: bool) -> int:
    """One single-row DML, as the contention bench's writers run it; the committed version."""
    return int(single_row_dml(table, row, delete)["version"])


def make_template(root: str, rows: int, deleted: int) -> None:
    """The contention bench's hot table (one file of ``rows`` rows, id, v = id), checkpoints off
    (their CPU is not the race's), and ``deleted`` rows spread over the file's last quarter
    already deleted (0: no DV yet); the samples change rows of the second and third quarters."""
    create_hot_table(root, rows, configuration={"delta.checkpointInterval": "1000000"})
    if deleted:
        first = rows - rows // 4
        step = max((rows - first) // deleted, 1)
        DeltaTable.forPath(None, root).deleteMetrics(f"id >= {first} AND id % {step} = 1", engine="local")


@dataclass
class _Held:
    """A loser held at the start of its commit, then released and measured."""

    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    read_version: int | None = None
    version: int | None = None  # the loser's committed version
    rebased: int = 0
    error: BaseException | None = None


@contextlib.contextmanager
def _held_commits(held: Mapping[str, _Held]) -> Iterator[None]:
    """While active, a commit on a thread named in ``held`` waits for its release and is timed."""
    original = Transaction.commit

    def commit(self: Transaction, operation_metrics: Mapping[str, Any] | None = None) -> int:
        slot = held.get(threading.current_thread().name)
        if slot is None:
            return original(self, operation_metrics)
        slot.read_version = self.read_version
        slot.reached.set()
        slot.release.wait()
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return original(self, operation_metrics)
        finally:
            slot.cpu_s, slot.wall_s = time.thread_time() - cpu, time.perf_counter() - wall
            slot.rebased = self.rebased_files

    Transaction.commit = commit  # type: ignore[method-assign]
    try:
        yield
    finally:
        Transaction.commit = original  # type: ignore[method-assign]


def _run_winners(root: str, rows: list[int], decoy: str, decoy_rows: list[int]) -> None:
    """Commit the winners from another process (its caches are not ours), and as many more
    commits on the decoy table as make every sample's other process do the same work: while it
    runs, it evicts this process's caches alike for every ``k`` (with no process at k = 0, the
    loser's commit would run warm and make the first winner look dearer than it is)."""
    if not rows and not decoy_rows:
        return
    cmd = [sys.executable, "-m", "dvengine.bench.lost_race", "--winners-process", root, *map(str, rows),
           "--decoy", decoy, *map(str, decoy_rows)]
    subprocess.run(cmd, check=True, env={**os.environ, env_key(CONF_MAX_STALENESS): "0"})


def one_sample(root: str, rows: int, sample: int, winners: int, decoy: str, other_ops: int) -> dict[str, Any]:
    """Hold a loser at its commit, let ``winners`` commits land (and ``other_ops - winners`` on the
    decoy table), release it; check the rows."""
    loser = _loser_row(rows, sample)
    delete = sample % 2 == 0
    slot = _Held()

    def run() -> None:
        try:
            slot.version = _change(DeltaTable.forPath(None, root), loser, delete)
        except BaseException as exc:  # handed to the main thread, raised there
            slot.error = exc
            slot.reached.set()

    name = f"dvengine-lost-race-{sample}"
    with _held_commits({name: slot}):
        thread = threading.Thread(target=run, name=name)
        thread.start()
        try:
            slot.reached.wait()
            mine = _winner_rows(rows, sample, other_ops)
            _run_winners(root, mine[:winners], decoy, mine[winners:])
        finally:  # a failed winners' process must not leave the loser held forever
            slot.release.set()
            thread.join()
    if slot.error is not None:
        raise slot.error
    assert slot.version is not None
    caught_up = slot.version - (slot.read_version or 0) - 1
    if caught_up != winners:
        raise AssertionError(f"sample {sample} of {root}: the loser caught up with {caught_up} winners, expected {winners}")
    _check_rows(root, rows, sample, winners, loser, delete)
    return {"winners": winners, "cpu_s": slot.cpu_s, "wall_s": slot.wall_s, "rebased": slot.rebased}


def _check_rows(root: str, rows: int, sample: int, winners: int, loser: int, delete: bool) -> None:
    """The loser's row and each winner's row changed once, as the model says."""
    got = DeltaTable.forPath(None, root).toArrow().to_pydict()
    values = dict(zip(got["id"], got["v"], strict=True))
    expected = {loser: None if delete else -loser}
    for i, row in enumerate(_winner_rows(rows, sample, winners)):
        expected[row] = None if i % 2 == 0 else -row
    for row, value in expected.items():
        if values.get(row) != value:
            raise AssertionError(f"sample {root}: row {row} is {values.get(row)!r}, the model says {value!r}")


def measure(rows: int, deleted: int, winner_counts: list[int], samples: int, work: str) -> dict[str, Any]:
    root, decoy = os.path.join(work, f"table-{deleted}"), os.path.join(work, f"decoy-{deleted}")
    make_template(root, rows, deleted)
    make_template(decoy, rows, deleted)
    other_ops = max(winner_counts)
    by_k: dict[int, list[dict[str, Any]]] = {k: [] for k in winner_counts}
    one_sample(root, rows, 0, 1, decoy, other_ops)  # warm-up: this process's first commit to the table, not counted
    for i in range(samples):  # interleaved, so a slow minute of the machine hits every k
        for j, k in enumerate(winner_counts):
            sample = 1 + i * len(winner_counts) + j
            by_k[k].append(one_sample(root, rows, sample, k, decoy, other_ops))
    summary: dict[str, Any] = {}
    for k, runs in by_k.items():
        cpu = [r["cpu_s"] for r in runs]
        wall = [r["wall_s"] for r in runs]
        summary[str(k)] = {
            "cpu_median_s": statistics.median(cpu), "cpu_min_s": min(cpu), "cpu_max_s": max(cpu),
            "wall_median_s": statistics.median(wall), "rebased_files_median": statistics.median(r["rebased"] for r in runs),
        }
    low, high = min(winner_counts), max(winner_counts)
    slope = None
    if high > low:
        slope = (summary[str(high)]["cpu_median_s"] - summary[str(low)]["cpu_median_s"]) / (high - low)
    first = further = None
    if 0 in winner_counts and 1 in winner_counts:
        first = summary["1"]["cpu_median_s"] - summary["0"]["cpu_median_s"]
        if high > 1:
            further = (summary[str(high)]["cpu_median_s"] - summary["1"]["cpu_median_s"]) / (high - 1)
    shutil.rmtree(root)
    shutil.rmtree(decoy)
    return {"deleted": deleted, "by_winners": summary, "cpu_per_winner_s": slope,
            "cpu_first_winner_s": first, "cpu_per_further_winner_s": further}


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Lost race: CPU of one commit per winner caught up with",
        "",
        f"rows {result['rows']}, {result['samples']} samples per cell, load average before {result['load_before']}, "
        f"after {result['load_after']}, {result['cpus']} CPUs",
        "",
        "| rows deleted before | winners | commit CPU ms median (min-max) | commit wall ms median | rebased files |",
        "|---|---|---|---|---|",
    ]
    for table in result["tables"]:
        for k, cell in table["by_winners"].items():
            lines.append(
                f"| {table['deleted']} | {k} | {cell['cpu_median_s'] * 1e3:.3f} ({cell['cpu_min_s'] * 1e3:.3f}-"
                f"{cell['cpu_max_s'] * 1e3:.3f}) | {cell['wall_median_s'] * 1e3:.3f} | {cell['rebased_files_median']:g} |"
            )
    lines.append("")
    for table in result["tables"]:
        parts = []
        if table["cpu_per_winner_s"] is not None:
            parts.append(f"{table['cpu_per_winner_s'] * 1e6:.0f} us CPU per winner")
        if table["cpu_first_winner_s"] is not None:
            parts.append(f"the first {table['cpu_first_winner_s'] * 1e6:.0f} us")
        if table["cpu_per_further_winner_s"] is not None:
            parts.append(f"each further one {table['cpu_per_further_winner_s'] * 1e6:.0f} us")
        if parts:
            lines.append(f"- {table['deleted']} rows deleted before: " + ", ".join(parts))
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _environment(key: str, value: str) -> Iterator[None]:
    """``key=value`` in this process's environment while the block runs, then as it was (the bench
    also runs inside test processes, whose other tests must not inherit it)."""
    before = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    raw = sys.argv[1:] if argv is None else argv
    if raw and raw[0] == "--winners-process":
        split = raw.index("--decoy")
        table, decoy = DeltaTable.forPath(None, raw[1]), DeltaTable.forPath(None, raw[split + 1])
        for i, row in enumerate(int(x) for x in raw[2:split]):
            _change(table, row, i % 2 == 0)
        for i, row in enumerate(int(x) for x in raw[split + 2 :]):
            _change(decoy, row, i % 2 == 0)
        return None
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--deleted", type=int, nargs="+", default=[0, 3000])
    parser.add_argument("--winners", type=int, nargs="+", default=[0, 1, 3, 7])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(raw)
    samples_total = 1 + args.samples * len(set(args.winners))
    if not all(0 <= k <= _WINNER_BLOCK for k in args.winners) or args.samples < 1 or args.rows < 4 * _WINNER_BLOCK * samples_total:
        parser.error(f"--winners must be 0..{_WINNER_BLOCK}, --samples >= 1, and --rows large enough for the samples' rows")
    load_before = os.getloadavg()
    # The loser lists: it plans on the table's latest version, never on a cached one.
    with _environment(env_key(CONF_MAX_STALENESS), "0"), tempfile.TemporaryDirectory(prefix="dvengine-lost-race-") as work:
        tables = [measure(args.rows, deleted, sorted(set(args.winners)), args.samples, work) for deleted in args.deleted]
    result = {"rows": args.rows, "samples": args.samples, "load_before": [round(x, 2) for x in load_before],
              "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(), "tables": tables}
    text = _markdown(result)
    print(text)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "lost_race.json").write_text(json.dumps(result, indent=2) + "\n")
        (Path(args.out) / "lost_race.md").write_text(text)
    return result


if __name__ == "__main__":
    main()
