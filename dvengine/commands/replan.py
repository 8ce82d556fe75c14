"""Blind commits: a DML plans on this process's cached snapshot without listing the log, and its
outcome stands only once something proves that snapshot was still the latest.

On an object store the listing is a sequential round trip of every command (~5 ms on the local
S3 server, as much as the commit PUT). ``log.blind_snapshot`` hands out the cached snapshot
when it was shown to be the latest less than ``dvengine.snapshot.maxStalenessSeconds`` ago (and
within half the table's log retention). The rule that keeps the result equal to a listing
command's (spec_notes/storage.md, "Blind commits"):

- the commit's put-if-absent of ``version + 1`` succeeds: no commit landed between the proof and
  the put, so a listing at the command's start would have shown the same snapshot: done;
- the version is taken (``StaleSnapshotError``, nothing committed, written files removed): the
  winner may have finished before the command started, so it is not rebased onto (a rebase
  would miss e.g. a blind append of rows the condition matches); the command runs again on a
  listed snapshot, with today's conflict handling;
- the command commits nothing (no row matched, a txnAppId repeat) or raises before its commit
  (an unknown column, a constraint, a property that forbids it): nothing proves the snapshot
  current, so the log is listed (one request, what the command would have paid anyway); the
  result stands if the version is unchanged, else the command runs again on the listed snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dvengine.commit.transaction import StaleSnapshotError, Transaction
from dvengine.log import Snapshot, blind_snapshot
from dvengine.planning.decisions import DmlOptions


@dataclass
class PlanAttempt:
    """One run of a command: whether its snapshot is blind, and the transactions it opened."""

    blind: bool
    transactions: list[Transaction] = field(default_factory=list)

    def track(self, txn: Transaction) -> None:
        txn.blind = self.blind
        self.transactions.append(txn)

    @property
    def committed(self) -> bool:
        return any(t.committed_version is not None for t in self.transactions)


Metrics = dict[str, Any]
Run = Callable[[Snapshot, PlanAttempt], Metrics]
Load = Callable[[str], Snapshot]


def _still_latest(load: Load, table_root: str, snapshot: Snapshot) -> Snapshot | None:
    """None when ``snapshot`` is still the table's latest version, else the listed snapshot."""
    fresh = load(table_root)
    if fresh.version == snapshot.version and fresh.metadata.id == snapshot.metadata.id:
        return None
    return fresh


def run_replanning(table_root: str, options: DmlOptions, run: Run, load: Load) -> Metrics:
    """``run`` on a blind snapshot when one is fresh enough, re-run on one ``load`` lists when the
    blind outcome is not proven current (see the module docstring); else on a listed snapshot."""
    snapshot = blind_snapshot(table_root, options.max_staleness_s)
    if snapshot is None:
        return run(load(table_root), PlanAttempt(False))
    attempt = PlanAttempt(True)
    try:
        metrics = run(snapshot, attempt)
    except StaleSnapshotError:
        return run(load(table_root), PlanAttempt(False))
    except Exception:
        if attempt.committed:
            raise  # failed after its commit landed: the commit stands, never run twice
        fresh = _still_latest(load, table_root, snapshot)
        if fresh is None:
            raise  # the snapshot was current: today's command raises the same
        return run(fresh, PlanAttempt(False))
    if attempt.committed:
        return metrics
    fresh = _still_latest(load, table_root, snapshot)
    return metrics if fresh is None else run(fresh, PlanAttempt(False))
