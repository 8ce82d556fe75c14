"""Table history: one record per commit, newest first, shaped like Delta's DESCRIBE HISTORY.

Auditing tools read history through Delta Spark (``DeltaTable.history()``) or delta-rs
(``DeltaTable.history()``); both return the commitInfo fields under their protocol names plus
``version``. We return the same so scripts written for either keep working, and we keep every
field the writer recorded (unknown ones too), because history is an audit trail, not a view.

``operationParameters`` is shown as DESCRIBE HISTORY shows it, a ``map<string,string>``: Delta's
``DeltaHistory.fromCommitInfo`` passes it through ``CommitInfo.getLegacyPostDeserializationOperationParameters``
(delta-io/delta ``actions/actions.scala``), which reads each raw JSON value back as a string: a JSON
string as its text, ``true`` / ``false`` and numbers as their JSON text, ``null`` as null. So a
commit Delta wrote (``"auto":true``) and an older dvengine commit (``"auto":"true"``) both read
``"true"``, and a script comparing with strings keeps working on either.

``operationMetrics`` goes the same way: ``CommitInfo.operationMetrics`` is an
``Option[Map[String, String]]`` that Jackson deserializes with its ``StringDeserializer``, which
takes a JSON number or boolean as its text. delta-rs writes its metrics as numbers
(``"num_added_files":16``); Delta's history shows ``"16"``, and so does ours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dvengine.errors import InvalidArgumentError
from dvengine.log import commit_infos
from dvengine.log.timestamps import commit_info_timestamp
from dvengine.storage.logstore import normalize_table_path

# Field order of Delta's DESCRIBE HISTORY; present fields come first in this order.
HISTORY_FIELDS = (
    "version",
    "timestamp",
    "userId",
    "userName",
    "operation",
    "operationParameters",
    "job",
    "notebook",
    "clusterId",
    "readVersion",
    "isolationLevel",
    "isBlindAppend",
    "operationMetrics",
    "userMetadata",
    "engineInfo",
)


def parameter_text(value: Any) -> str | None:
    """One ``operationParameters`` / ``operationMetrics`` value as DESCRIBE HISTORY shows it. Delta
    never writes an array or object raw (its reader fails on one, delta-io/delta#2419: delta-rs's
    old OPTIMIZE metrics); another writer's is shown as compact JSON text rather than refused."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def history(table_root: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Commit records of the table, newest first; at most ``limit`` of them.

    ``timestamp`` is the commit time in epoch ms (inCommitTimestamp when present, else
    commitInfo.timestamp, else the commit file's time), the same time time travel resolves
    ``timestamp=`` against. Versions whose commit files were cleaned up are not listed.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgumentError(f"limit must be a non-negative int or None, got {limit!r}")
    out: list[dict[str, Any]] = []
    for version, info in commit_infos(normalize_table_path(table_root), limit=limit):
        values = dict(info.values)
        values["version"] = version
        values["timestamp"] = commit_info_timestamp(info, int(values.get("timestamp") or 0))
        for key in ("operationParameters", "operationMetrics"):
            shown = values.get(key)
            if isinstance(shown, Mapping):
                values[key] = {str(k): parameter_text(v) for k, v in shown.items()}
        record = {key: values.pop(key) for key in HISTORY_FIELDS if key in values}
        record.update(values)
        out.append(record)
    return out
