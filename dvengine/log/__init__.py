"""The Delta log: listing, replay keyed by (path, DV unique id), snapshots, checkpoints.

This layer never imports pyspark: it turns ``_delta_log`` files into immutable
:class:`Snapshot` values and writes checkpoints of them.
"""

from dvengine.log.checkpoint_writer import (
    cleanup_expired_logs,
    maybe_checkpoint,
    parse_interval_ms,
    write_checkpoint,
)
from dvengine.log.column_mapping import column_mapping_mode, logical_to_physical, physical_to_logical
from dvengine.log.loader import (
    blind_snapshot,
    commit_infos,
    commit_timestamp,
    find_table_root,
    latest_version,
    load_snapshot,
    read_commit_actions,
    table_exists,
)
from dvengine.log.snapshot import Snapshot
from dvengine.log.snapshot_cache import clear_snapshot_cache

__all__ = [
    "Snapshot",
    "blind_snapshot",
    "cleanup_expired_logs",
    "clear_snapshot_cache",
    "column_mapping_mode",
    "commit_infos",
    "commit_timestamp",
    "find_table_root",
    "latest_version",
    "load_snapshot",
    "logical_to_physical",
    "maybe_checkpoint",
    "parse_interval_ms",
    "physical_to_logical",
    "read_commit_actions",
    "table_exists",
    "write_checkpoint",
]
