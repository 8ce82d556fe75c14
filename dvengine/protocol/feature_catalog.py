"""Delta's table features by name, and the protocol arithmetic of upgrading, adding and dropping them.

Names, kinds (writer-only or reader-writer) and legacy versions follow delta-spark's
``TableFeature`` list and PROTOCOL.md "Table Features". Upgrades never normalize (a (1, 2)
table upgraded to writer 7 lists ``appendOnly`` and ``invariants`` explicitly, as Delta does);
drops always normalize to the weakest equivalent protocol, as Delta's DROP FEATURE does, e.g.
``(1, 7, None, {appendOnly, invariants, checkConstraints}) -> (1, 3)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.protocol.actions import Protocol
from dvengine.protocol.features import COLUMN_MAPPING, reader_features, writer_features


@dataclass(frozen=True)
class FeatureInfo:
    name: str
    reader_writer: bool
    min_reader_version: int
    min_writer_version: int


def _w(name: str, writer: int = 7) -> FeatureInfo:
    return FeatureInfo(name, False, 1, writer)


def _rw(name: str, reader: int = 3, writer: int = 7) -> FeatureInfo:
    return FeatureInfo(name, True, reader, writer)


KNOWN_FEATURES: dict[str, FeatureInfo] = {
    f.name: f
    for f in (
        _w("appendOnly", 2),
        _w("invariants", 2),
        _w("checkConstraints", 3),
        _w("changeDataFeed", 4),
        _w("generatedColumns", 4),
        _rw(COLUMN_MAPPING, 2, 5),
        _w("identityColumns", 6),
        _rw("deletionVectors"),
        _rw("timestampNtz"),
        _rw("typeWidening"),
        _rw("typeWidening-preview"),
        _rw("v2Checkpoint"),
        _rw("vacuumProtocolCheck"),
        _rw("variantType"),
        _rw("variantType-preview"),
        _w("domainMetadata"),
        _w("rowTracking"),
        _w("icebergCompatV1"),
        _w("icebergCompatV2"),
        _w("clustering"),
        _w("inCommitTimestamp"),
        _w("checkpointProtection"),
        _w("allowColumnDefaults"),
    )
}

# Writer features implied by each legacy writer version (PROTOCOL.md).
LEGACY_WRITER_SETS: dict[int, frozenset[str]] = {
    w: frozenset(f.name for f in KNOWN_FEATURES.values() if f.min_writer_version <= w) for w in range(1, 7)
}


def feature_info(name: str) -> FeatureInfo:
    """The feature called ``name`` (exact, case-sensitive as in the protocol), else a typed error."""
    info = KNOWN_FEATURES.get(name)
    if info is None:
        raise UnsupportedFeatureError(
            f"table feature {name!r} is not known to dvengine (nor is it a Delta feature name, which are case-sensitive); "
            f"known: {sorted(KNOWN_FEATURES)}"
        )
    return info


def check_versions(reader_version: int, writer_version: int) -> None:
    if not 1 <= reader_version <= 3:
        raise InvalidArgumentError(f"readerVersion must be 1, 2 or 3, got {reader_version}")
    if not 1 <= writer_version <= 7:
        raise InvalidArgumentError(f"writerVersion must be between 1 and 7, got {writer_version}")
    if reader_version == 3 and writer_version < 7:
        raise InvalidArgumentError(
            f"readerVersion 3 (reader table features) requires writerVersion 7, got ({reader_version}, {writer_version})"
        )


def upgraded(current: Protocol, reader_version: int, writer_version: int) -> Protocol:
    """``current`` raised to at least (reader, writer), keeping implied features.

    As in delta-spark, asking for lower versions than the table has is not an error but changes
    nothing (protocols are never downgraded: the result takes the larger of each version).
    """
    check_versions(reader_version, writer_version)
    r = max(reader_version, current.min_reader_version)
    w = max(writer_version, current.min_writer_version)
    if (r, w) == (current.min_reader_version, current.min_writer_version):
        return current
    writers = sorted(writer_features(current)) if w >= 7 else None
    readers = sorted(reader_features(current)) if r >= 3 else None
    return Protocol(r, w, None if readers is None else tuple(readers), None if writers is None else tuple(writers))


def with_feature(current: Protocol, name: str) -> Protocol:
    """``current`` supporting feature ``name``: writer 7 (and reader 3 for a reader-writer feature)."""
    info = feature_info(name)
    writers = set(writer_features(current)) | {name}
    if info.reader_writer:
        readers = set(reader_features(current)) | {name}
        return Protocol(3, 7, tuple(sorted(readers)), tuple(sorted(writers)))
    if current.min_reader_version >= 3:
        return Protocol(current.min_reader_version, 7, tuple(sorted(reader_features(current))), tuple(sorted(writers)))
    return Protocol(current.min_reader_version, 7, None, tuple(sorted(writers)))


def normalized(writers: set[str]) -> Protocol:
    """The weakest protocol supporting exactly ``writers`` (reader-writer features included)."""
    for w, legacy in sorted(LEGACY_WRITER_SETS.items()):
        if writers == legacy:
            return Protocol(2 if COLUMN_MAPPING in writers else 1, w)
    rw = {n for n in writers if n in KNOWN_FEATURES and KNOWN_FEATURES[n].reader_writer}
    if rw - {COLUMN_MAPPING}:
        return Protocol(3, 7, tuple(sorted(rw)), tuple(sorted(writers)))
    return Protocol(2 if rw else 1, 7, None, tuple(sorted(writers)))


def without_feature(current: Protocol, name: str) -> Protocol:
    """``current`` with feature ``name`` dropped, normalized as Delta's DROP FEATURE does."""
    return normalized(set(writer_features(current)) - {name})
