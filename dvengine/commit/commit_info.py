"""The ``commitInfo`` action dvengine writes, shaped like Delta Spark's.

Tools such as ``DESCRIBE HISTORY``, delta-rs ``history()`` and audit scripts read these fields,
and they parse them the way Delta writes them: ``operationParameters`` values are strings where
the parameter is a string and JSON text otherwise (``"partitionBy": "[\\"part\\"]"``), and every
``operationMetrics`` value is a string. ``readVersion`` is absent for the commit that creates
the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from dvengine.protocol.actions import CommitInfo


@lru_cache(maxsize=1)
def engine_info() -> str:
    try:
        return f"dvengine/{version('dvengine')}"
    except PackageNotFoundError:
        # Running from a source tree that was never installed: still identify the engine.
        return "dvengine/unknown"


def encode_parameter(value: Any) -> str:
    """Delta's encoding of one operation parameter: strings verbatim, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def encode_metric(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_commit_info(
    *,
    timestamp_ms: int,
    operation: str,
    operation_parameters: Mapping[str, Any],
    read_version: int | None,
    isolation_level: str,
    is_blind_append: bool,
    operation_metrics: Mapping[str, Any] | None,
    txn_id: str,
    tags: Mapping[str, str] | None = None,
) -> CommitInfo:
    values: dict[str, Any] = {
        "timestamp": timestamp_ms,
        "operation": operation,
        "operationParameters": {k: encode_parameter(v) for k, v in operation_parameters.items()},
    }
    if read_version is not None:
        values["readVersion"] = read_version
    values["isolationLevel"] = isolation_level
    values["isBlindAppend"] = is_blind_append
    if operation_metrics:
        values["operationMetrics"] = {k: encode_metric(v) for k, v in operation_metrics.items()}
    if tags:
        values["tags"] = dict(tags)  # Delta's field order: after userMetadata, before engineInfo
    values["engineInfo"] = engine_info()
    values["txnId"] = txn_id
    return CommitInfo(values)
