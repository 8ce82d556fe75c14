"""delta-rs (the ``deltalake`` package) as a contender of the contention bench: its writer process.

The same operations as dvengine's writers (``contention_workload``), measured by the same lane
protocol (``contention_lane``: warm-up, start signal, DML window, CPU, bounded re-plans), done
with ``deltalake.DeltaTable.delete(predicate)`` and ``.update(updates=..., predicate=...)``.
delta-rs writes copy-on-write: every operation rewrites the whole hot file, and its conflict
checker works on files, so any winner that rewrote the file a writer read makes the writer's
commit fail with ``deltalake.exceptions.CommitFailedError``. That is the conflict an application
sees: counted as surfaced, and the operation re-planned on a refreshed table, as dvengine's
writers re-plan after a ``CommitConflictError``. delta-rs retries a commit itself (up to 15 times,
its default) only when the winners it checks do not conflict; what it raises then reaches us.

The table is the one dvengine's writers get (``contention.create_hot_table``, byte for byte):
delta-rs 1.6 writes to a table with the ``deletionVectors`` feature (it supports the writer
feature; it just never writes a vector), so both engines start from the same file and protocol.

    python -m dvengine.bench.contention --engines dvengine delta-rs ...   # runs these writers

This module only runs as a writer process (``--worker``, started by ``contention.run_contention``).
"""

from __future__ import annotations

import sys
from typing import Any

from dvengine.bench.contention_lane import LaneArgs, is_worker_call, run_lane, run_until_committed, worker_main

WRITER_MODULE = "dvengine.bench.contention_delta_rs"


def predicate(x: int) -> str:
    """The predicate of the bench's operation on row ``x``, as delta-rs is given it; delta-rs
    records it verbatim as the commit's ``operationParameters.predicate`` (what verification reads)."""
    return f"id = {x}"


def single_row_dml(table: Any, x: int, delete: bool) -> dict[str, Any]:
    """The bench's operation on row ``x`` through delta-rs: DELETE it, or UPDATE its ``v`` to ``-x``;
    delta-rs's metrics."""
    if delete:
        result: dict[str, Any] = table.delete(predicate(x))
        return result
    result = table.update(updates={"v": str(-x)}, predicate=predicate(x))
    return result


def attempt_once(table: Any, x: int, delete: bool) -> dict[str, Any]:
    """One attempt from a fresh snapshot (the table handle brought up to the latest version first,
    as dvengine loads the latest snapshot for every command). ``reconciled``: other writers'
    commits delta-rs checked and committed past inside the call (the version it committed minus
    the one it read, minus one): its Python API returns no count of commit attempts, so this is
    the races it resolved without raising. Nothing is ever rebased: copy-on-write."""
    table.update_incremental()
    read_version = int(table.version())
    single_row_dml(table, x, delete)
    version = int(table.version())
    return {"version": version, "reconciled": version - read_version - 1, "rebased": 0}


def run_op(table: Any, x: int, delete: bool) -> dict[str, Any]:
    """One operation, re-planned on a refreshed table after every ``CommitFailedError`` (a commit
    conflict delta-rs did not resolve); its record."""
    from deltalake.exceptions import CommitFailedError

    return run_until_committed(x, lambda: attempt_once(table, x, delete), CommitFailedError)


def run_writer(lane: LaneArgs, profiler: Any = None) -> None:
    """One delta-rs writer process, warmed as dvengine's are: the table opened, then a DELETE and
    an UPDATE that match no row (ids are >= 0; delta-rs commits nothing for them) so DataFusion's
    planning and scan paths are loaded before the start signal. dvengine's writers also read the
    ids first, to fill the column cache their DML reuses; delta-rs keeps no data between commands
    (each scans the file again), and its pyarrow reader refuses a table with the deletionVectors
    reader feature, so there is nothing to warm that way."""
    from deltalake import DeltaTable

    table = DeltaTable(lane.root)
    table.delete("id = -1")
    table.update(updates={"v": "0"}, predicate="id = -1")
    run_lane(lane, lambda x, delete: run_op(table, x, delete), profiler)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not is_worker_call(args):
        print("a writer process of python -m dvengine.bench.contention --engines ... delta-rs; not run by hand",
              file=sys.stderr)
        return 2
    return worker_main(args, run_writer)


if __name__ == "__main__":
    sys.exit(main())
