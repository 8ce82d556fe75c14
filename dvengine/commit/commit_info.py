"""The ``commitInfo`` action dvengine writes, shaped like Delta Spark's.

Tools such as ``DESCRIBE HISTORY``, delta-rs ``history()`` and audit scripts read these fields,
and they parse them the way Delta writes them. Delta's ``CommitInfo.operationParameters`` is
written by ``JsonMapSerializer`` (delta-io/delta ``actions/actions.scala``), which emits each value
with ``writeRawValue`` of ``Operation.jsonEncodedValues`` (``DeltaOperations.scala``: every
parameter passed through ``JsonUtils.toJson``). So a String parameter is a JSON string, a Boolean
a JSON boolean, a Long a JSON number, ``None`` JSON ``null``; lists and maps are passed by the
operation already encoded with ``JsonUtils.toJson`` and so land as a JSON string holding compact
JSON (``"partitionBy":"[\\"a\\",\\"b\\"]"``). dvengine keeps that one path: call sites pass values
of Delta's types (:data:`ParameterValue`), lists and maps encoded by :func:`delta_json`, and
:func:`build_commit_info` writes them as raw JSON values. Every ``operationMetrics`` value is a
string; an empty map is written as ``{}`` (what Delta logs for an operation without metrics, such
as CREATE or REPLACE TABLE), None leaves the field out. ``readVersion`` is absent for the commit
that creates the table. ``userMetadata`` (the ``userMetadata`` write option, else the session conf
:data:`CONF_USER_METADATA`, as Delta's ``TransactionHelper.getUserMetadata``) sits between
``operationMetrics`` and ``tags``, Jackson's field order of Delta's ``CommitInfo``, and is absent
when neither is set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeAlias

from dvengine.expressions import BoundPredicate
from dvengine.protocol.actions import CommitInfo

# Delta's DeltaSQLConf.DELTA_USER_METADATA: "Arbitrary user-defined metadata to include in CommitInfo"
# of every commit of the session whose operation carries none of its own (the write option wins).
CONF_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

# What a Delta operation parameter is once ``JsonUtils.toJson`` has run: String, Boolean, Long, None.
ParameterValue: TypeAlias = str | bool | int | None


@lru_cache(maxsize=1)
def engine_info() -> str:
    try:
        return f"dvengine/{version('dvengine')}"
    except PackageNotFoundError:
        # Running from a source tree that was never installed: still identify the engine.
        return "dvengine/unknown"


def delta_json(value: object) -> str:
    """``value`` as Delta's ``JsonUtils.toJson`` text: Jackson's compact form (no spaces after
    ``,`` / ``:``) with non-ASCII characters kept as they are (Jackson writes UTF-8, it does not
    escape them), so the string a reader decodes is the one Delta would have logged."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def predicate_parameter(predicate: BoundPredicate | None) -> str:
    """``predicate`` of Delta's ``OperationWithPredicates`` (DELETE, UPDATE, MERGE, OPTIMIZE, REORG):
    ``JsonUtils.toJson(predicatesToString(predicates))``, a JSON list of the conditions' SQL, ``[]``
    for none."""
    return delta_json([] if predicate is None else [predicate.sql])


def checked_parameters(parameters: Mapping[str, Any]) -> dict[str, ParameterValue]:
    """The parameters, refused (TypeError) unless every value is one of Delta's JSON scalar types.

    A list or a map must come through :func:`delta_json` first: written raw it would be a JSON
    array or object, which no Delta operation logs and Delta's own history reader cannot coerce
    into its ``Map[String, String]``. Checked when the transaction opens, before any file is written.
    """
    out: dict[str, ParameterValue] = {}
    for key, value in parameters.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, (str, bool, int))):
            raise TypeError(
                f"operation parameter {key!r} = {value!r}: values must be str, bool, int or None "
                "(encode lists and maps with dvengine.commit.commit_info.delta_json)"
            )
        out[key] = value
    return out


def encode_metric(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_commit_info(
    *,
    timestamp_ms: int,
    operation: str,
    operation_parameters: Mapping[str, ParameterValue],
    read_version: int | None,
    isolation_level: str,
    is_blind_append: bool,
    operation_metrics: Mapping[str, Any] | None,
    txn_id: str,
    tags: Mapping[str, str] | None = None,
    user_metadata: str | None = None,
) -> CommitInfo:
    values: dict[str, Any] = {
        "timestamp": timestamp_ms,
        "operation": operation,
        "operationParameters": checked_parameters(operation_parameters),
    }
    if read_version is not None:
        values["readVersion"] = read_version
    values["isolationLevel"] = isolation_level
    values["isBlindAppend"] = is_blind_append
    # Always written, {} for a commit without metrics: Delta's OptimisticTransaction.getOperationMetrics
    # gives every commit Some(metrics) while spark.databricks.delta.history.metricsEnabled is on (the
    # default), so its metadata-only commits (SET TBLPROPERTIES, column changes, ...) log {} too.
    values["operationMetrics"] = {k: encode_metric(v) for k, v in (operation_metrics or {}).items()}
    if user_metadata is not None:
        values["userMetadata"] = user_metadata  # Delta's field order: after operationMetrics, before tags
    if tags:
        values["tags"] = dict(tags)  # Delta's field order: after userMetadata, before engineInfo
    values["engineInfo"] = engine_info()
    values["txnId"] = txn_id
    return CommitInfo(values)
