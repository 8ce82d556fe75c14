"""In-commit timestamps (the ``inCommitTimestamp`` writer feature): a commit's time stored in the commit.

PROTOCOL.md "In-Commit Timestamps": with ``delta.enableInCommitTimestamps=true`` every commit's
``commitInfo`` (the first action) carries ``inCommitTimestamp``, strictly greater than the
previous commit's, so time travel and history order commits by a monotonic clock that survives
file copies (modification times do not). The commit that turns the feature on for an existing
table also records ``delta.inCommitTimestampEnablementVersion`` / ``...EnablementTimestamp`` in
the metadata, telling readers from which version on the timestamps are in the commits.

The value depends on the version a commit finally lands at (after lost races), so it is computed
when the commit file is serialized, from the commit just before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from dvengine.log.loader import read_commit_actions
from dvengine.protocol.actions import CommitInfo, Metadata, Protocol
from dvengine.protocol.feature_catalog import with_feature
from dvengine.protocol.features import writer_features
from dvengine.storage.logstore import LogStore

ENABLE = "delta.enableInCommitTimestamps"
ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
FEATURE = "inCommitTimestamp"


def enabled(configuration: Mapping[str, str]) -> bool:
    return configuration.get(ENABLE, "false").lower() == "true"


def protocol_for(protocol: Protocol, configuration: Mapping[str, str]) -> Protocol:
    """``protocol`` with the feature when the configuration enables in-commit timestamps."""
    if not enabled(configuration) or FEATURE in writer_features(protocol):
        return protocol
    return with_feature(protocol, FEATURE)


def next_timestamp(store: LogStore, table_root: str, version: int, now_ms: int) -> int:
    """``now_ms``, or one past the previous commit's time when the clock is behind it (monotonic)."""
    if version == 0:
        return now_ms
    previous = next((a for a in read_commit_actions(table_root, version - 1, store) if isinstance(a, CommitInfo)), None)
    last = None if previous is None else (previous.in_commit_timestamp or previous.timestamp)
    return now_ms if last is None else max(now_ms, last + 1)


def with_enablement(metadata: Metadata, was_enabled: bool, version: int, timestamp_ms: int) -> Metadata:
    """The metadata of the commit that turns the feature on for an existing table records where."""
    if was_enabled or not enabled(metadata.configuration) or version == 0:
        return metadata
    configuration = {**metadata.configuration, ENABLEMENT_VERSION: str(version), ENABLEMENT_TIMESTAMP: str(timestamp_ms)}
    return dataclasses.replace(metadata, configuration=configuration)
