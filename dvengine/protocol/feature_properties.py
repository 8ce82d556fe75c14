"""``TBLPROPERTIES ('delta.feature.<name>' = 'supported')`` at CREATE / REPLACE TABLE.

Delta (``OptimisticTransaction.updateMetadataInternal``, "Table features Part 2") reads every
``delta.feature.*`` property of a new metadata as a request to support that feature: the status
must be ``supported`` or ``enabled`` (any case), the name a known feature (matched without case:
Delta lower-cases property keys), and the feature goes into the protocol, which becomes writer 7
(reader 3 for a reader-writer feature). The properties themselves are then removed from the
configuration (``Protocol.filterProtocolPropsFromTableProps``): a table created with
``'delta.feature.allowColumnDefaults' = 'supported'`` lists the feature in its protocol, not in
its ``metaData.configuration``. This is how users turn on features that no other property
implies, such as ``allowColumnDefaults`` before any column may have a ``DEFAULT``.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.protocol.actions import Protocol
from dvengine.protocol.feature_catalog import KNOWN_FEATURES, with_feature

FEATURE_PREFIX = "delta.feature."
_STATUSES = ("supported", "enabled")


def split_feature_properties(configuration: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """(feature names asked for, the configuration without ``delta.feature.*`` keys)."""
    by_lower = {name.lower(): name for name in KNOWN_FEATURES}
    features: list[str] = []
    rest: dict[str, str] = {}
    for key, value in configuration.items():
        if not key.lower().startswith(FEATURE_PREFIX):
            rest[key] = value
            continue
        name = key[len(FEATURE_PREFIX):]
        if str(value).lower() not in _STATUSES:
            raise InvalidArgumentError(
                f"table property {key!r} = {value!r}: a feature's status must be 'supported' or 'enabled' "
                "(Delta's DELTA_UNSUPPORTED_FEATURE_STATUS)"
            )
        known = by_lower.get(name.lower())
        if known is None:
            raise UnsupportedFeatureError(
                f"table property {key!r} names no table feature dvengine knows (Delta's "
                f"DELTA_UNSUPPORTED_FEATURES_IN_CONFIG); known: {sorted(KNOWN_FEATURES)}"
            )
        if known not in features:
            features.append(known)
    return tuple(features), rest


def with_features(protocol: Protocol, features: tuple[str, ...]) -> Protocol:
    """``protocol`` also supporting ``features`` (unchanged when it lists them already)."""
    for name in features:
        protocol = with_feature(protocol, name)
    return protocol
