"""Per-op CPU and wall of each phase from the writers' trace files (see README.md here).

    python phases.py raw/A2
"""

from __future__ import annotations

import collections
import glob
import json
import sys

ROWS = [
    ("snapshot (cached or listed refresh)", ["blind_snapshot|out", "load_snapshot|out"]),
    ("open_dml incl. planning", ["open_dml|out"]),
    ("scan + DV (retire_rows)", ["retire_rows|out"]),
    ("UPDATE's new file (write_tables)", ["write_tables|out"]),
    ("catch-up before the turn", ["txn._catch_up|out"]),
    ("stage before the turn", ["fs.stage_commit|out", "txn._serialize|out"]),
    ("probe + wait for the turn", ["turn_taken|out", "turn.wait|out"]),
    ("turn held", ["turn.hold|in"]),
    ("  in-turn catch-up", ["txn._catch_up|in"]),
    ("  in-turn stage", ["fs.stage_commit|in", "txn._serialize|in"]),
    ("  link", ["fs.link_staged|in"]),
    ("_delta_log fsync", ["fs.sync_dir|out"]),
    ("post-commit checkpoint", ["txn._run_post_commit_hooks|out"]),
    ("  note_own_commit (snapshot cache)", ["note_own_commit|in"]),
    ("  snapshot builds (cache)", ["build_snapshot|out", "build_snapshot|in"]),
    ("  gc (all generations)", ["gc0|out", "gc1|out", "gc2|out", "gc0|in", "gc1|in", "gc2|in"]),
    ("whole DML", ["DELETE|out", "UPDATE|out"]),
]


def load(folder: str, writers: int, ops: int = 50) -> dict[str, tuple[float, float, float]]:
    agg: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for path in glob.glob(f"{folder}/writer-*-{writers}.trace.json"):  # not the serial baseline's
        with open(path) as fh:
            for key, (calls, cpu, wall) in json.load(fh).items():
                entry = agg[key]
                entry[0] += calls
                entry[1] += cpu
                entry[2] += wall
    n = writers * ops
    return {k: (v[0] / n, 1000 * v[1] / n, 1000 * v[2] / n) for k, v in agg.items()}


def main(folder: str) -> None:
    data = {w: load(folder, w) for w in (1, 4, 8)}
    print("| phase | CPU W=1 | W=4 | W=8 | wall W=1 | W=4 | W=8 |")
    for name, keys in ROWS:
        cpu = [sum(data[w].get(k, (0, 0, 0))[1] for k in keys) for w in (1, 4, 8)]
        wall = [sum(data[w].get(k, (0, 0, 0))[2] for k in keys) for w in (1, 4, 8)]
        print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in cpu + wall) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
