"""Table features: which protocol capabilities a table needs and which dvengine implements.

Before reading, every reader feature of the table must be implemented; before writing, every
writer feature. Legacy protocol versions (reader < 3, writer < 7) imply a fixed feature set,
which is also what must be carried over when a table is upgraded to explicit features.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.errors import UnsupportedFeatureError
from dvengine.protocol.actions import Metadata, Protocol

DELETION_VECTORS = "deletionVectors"
COLUMN_MAPPING = "columnMapping"
TIMESTAMP_NTZ = "timestampNtz"
V2_CHECKPOINT = "v2Checkpoint"
CHANGE_DATA_FEED = "changeDataFeed"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
CHANGE_DATA_DIR = "_change_data"  # PROTOCOL.md "Change Data Files": the folder at the table root

# typeWidening: files of a narrower type are cast up on read (dvengine.protocol.type_widening).
TYPE_WIDENING_FEATURES = frozenset({"typeWidening", "typeWidening-preview"})
SUPPORTED_READER_FEATURES = frozenset(
    {DELETION_VECTORS, COLUMN_MAPPING, TIMESTAMP_NTZ, V2_CHECKPOINT, "vacuumProtocolCheck", *TYPE_WIDENING_FEATURES}
)

# Writer features dvengine honours when it commits: appendOnly (DML, overwrite, REPLACE with files are refused),
# invariants, checkConstraints and generatedColumns (every new row is checked, generated values
# computed: dvengine.writing.invariants / .constraints / .generated), changeDataFeed (DML writes _change_data files,
# dvengine.commands.change_data), identityColumns (values assigned on write with the high-water
# mark, dvengine.writing.identity), allowColumnDefaults (inserts write CURRENT_DEFAULT,
# dvengine.writing.defaults), inCommitTimestamp (commit.in_commit_timestamps), clustering and
# domainMetadata (the ``delta.clustering`` domain is written at CREATE and kept by replay and
# checkpoints; OPTIMIZE clusters only unclustered or ``liquid`` files: dvengine.maintenance.clustering).
# rowTracking (fresh row ids at commit, materialized stable ids on copies: protocol.row_tracking).
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        DELETION_VECTORS,
        TIMESTAMP_NTZ,
        COLUMN_MAPPING,
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "identityColumns",
        "allowColumnDefaults",
        "inCommitTimestamp",
        "vacuumProtocolCheck",
        CHANGE_DATA_FEED,
        "clustering",
        "domainMetadata",
        "rowTracking",
        V2_CHECKPOINT,  # UUID-named V2 checkpoints with sidecars under delta.checkpointPolicy=v2 (log.checkpoint_writer)
        *TYPE_WIDENING_FEATURES,  # widening by schema evolution / ALTER, recorded in delta.typeChanges
    }
)

# Writer features implied by legacy writer versions (PROTOCOL.md "Table Features").
_LEGACY_WRITER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"appendOnly", "invariants"}),
    3: frozenset({"appendOnly", "invariants", "checkConstraints"}),
    4: frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}),
    5: frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", COLUMN_MAPPING}),
    6: frozenset(
        {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", COLUMN_MAPPING, "identityColumns"}
    ),
}
_LEGACY_READER_FEATURES: dict[int, frozenset[str]] = {1: frozenset(), 2: frozenset({COLUMN_MAPPING})}


def reader_features(protocol: Protocol) -> frozenset[str]:
    if protocol.min_reader_version >= 3:
        return frozenset(protocol.reader_features or ())
    return _LEGACY_READER_FEATURES.get(protocol.min_reader_version, frozenset())


def writer_features(protocol: Protocol) -> frozenset[str]:
    if protocol.min_writer_version >= 7:
        return frozenset(protocol.writer_features or ())
    return _LEGACY_WRITER_FEATURES.get(protocol.min_writer_version, _LEGACY_WRITER_FEATURES[6])


def check_readable(protocol: Protocol) -> None:
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(f"table requires reader version {protocol.min_reader_version}; dvengine reads up to 3")
    missing = sorted(reader_features(protocol) - SUPPORTED_READER_FEATURES)
    if missing:
        raise UnsupportedFeatureError(
            f"table requires reader feature(s) {missing} that dvengine does not implement; "
            f"supported: {sorted(SUPPORTED_READER_FEATURES)}"
        )


def _field_metadata_keys(schema_string: str) -> set[str]:
    """Every metadata key of every (nested) field of a schema."""
    from dvengine.protocol.schema import ArrayType, MapType, StructType, parse_schema

    keys: set[str] = set()
    pending: list[object] = [parse_schema(schema_string)]
    while pending:
        node = pending.pop()
        if isinstance(node, StructType):
            for f in node.fields:
                keys.update(f.metadata)
                pending.append(f.type)
        elif isinstance(node, ArrayType):
            pending.append(node.element_type)
        elif isinstance(node, MapType):
            pending.extend((node.key_type, node.value_type))
    return keys


def legacy_features_in_use(protocol: Protocol, metadata: Metadata) -> frozenset[str]:
    """The features a legacy-versioned table (writer < 7) actually uses.

    A legacy writer version *allows* a bundle of features, but a writer only has to honour
    the ones the table's metadata turns on: writer version 5 does not make a table without
    generation expressions a generated-columns table.
    """
    implied = writer_features(protocol)
    config = {k: v.lower() for k, v in metadata.configuration.items()}
    field_keys = _field_metadata_keys(metadata.schema_string)
    in_use = {
        "appendOnly": config.get("delta.appendOnly") == "true",
        "invariants": "delta.invariants" in field_keys,
        "checkConstraints": any(k.startswith("delta.constraints.") for k in config),
        "changeDataFeed": config.get("delta.enableChangeDataFeed") == "true",
        "generatedColumns": "delta.generationExpression" in field_keys,
        COLUMN_MAPPING: config.get("delta.columnMapping.mode", "none") != "none",
        "identityColumns": any(k.startswith("delta.identity.") for k in field_keys),
    }
    return frozenset(f for f in implied if in_use.get(f, True))


def check_writable(protocol: Protocol, metadata: Metadata | None = None) -> None:
    """Refuse to write a table needing a writer feature dvengine does not implement.

    With explicit features (writer 7) every listed feature counts; with a legacy writer
    version and known ``metadata``, only the implied features the table uses count.
    """
    check_readable(protocol)
    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(f"table requires writer version {protocol.min_writer_version}; dvengine writes up to 7")
    if protocol.min_writer_version < 7 and metadata is not None:
        needed = legacy_features_in_use(protocol, metadata)
    else:
        needed = writer_features(protocol)
    missing = sorted(needed - SUPPORTED_WRITER_FEATURES)
    if missing:
        raise UnsupportedFeatureError(
            f"table requires writer feature(s) {missing} that dvengine does not implement; "
            f"supported: {sorted(SUPPORTED_WRITER_FEATURES)}"
        )


def supports_deletion_vectors(protocol: Protocol, metadata: Metadata) -> bool:
    """DVs may be *written* only when the feature is in the protocol and the property enables it."""
    enabled = metadata.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"
    return enabled and DELETION_VECTORS in writer_features(protocol) and DELETION_VECTORS in reader_features(protocol)


def with_deletion_vectors(protocol: Protocol) -> Protocol:
    """Upgrade a protocol to reader 3 / writer 7 with DVs, keeping every feature it implied."""
    readers = set(reader_features(protocol)) | {DELETION_VECTORS}
    writers = set(writer_features(protocol)) | {DELETION_VECTORS}
    return Protocol(
        min_reader_version=3,
        min_writer_version=7,
        reader_features=tuple(sorted(readers)),
        writer_features=tuple(sorted(writers)),
    )


def is_append_only(configuration: Mapping[str, str]) -> bool:
    """``delta.appendOnly`` is true (any case): the table refuses data-changing removes and
    row-level changes (PROTOCOL.md "Append-only Tables")."""
    return configuration.get("delta.appendOnly", "false").lower() == "true"


def change_data_feed_enabled(metadata: Metadata) -> bool:
    """Whether writers must record change data (PROTOCOL.md "Writer Requirements for AddCDCFile").

    The property alone decides: a table whose protocol lacks the feature but has the property
    set (written by a lax writer) still gets change data, which no reader can object to.
    """
    return metadata.configuration.get(ENABLE_CHANGE_DATA_FEED, "false").lower() == "true"


def with_change_data_feed(protocol: Protocol) -> Protocol:
    """The protocol a table needs once ``delta.enableChangeDataFeed`` is true.

    Legacy protocols move to writer 4 (which implies the feature, as Delta Spark does without
    table features); explicit-feature protocols (writer 7) get ``changeDataFeed`` listed.
    """
    if CHANGE_DATA_FEED in writer_features(protocol):
        return protocol
    if protocol.min_writer_version < 7:
        return Protocol(protocol.min_reader_version, 4, protocol.reader_features, protocol.writer_features)
    writers = tuple(sorted(set(protocol.writer_features or ()) | {CHANGE_DATA_FEED}))
    return Protocol(protocol.min_reader_version, 7, protocol.reader_features, writers)


DEFAULT_NEW_TABLE_PROTOCOL = Protocol(3, 7, (DELETION_VECTORS,), (DELETION_VECTORS,))
