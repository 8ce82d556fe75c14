"""The data-source options of a change data feed read, for a ``format("delta")`` reader to call.

Delta Spark's names (case-insensitive, as Spark's options are): ``readChangeFeed`` (or its
older alias ``readChangeData``), ``startingVersion``, ``endingVersion``, ``startingTimestamp``,
``endingTimestamp``. Values arrive as strings; a malformed one is an error naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from dvengine.changes.reader import read_changes
from dvengine.errors import InvalidArgumentError


def _version(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be a version number, got {raw!r}") from None


def read_change_feed_options(table_root: str, options: Mapping[str, object]) -> pa.Table | None:
    """The change rows ``options`` ask for, or None when they do not ask for the change feed."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    flag = lowered.get("readchangefeed", lowered.get("readchangedata", "false")).strip().lower()
    if flag not in ("true", "false"):
        raise InvalidArgumentError(f"option readChangeFeed must be true or false, got {flag!r}")
    if flag == "false":
        return None
    return read_changes(
        table_root,
        starting_version=_version(lowered, "startingVersion"),
        ending_version=_version(lowered, "endingVersion"),
        starting_timestamp=lowered.get("startingtimestamp"),
        ending_timestamp=lowered.get("endingtimestamp"),
    )
