"""DESCRIBE DETAIL: one record describing the table, with delta-spark's columns in its order.

Columns (delta-spark's ``TableDetail``): format, id, name, description, location, createdAt,
lastModified, partitionColumns, clusteringColumns, numFiles, sizeInBytes, properties,
minReaderVersion, minWriterVersion, tableFeatures. ``name`` is the catalog name when the table
was opened by name (``spark_catalog.db.t``), else None, as in Delta for path-based tables;
``location`` is a ``file:`` URI like Delta's; ``lastModified`` is the modification time of the
latest commit file; ``tableFeatures`` lists the features the protocol supports, legacy versions
expanded to the features they imply (Delta's ``(1, 2)`` -> ``appendOnly``, ``invariants``);
``clusteringColumns`` are logical names (the domain holds physical ones under column mapping).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from dvengine.log import load_snapshot
from dvengine.log.filenames import commit_file_name
from dvengine.protocol.features import reader_features, writer_features
from dvengine.storage import join, storage_for

DETAIL_COLUMNS = (
    "format",
    "id",
    "name",
    "description",
    "location",
    "createdAt",
    "lastModified",
    "partitionColumns",
    "clusteringColumns",
    "numFiles",
    "sizeInBytes",
    "properties",
    "minReaderVersion",
    "minWriterVersion",
    "tableFeatures",
)


def _utc(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def detail(table_root: str, name: str | None = None) -> dict[str, Any]:
    """The DESCRIBE DETAIL record of the latest version (timestamps as UTC datetimes)."""
    snapshot = load_snapshot(table_root)
    commit = join(snapshot.table_root, f"_delta_log/{commit_file_name(snapshot.version)}")
    try:
        last_modified_ms: int | None = storage_for(commit).head(commit).modification_time_ms
    except FileNotFoundError:  # log cleaned up behind a checkpoint: fall back to the commit time
        last_modified_ms = snapshot.timestamp_ms
    clustering = snapshot.domain_metadata.get("delta.clustering")
    clustering_columns: list[str] = []
    if clustering is not None and not clustering.removed:
        raw = json.loads(clustering.configuration or "{}").get("clusteringColumns") or []
        # the domain holds physical names; Delta shows logical ones (ClusteringColumnInfo.extractLogicalNames)
        logical = {f.physical_name: f.name for f in snapshot.schema.fields}
        parts = [[str(p) for p in c] if isinstance(c, list) else [str(c)] for c in raw]
        clustering_columns = [logical.get(p[0], p[0]) if len(p) == 1 else ".".join(p) for p in parts]
    protocol = snapshot.protocol
    return {
        "format": "delta",
        "id": snapshot.metadata.id,
        "name": name,
        "description": snapshot.metadata.description,
        "location": "file:" + snapshot.table_root,
        "createdAt": _utc(snapshot.metadata.created_time),
        "lastModified": _utc(last_modified_ms),
        "partitionColumns": list(snapshot.partition_columns),
        "clusteringColumns": clustering_columns,
        "numFiles": len(snapshot.files),
        "sizeInBytes": sum(f.size for f in snapshot.files),
        "properties": dict(snapshot.configuration),
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
        "tableFeatures": sorted(reader_features(protocol) | writer_features(protocol)),
    }
