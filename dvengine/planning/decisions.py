"""The per-file choice between a deletion vector, a copy-on-write rewrite, and a plain remove.

A DV makes the write cheap (a few bytes instead of the whole file) but every later read pays
for filtering the file's dead rows, and a file that is mostly dead still costs its full scan.
So above a fraction of deleted *physical* rows a file is rewritten with only its live rows;
and a file with no live rows left is simply removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dvengine.errors import InvalidArgumentError

MODE_DV = "dv"
MODE_REWRITE = "rewrite"
MODE_AUTO = "auto"
MODES = (MODE_DV, MODE_REWRITE, MODE_AUTO)

DEFAULT_MODE = MODE_AUTO
# From the measured DV-vs-rewrite crossover (benchmarks/README.md): above ~15 % of a file's rows
# deleted, a rewrite repays its extra write cost by the first full Spark read of the table.
DEFAULT_REWRITE_THRESHOLD = 0.15
DEFAULT_INLINE_MAX_BYTES = 128
# A DV rebased after a lost commit race is written inside the race window (between reading the
# newest winner and the put-if-absent of our commit): a DV file there costs a create + fsync
# (~1.5 ms measured on this machine, more under load) that lets the next writer take the version
# again. Up to this size the rebased DV goes inline into the commit, which is fsynced anyway
# (spec_notes/isolation-and-concurrency.md, "Cost of a lost race").
DEFAULT_REBASE_INLINE_MAX_BYTES = 4096


class FileAction(Enum):
    DELETION_VECTOR = "dv"
    REWRITE = "rewrite"
    REMOVE = "remove"


# Lost commit races a DML command retries inside before MaxCommitAttemptsExceededError. Each retry
# only re-reads the winners' commits (and rebases DVs), so many are cheap; Delta's default is 10^7.
DEFAULT_DML_COMMIT_ATTEMPTS = 1000
# A DML may commit on this process's cached snapshot without listing the log when it was shown to
# be the latest less than this many seconds ago (spec_notes/storage.md, "Blind commits"): long
# enough for commands issued back to back or a stream's micro-batches, far below any log
# retention (the window is also capped at half of delta.logRetentionDuration).
DEFAULT_MAX_STALENESS_S = 5.0


@dataclass(frozen=True, slots=True)
class DmlOptions:
    """How a DML command writes its changes; defaults come from Spark conf (see README)."""

    mode: str = DEFAULT_MODE
    rewrite_threshold: float = DEFAULT_REWRITE_THRESHOLD
    inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES
    rebase_inline_max_bytes: int = DEFAULT_REBASE_INLINE_MAX_BYTES  # dvengine.dv.rebaseInlineMaxBytes
    dv_random_prefix_len: int = 0
    row_level_concurrency: bool = True  # spark.databricks.delta.rowLevelConcurrency.enabled
    max_commit_attempts: int = DEFAULT_DML_COMMIT_ATTEMPTS  # spark.databricks.delta.maxCommitAttempts
    app_transaction: tuple[str, int] | None = None  # spark.databricks.delta.write.txnAppId / txnVersion
    # dvengine.snapshot.maxStalenessSeconds: how old a cached snapshot may be for a blind commit (0: never)
    max_staleness_s: float = DEFAULT_MAX_STALENESS_S

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InvalidArgumentError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 <= self.rewrite_threshold <= 1.0:
            raise InvalidArgumentError(f"rewriteThreshold must be within [0, 1], got {self.rewrite_threshold}")
        if self.max_commit_attempts < 1:
            raise InvalidArgumentError(f"maxCommitAttempts must be >= 1, got {self.max_commit_attempts}")
        if self.inline_max_bytes < 0:
            raise InvalidArgumentError(f"inlineMaxBytes must be >= 0, got {self.inline_max_bytes}")
        if not self.max_staleness_s >= 0:
            raise InvalidArgumentError(f"maxStalenessSeconds must be >= 0, got {self.max_staleness_s}")
        if self.rebase_inline_max_bytes < 0:
            raise InvalidArgumentError(f"rebaseInlineMaxBytes must be >= 0, got {self.rebase_inline_max_bytes}")


def decide_file_action(
    physical_rows: int | None,
    previously_deleted: int,
    newly_deleted: int,
    options: DmlOptions,
    dv_supported: bool,
) -> FileAction:
    """What to do with a file in which ``newly_deleted`` more rows must disappear.

    ``physical_rows`` is the file's ``numRecords``; without it (no stats) a DV is still safe
    but the fraction is unknown, so only the explicit modes apply.
    """
    if physical_rows is not None and previously_deleted + newly_deleted >= physical_rows:
        return FileAction.REMOVE
    if options.mode == MODE_REWRITE or not dv_supported:
        return FileAction.REWRITE
    if options.mode == MODE_DV or physical_rows is None or physical_rows == 0:
        return FileAction.DELETION_VECTOR
    fraction = (previously_deleted + newly_deleted) / physical_rows
    return FileAction.REWRITE if fraction > options.rewrite_threshold else FileAction.DELETION_VECTOR
