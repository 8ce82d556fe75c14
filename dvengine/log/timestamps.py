"""Commit timestamps and the user's "as of" timestamp argument.

A commit's time is its ``inCommitTimestamp`` when the writer recorded one (monotonic and part
of the commit, hence the most trustworthy), else ``commitInfo.timestamp`` (the writer's clock),
else the commit file's modification time (all that is left for logs without commitInfo).
"""

from __future__ import annotations

import datetime as dt

from dvengine.errors import InvalidArgumentError
from dvengine.protocol.actions import CommitInfo


def commit_info_timestamp(info: CommitInfo | None, file_mtime_ms: int) -> int:
    if info is not None:
        ict = info.in_commit_timestamp
        if ict is not None:
            return ict
        ts = info.timestamp
        if ts is not None:
            return ts
    return file_mtime_ms


def to_epoch_ms(value: int | dt.datetime | dt.date | str) -> int:
    """Epoch milliseconds of a timestamp argument.

    Accepts epoch ms (int), datetimes (naive ones are taken as UTC, like Delta's
    ``timestampAsOf`` under a UTC session), dates (midnight UTC), and ISO-8601 strings
    (``2023-07-07``, ``2023-07-07 01:02:03``, ``2023-07-07T01:02:03.5+02:00``, ``...Z``).
    """
    if isinstance(value, bool):
        raise InvalidArgumentError(f"timestamp must be epoch ms, a datetime or an ISO string, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed: dt.datetime | dt.date = dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgumentError(
                f"timestamp {value!r} is not ISO-8601; use e.g. '2024-01-31', '2024-01-31 12:00:00' or "
                f"'2024-01-31T12:00:00Z'"
            ) from None
        return to_epoch_ms(parsed)
    if isinstance(value, dt.datetime):
        aware = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value
        delta = aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return delta // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return to_epoch_ms(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC))
    raise InvalidArgumentError(f"timestamp must be epoch ms, a datetime or an ISO string, got {type(value).__name__}")
