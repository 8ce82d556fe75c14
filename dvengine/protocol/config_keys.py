"""Delta's table property names (``DeltaConfigs``), to spell a ``delta.*`` key as Delta does.

Spark hands a data source its options as a case-insensitive map, and Delta's
``DeltaConfigs.validateConfigurations`` stores a known property under its own spelling whatever
case the user wrote (``delta.COLUMNMAPPING.MODE`` becomes ``delta.columnMapping.mode``) and
``delta.feature.*`` keys lower-cased. The names below are those of delta-spark 4.x's
``DeltaConfig.scala`` (plus the clustering and coordinated-commits ones defined elsewhere).
Only spelling is normalised here: a ``delta.*`` key not in the list is kept as written (Delta
would raise DELTA_UNKNOWN_CONFIGURATION unless ``allowArbitraryProperties`` is set; dvengine, as
for every property it does not know, stores it).
"""

from __future__ import annotations

from collections.abc import Mapping

_NAMES = (
    "minReaderVersion", "minWriterVersion", "ignoreProtocolDefaults", "logRetentionDuration", "sampleRetentionDuration",
    "checkpointRetentionDuration", "checkpointInterval", "autoOptimize.autoCompact", "enableExpiredLogCleanup",
    "enableFullRetentionRollback", "dropFeatureTruncateHistory.retentionDuration", "deletedFileRetentionDuration",
    "randomizeFilePrefixes", "randomPrefixLength", "appendOnly", "enableDeletionVectors", "parquet.format.version",
    "enableVariantShredding", "autoOptimize", "dataSkippingNumIndexedCols", "dataSkippingStatsColumns",
    "dataSkippingStringPrefixLength", "checkpoint.writeStatsAsJson", "checkpoint.writeStatsAsStruct",
    "enableChangeDataCapture", "enableChangeDataFeed", "columnMapping.mode", "columnMapping.maxColumnId",
    "setTransactionRetentionDuration", "isolationLevel", "checkpointPolicy", "enableRowTracking", "rowTrackingSuspended",
    "universalFormat.enabledFormats", "enableIcebergCompatV2", "enableIcebergCompatV3", "autoOptimize.optimizeWrite",
    "enableTypeWidening", "enableInCommitTimestamps", "inCommitTimestampEnablementVersion",
    "inCommitTimestampEnablementTimestamp", "requireCheckpointProtectionBeforeVersion",
    "enableMaterializePartitionColumnsFeature", "writePartitionColumnsToParquet", "enableRowLevelConcurrency",
    "clusteringColumns",
)
_CANONICAL = {f"delta.{name}".lower(): f"delta.{name}" for name in _NAMES}
FEATURE_PREFIX = "delta.feature."
CONSTRAINT_PREFIX = "delta.constraints."


def canonical_key(key: str) -> str:
    """``key`` spelled as Delta stores it (see the module docstring)."""
    lower = key.lower()
    if lower.startswith(FEATURE_PREFIX):
        return lower
    return _CANONICAL.get(lower, key)


def delta_properties(options: Mapping[str, str]) -> dict[str, str]:
    """The ``delta.*`` entries of writer options (any case), keyed as Delta keys table properties:
    what a write that creates the table stores as its configuration (Delta 2.1+,
    ``DeltaDataSource.createRelation``: ``parameters.filterKeys(_.startsWith("delta."))``)."""
    return {canonical_key(k): str(v) for k, v in options.items() if k.lower().startswith("delta.")}
