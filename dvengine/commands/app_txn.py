"""Idempotent writes: Delta's ``txn`` (SetTransaction) action, keyed by (appId, version).

A writer that may repeat a write (a Structured Streaming ``foreachBatch`` retried after a crash)
names it with an application id and a monotonically increasing version. The commit carries a
``txn`` action ``{appId, version, lastUpdated}``; a later write whose version is <= the one the
table recorded for that appId is a repeat and commits nothing (PROTOCOL.md "Transaction
Identifiers"; Delta's DataFrameWriter options ``txnAppId`` / ``txnVersion`` and, for DML and
MERGE, the session confs ``spark.databricks.delta.write.txnAppId`` / ``.txnVersion``).

Two writers committing the same appId concurrently conflict (``ConcurrentTransactionError``,
``dvengine.commit.conflicts``): the retry then sees the winner's watermark and skips.
Watermarks older than ``delta.setTransactionRetentionDuration`` expire (``dvengine.log``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dvengine.errors import InvalidArgumentError
from dvengine.protocol.actions import Txn

CONF_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
CONF_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@dataclass(frozen=True, slots=True)
class AppTransaction:
    """One idempotent write's identity."""

    app_id: str
    version: int

    def is_repeat(self, recorded: Mapping[str, Txn]) -> bool:
        """Whether the table already holds this write: a watermark for the appId at >= our version."""
        seen = recorded.get(self.app_id)
        return seen is not None and self.version <= seen.version


def parse_app_transaction(app_id: object, version: object, names: tuple[str, str] = ("txnAppId", "txnVersion")) -> AppTransaction | None:
    """Both or neither of (appId, version); the version an integer >= 0 (a string is parsed)."""
    if app_id is None and version is None:
        return None
    if app_id is None or version is None:
        given, missing = (names[0], names[1]) if version is None else (names[1], names[0])
        raise InvalidArgumentError(f"{given} was given without {missing}; an idempotent write needs both")
    if not isinstance(app_id, str) or not app_id.strip():
        raise InvalidArgumentError(f"{names[0]} must be a non-empty string, got {app_id!r}")
    if isinstance(version, bool) or not isinstance(version, (int, str)):
        raise InvalidArgumentError(f"{names[1]} must be an integer >= 0, got {version!r}")
    try:
        number = int(version)
    except ValueError:
        raise InvalidArgumentError(f"{names[1]} must be an integer >= 0, got {version!r}") from None
    if number < 0:
        raise InvalidArgumentError(f"{names[1]} must be an integer >= 0, got {version!r}")
    return AppTransaction(app_id, number)


def app_transaction_from_conf(conf: Callable[[str], str | None]) -> AppTransaction | None:
    """The DML/MERGE watermark from the session (or, without one, the environment)."""
    return parse_app_transaction(conf(CONF_TXN_APP_ID), conf(CONF_TXN_VERSION), (CONF_TXN_APP_ID, CONF_TXN_VERSION))
