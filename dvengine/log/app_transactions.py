"""Expiry of application transaction watermarks (``txn`` actions).

Delta keeps a ``txn`` per appId forever unless the table sets
``delta.setTransactionRetentionDuration``: a snapshot then ignores watermarks whose
``lastUpdated`` is at or before now minus that duration, and checkpoints written from it drop
them (Delta's ``minSetTransactionRetentionTimestamp``). A watermark without ``lastUpdated``
never expires, as in Delta. Expiry keeps the log of a table fed by many short-lived streams
from carrying every stream's id forever; the price is that a write retried after the retention
is no longer recognised as a repeat.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from dvengine.log.intervals import parse_interval_ms
from dvengine.protocol.actions import Txn

RETENTION_PROPERTY = "delta.setTransactionRetentionDuration"


def live_app_transactions(txns: Mapping[str, Txn], configuration: Mapping[str, str], now_ms: int | None = None) -> dict[str, Txn]:
    """``txns`` without the ones the table's retention has expired."""
    raw = configuration.get(RETENTION_PROPERTY)
    if raw is None:
        return dict(txns)
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - parse_interval_ms(raw)
    return {app: t for app, t in txns.items() if t.last_updated is None or t.last_updated > cutoff}
