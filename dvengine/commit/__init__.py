"""Commits: optimistic transactions, conflict rules and pre-commit validation."""

from dvengine.commit.conflicts import TransactionFootprint, WinningCommit, check_conflicts
from dvengine.commit.snapshot_view import SnapshotView
from dvengine.commit.transaction import Transaction, commit_file_path, read_commit

__all__ = [
    "SnapshotView",
    "Transaction",
    "TransactionFootprint",
    "WinningCommit",
    "check_conflicts",
    "commit_file_path",
    "read_commit",
]
