"""Concurrent writers: several OS processes DELETE and UPDATE one table at the same time.

Each child owns the ids with ``id % N == child`` and runs a fixed list of operations, retrying
an operation after a typed conflict. It reports, per operation, the version it committed (or
the conflict it finally gave up with) and every conflict it saw. The parent then checks:

- committed versions are unique and gap-free (put-if-absent never lets two commits share one);
- every committed operation appears in the log exactly once (by the ``opId`` parameter) and no
  other operation does: nothing lost, nothing applied twice;
- the rows, through all four readers, equal a model that applies the committed operations in
  version order;
- every failure was a :class:`CommitConflictError` subclass.

Children commit through the Spark-free DV path (see ``spec_notes/isolation-and-concurrency.md``
for why): the conflict logic under test lives entirely in the Transaction, and a child without
a JVM starts in about a second, so the processes genuinely overlap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from test_concurrency_support import core_delete, core_update, create_table, retire_rows_core, rows_of

from dvengine.commit.commit_info import delta_json
from dvengine.errors import CommitConflictError, ConcurrentDeleteReadError
from dvengine.log import latest_version, load_snapshot, read_commit_actions
from dvengine.protocol.actions import CommitInfo

REPO = Path(__file__).resolve().parents[1]
CHILDREN = 3
OPS_PER_CHILD = 8
MAX_ATTEMPTS = 25


def _ops(child: int) -> list[dict[str, Any]]:
    owned = [i for i in range(60) if i % CHILDREN == child]
    ops = []
    for n in range(OPS_PER_CHILD):
        target = owned[n]
        kind = "update" if n % 2 else "delete"
        ops.append({"op": f"c{child}-{n}", "kind": kind, "id": target})
    return ops


def _child(root: str, child: int, go_file: str, out_file: str) -> None:
    deadline = time.time() + 60
    while not os.path.exists(go_file) and time.time() < deadline:
        time.sleep(0.001)
    results = []
    for op in _ops(child):
        conflicts: list[str] = []
        version: int | None = None
        final_error: str | None = None
        for _ in range(MAX_ATTEMPTS):
            try:
                if op["kind"] == "delete":
                    version, deleted = core_delete(root, f"id = {op['id']}", op_id=op["op"])
                    assert deleted == 1 and version is not None
                else:
                    new = pa.table({"id": [op["id"]], "v": [-op["id"]]})
                    version = core_update(root, f"id = {op['id']}", new, op_id=op["op"])
                break
            except CommitConflictError as exc:
                conflicts.append(type(exc).__name__)
                final_error = type(exc).__name__
            except Exception as exc:
                final_error = f"UNTYPED {type(exc).__name__}: {exc}"
                break
        else:
            version = None
        if version is not None:
            final_error = None
        results.append({**op, "version": version, "conflicts": conflicts, "error": final_error})
    Path(out_file).write_text(json.dumps(results))


def test_processes_deleting_and_updating_concurrently(spark: Any, tmp_path: Path) -> None:
    from interop import assert_all_readers

    root = tmp_path / "t"
    create_table(root, [pa.table({"id": list(range(k, 60, 2)), "v": list(range(k, 60, 2))}) for k in range(2)])
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]))
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, str(root), str(c), str(go), str(tmp_path / f"out{c}.json")],
            cwd=REPO, env=env, stderr=subprocess.PIPE,
        )
        for c in range(CHILDREN)
    ]
    time.sleep(1.5)  # let every child finish importing, so they really start together
    go.write_text("go")
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()[-3000:]
    results = [r for c in range(CHILDREN) for r in json.loads((tmp_path / f"out{c}.json").read_text())]

    untyped = [r for r in results if r["error"] and r["error"].startswith("UNTYPED")]
    assert not untyped, untyped
    committed = {r["version"]: r for r in results if r["version"] is not None}
    assert len(committed) == sum(r["version"] is not None for r in results), "two operations share a version"
    assert sorted(committed) == list(range(1, latest_version(str(root)) + 1))

    # The log holds exactly the committed operations, each once, at the version reported.
    in_log = {}
    for version in range(1, latest_version(str(root)) + 1):
        info = next(a for a in read_commit_actions(str(root), version) if isinstance(a, CommitInfo))
        in_log[version] = info.values["operationParameters"]["opId"]
    assert in_log == {v: r["op"] for v, r in committed.items()}

    model = {i: i for i in range(60)}
    for version in sorted(committed):
        r = committed[version]
        if r["kind"] == "delete":
            del model[r["id"]]
        else:
            model[r["id"]] = -r["id"]
    assert_all_readers(spark, root, ["id", "v"], sorted(model.items()))
    # Re-running the committed operations' predicates finds nothing left to delete.
    for r in committed.values():
        if r["kind"] == "delete":
            assert core_delete(root, f"id = {r['id']}") == (None, 0)

    conflicts = sum(len(r["conflicts"]) for r in results)
    print(f"{len(committed)} commits by {CHILDREN} processes, {conflicts} conflicts retried, "
          f"{sum(r['version'] is None for r in results)} operations gave up")
    assert all(set(r["conflicts"]) <= {"ConcurrentDeleteReadError", "ConcurrentAppendError",
                                       "ConcurrentDeleteDeleteError"} for r in results)


def test_same_file_conflicts_other_file_retries(tmp_path: Path) -> None:
    """Deterministic core of the above: two DELETEs from one snapshot."""
    from dvengine.commit.transaction import Transaction
    from dvengine.expressions import parse_predicate
    from dvengine.planning.candidates import might_match_function

    root = tmp_path / "t"
    create_table(root, [pa.table({"id": [0, 1, 2], "v": [0, 1, 2]}), pa.table({"id": [10, 11], "v": [10, 11]})])
    snapshot = load_snapshot(str(root))

    def prepared(cond: str) -> Transaction:
        actions, read, _ = retire_rows_core(snapshot, cond, int(time.time() * 1000))
        txn = Transaction(str(root), snapshot, "DELETE", {"predicate": delta_json([cond])})
        txn.record_read(read, might_match_function(snapshot, parse_predicate(cond, snapshot.schema)))
        txn.add_actions(actions)
        return txn

    first, same_file, other_file = prepared("id = 0"), prepared("id = 1"), prepared("id = 10")
    assert first.commit() == 1
    with pytest.raises(ConcurrentDeleteReadError):
        same_file.commit()
    assert other_file.commit() == 2  # retried past version 1: it touched a different file
    assert rows_of(root) == [(1, 1), (2, 2), (11, 11)]
    # The loser simply re-plans on the new snapshot and succeeds.
    assert core_delete(root, "id = 1")[0] == 3
    assert rows_of(root) == [(2, 2), (11, 11)]


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4])
