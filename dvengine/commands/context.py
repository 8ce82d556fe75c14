"""The DML prologue every command shares: snapshot, gates, bound condition, candidates, transaction.

Everything here runs before a byte is written, so a refused command leaves no trace: the
table's own rules (writer features, CHECK constraints the Arrow evaluator can check, ``delta.appendOnly``), the DV mode, the
condition bound to the schema, then partition pruning and stats skipping, and the transaction's
read set (candidate files and the predicate they were chosen by, for conflict detection).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dvengine.commands.app_txn import AppTransaction
from dvengine.commands.concurrency import exact_might_match, row_level_enabled
from dvengine.commands.replan import PlanAttempt
from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.commit.commit_info import ParameterValue, predicate_parameter
from dvengine.commit.conf import ConfLookup
from dvengine.commit.rebase import RowLevelResolution
from dvengine.commit.transaction import Transaction
from dvengine.errors import OperationNotAllowedError, UnsupportedFeatureError
from dvengine.expressions import BoundPredicate
from dvengine.log import Snapshot
from dvengine.planning.candidates import CandidatePlan, might_match_function, plan_candidates
from dvengine.planning.decisions import MODE_DV, DmlOptions
from dvengine.protocol.features import check_writable, is_append_only, supports_deletion_vectors
from dvengine.writing.constraints import check_dml_constraints


def check_dml_allowed(snapshot: Snapshot, operation: str) -> None:
    """Refuse row-level changes the table forbids or that dvengine cannot enforce correctly."""
    check_writable(snapshot.protocol, snapshot.metadata)
    check_dml_constraints(snapshot.configuration, snapshot.schema, writes_new_rows=operation in ("UPDATE", "MERGE"))
    if is_append_only(snapshot.configuration):
        raise OperationNotAllowedError(
            f"{operation} is not allowed: table {snapshot.table_root} is append-only (delta.appendOnly=true)"
        )


def check_dv_mode_allowed(snapshot: Snapshot, options: DmlOptions) -> bool:
    """Whether DVs may be written; an explicit ``mode="dv"`` on a table without them is an error."""
    supported = supports_deletion_vectors(snapshot.protocol, snapshot.metadata)
    if options.mode == MODE_DV and not supported:
        raise UnsupportedFeatureError(
            "mode='dv' needs deletion vectors, but this table does not enable them: it needs the deletionVectors "
            "reader/writer feature and the property delta.enableDeletionVectors=true (or use mode='rewrite'/'auto')"
        )
    return supported


@dataclass
class DmlContext:
    """What a predicate-driven DML command resolved before touching data."""

    operation: str
    options: DmlOptions
    snapshot: Snapshot
    dv_supported: bool
    predicate: BoundPredicate | None
    plan: CandidatePlan
    transaction: Transaction
    now_ms: int
    written: WrittenFiles
    started: float = field(default_factory=time.monotonic)
    engine_state: dict[str, Any] = field(default_factory=dict)  # an executor's per-command cache
    app_transaction: AppTransaction | None = None  # idempotent DML: the txn action it commits
    repeat: bool = False  # the table already holds app_transaction: the command must do nothing

    @property
    def table_root(self) -> str:
        return self.snapshot.table_root

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def finish(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Commit what the command added; ``metrics`` get ``executionTimeMs`` and ``version``.

        With nothing to commit (nothing matched, no schema change) the version is None and anything
        written is removed; a commit that fails removes what was written (``commit_or_clean_up``).
        """
        metrics["executionTimeMs"] = self.elapsed_ms()
        if not self.transaction.actions and self.transaction.new_metadata is None:
            metrics.update(version=None, txnSkipped=False)
            self.written.remove_all()
            return metrics
        if self.app_transaction is not None:
            self.transaction.set_app_transaction(self.app_transaction.app_id, self.app_transaction.version)
        metrics["version"] = commit_or_clean_up(self.transaction, metrics, self.written)
        if self.transaction.committed_metrics is not None:  # a rebase changed the file / DV counts
            metrics.update(self.transaction.committed_metrics)
        # dvengine's own counts, after the commit (not in commitInfo): lost races retried inside
        # the command, and files whose DV was rebased onto a concurrent writer's (row-level).
        metrics["numCommitAttempts"] = self.transaction.attempts
        metrics["numRebasedFiles"] = self.transaction.rebased_files
        metrics["txnSkipped"] = False
        return metrics

    def skip_repeat(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The result of a command whose (txnAppId, txnVersion) the table already holds: nothing
        was read or written, ``version`` is None and ``txnSkipped`` True."""
        metrics.update(executionTimeMs=self.elapsed_ms(), version=None, txnSkipped=True)
        return metrics

    @contextlib.contextmanager
    def cleaning_up_on_failure(self) -> Iterator[None]:
        """Remove every file the command wrote if it raises before its commit exists."""
        try:
            yield
        except BaseException:
            if self.transaction.committed_version is None:
                self.written.remove_all()
            raise


def open_dml(
    snapshot: Snapshot,
    operation: str,
    options: DmlOptions,
    predicate: BoundPredicate | None,
    parameters: Mapping[str, ParameterValue] | None = None,
    row_level: bool = True,
    attempt: PlanAttempt | None = None,
    conf: ConfLookup | None = None,
) -> DmlContext:
    """Gate, plan candidates, and open the transaction with its read set.

    ``row_level``: the command's outcome depends only on the rows it retires, so concurrent DV
    updates of its files may be resolved row by row (commands/concurrency.py) when the table and
    session allow it. ``attempt``: the run of a command that may plan on a blind snapshot
    (commands/replan.py); its transaction is tracked there. ``conf``: the session's conf, read by
    the commit when the command changes the table's metadata (MERGE schema evolution, a write's
    new schema, identity high-water marks); None: dvengine's configuration.
    """
    check_dml_allowed(snapshot, operation)
    dv_supported = check_dv_mode_allowed(snapshot, options)
    plan = plan_candidates(snapshot, predicate)
    params = dict(parameters) if parameters is not None else {"predicate": predicate_parameter(predicate)}
    txn = Transaction(snapshot.table_root, snapshot, operation, params, max_attempts=options.max_commit_attempts, conf=conf)
    if attempt is not None:
        attempt.track(txn)
    written = WrittenFiles(snapshot.table_root)
    if row_level and row_level_enabled(snapshot, options.row_level_concurrency, dv_supported):
        txn.record_read(plan.candidates, exact_might_match(snapshot, predicate))
        txn.enable_row_level(
            RowLevelResolution(
                max(options.inline_max_bytes, options.rebase_inline_max_bytes),
                options.dv_random_prefix_len,
                lambda p: written.add_paths([p]),
            )
        )
    else:
        txn.record_read(plan.candidates, might_match_function(snapshot, predicate))
    app = None if options.app_transaction is None else AppTransaction(*options.app_transaction)
    return DmlContext(
        app_transaction=app,
        repeat=app is not None and app.is_repeat(snapshot.app_transactions),
        operation=operation,
        options=options,
        snapshot=snapshot,
        dv_supported=dv_supported,
        predicate=predicate,
        plan=plan,
        transaction=txn,
        now_ms=int(time.time() * 1000),
        written=written,
    )
