"""The Arrow schema of classic checkpoint Parquet files, as Delta Spark writes it.

Readers (Delta Spark, delta-rs, delta-kernel, DuckDB) look up checkpoint columns by name and
expect these exact physical types: int32 for protocol versions and for the DV ``offset`` and
``sizeInBytes``, Parquet MAP for partitionValues/tags/configuration. The layout below was
checked field by field against the golden checkpoint written by Delta Spark 3.0
(``dv-partitioned-with-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet``).
"""

from __future__ import annotations

import pyarrow as pa

STRING_MAP = pa.map_(pa.string(), pa.string())
STRING_LIST = pa.list_(pa.field("element", pa.string()))

DELETION_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)

TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])

ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("stats", pa.string()),
    ]
)

REMOVE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)

METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", STRING_LIST),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)

PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", STRING_LIST),
        ("writerFeatures", STRING_LIST),
    ]
)

DOMAIN_METADATA = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])

CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", TXN),
        ("add", ADD),
        ("remove", REMOVE),
        ("metaData", METADATA),
        ("protocol", PROTOCOL),
        ("domainMetadata", DOMAIN_METADATA),
    ]
)

# Clustered tables: add.clusteringProvider (PROTOCOL.md "Clustered Table") is kept in checkpoints.
# Delta Spark writes the column only for tables that use it, so other tables keep the layout above.
ADD_CLUSTERED = pa.struct([*ADD, pa.field("clusteringProvider", pa.string())])
CLUSTERED_CHECKPOINT_SCHEMA = CHECKPOINT_SCHEMA.set(CHECKPOINT_SCHEMA.get_field_index("add"), pa.field("add", ADD_CLUSTERED))
