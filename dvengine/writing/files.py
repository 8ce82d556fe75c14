"""From a written Parquet file on disk to the ``add`` action that publishes it.

Kept apart from the Spark writer so the path and partition-value rules (the part other readers
are picky about) are pure and unit-testable:

- partition folders are Hive style, ``<physical column>=<value>``, with the value escaped the way
  Spark's ``ExternalCatalogUtils.escapePathName`` does (``%XX`` for ``"#%'*/:=?\\{[]^`` and
  control characters) and null written as ``__HIVE_DEFAULT_PARTITION__``;
- ``add.path`` is that relative path as a URI, i.e. percent-encoded once more (a folder named
  ``p=a b%2Fc`` is stored as ``p=a%20b%252Fc``), which readers decode once;
- ``partitionValues`` hold the log's string form of the typed value, keyed by physical name.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo

from dvengine.errors import ProtocolError
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import DataType, PartitionValue, parse_partition_value, serialize_partition_value
from dvengine.protocol.stats import FileStats

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
# The Spark writer's private folder inside the table root (hidden from readers by its leading "_");
# VACUUM removes ones a killed writer left behind.
SPARK_STAGING_PREFIX = "_dvengine_staging_"

_SPARK_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


def escape_partition_value(value: str) -> str:
    """Spark's escaping of a partition value in a folder name (inverse: :func:`unquote`)."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPED or ord(c) < 0x20 else c for c in value)


def encode_relative_path(relative_path: str) -> str:
    """``add.path`` for a file at ``relative_path`` (OS separators) under the table root."""
    return quote(relative_path.replace("\\", "/"), safe="/=")


def parse_partition_folders(
    relative_dir: str,
    partition_types: Sequence[tuple[str, DataType]],
    session_time_zone: str = "UTC",
) -> dict[str, str | None]:
    """``partitionValues`` from the folders Spark created, e.g. ``p=a%20b/d=2024-01-01``.

    ``partition_types`` lists (physical name, type) in folder order. Spark renders timestamps in
    the session time zone, so they are interpreted there and stored in UTC.
    """
    parts = [p for p in relative_dir.replace("\\", "/").split("/") if p]
    if len(parts) != len(partition_types):
        raise ProtocolError(
            f"written file sits in folder {relative_dir!r}, expected one level per partition column "
            f"{[name for name, _ in partition_types]}"
        )
    out: dict[str, str | None] = {}
    for folder, (name, data_type) in zip(parts, partition_types):
        key, sep, raw = folder.partition("=")
        if not sep or unquote(key) != name:
            raise ProtocolError(f"partition folder {folder!r} does not name column {name!r}")
        text = unquote(raw)
        value: PartitionValue = None
        if text != HIVE_DEFAULT_PARTITION:
            value = parse_partition_value(text, data_type)
            if data_type.name == "timestamp" and isinstance(value, dt.datetime) and session_time_zone != "UTC":
                value = value.replace(tzinfo=ZoneInfo(session_time_zone)).astimezone(dt.UTC)
        out[name] = serialize_partition_value(value, data_type)  # an empty string is logged null there
    return out


def build_add_file(
    relative_path: str,
    partition_values: Mapping[str, str | None],
    size: int,
    modification_time_ms: int,
    stats: FileStats,
) -> AddFile:
    return AddFile(
        path=encode_relative_path(relative_path),
        partition_values=dict(partition_values),
        size=size,
        modification_time=modification_time_ms,
        data_change=True,
        stats=stats.to_json_string(),
    )
