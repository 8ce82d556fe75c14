"""Which writer features block a write: explicit lists count whole, legacy versions only what is in use."""

from __future__ import annotations

import json

import pytest

from dvengine.errors import UnsupportedFeatureError
from dvengine.protocol.actions import Metadata, Protocol
from dvengine.protocol.features import check_writable, legacy_features_in_use, with_deletion_vectors


def _metadata(field_metadata: dict[str, object] | None = None, configuration: dict[str, str] | None = None) -> Metadata:
    schema = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": field_metadata or {}}]}
    return Metadata(id="t", schema_string=json.dumps(schema), configuration=configuration or {})


def test_legacy_writer_version_blocks_only_features_in_use() -> None:
    legacy = Protocol(2, 6)
    check_writable(legacy, _metadata())  # implies generated/identity columns, CDF ... none in use
    assert legacy_features_in_use(legacy, _metadata()) == frozenset()
    # generatedColumns and identityColumns are implemented (values computed / assigned and checked)
    check_writable(legacy, _metadata({"delta.generationExpression": "y + 1"}))
    check_writable(legacy, _metadata({"delta.identity.start": 1, "delta.identity.step": 1}))
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV1"):
        check_writable(Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "icebergCompatV1")), _metadata())
    # changeDataFeed is implemented (DML writes _change_data files): a CDF table is writable
    check_writable(legacy, _metadata(configuration={"delta.enableChangeDataFeed": "true"}))


def test_lower_legacy_versions_do_not_imply_later_features() -> None:
    metadata = _metadata({"delta.generationExpression": "y + 1"})
    assert "generatedColumns" not in legacy_features_in_use(Protocol(1, 3), metadata)


def test_explicit_writer_features_count_even_when_unused() -> None:
    protocol = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "icebergCompatV1"))
    with pytest.raises(UnsupportedFeatureError, match="icebergCompatV1"):
        check_writable(protocol, _metadata())


def test_upgrade_to_deletion_vectors_keeps_implied_features() -> None:
    upgraded = with_deletion_vectors(Protocol(2, 5))
    assert (upgraded.min_reader_version, upgraded.min_writer_version) == (3, 7)
    assert {"columnMapping", "deletionVectors"} <= set(upgraded.reader_features or ())
    assert {"columnMapping", "generatedColumns", "changeDataFeed", "deletionVectors"} <= set(upgraded.writer_features or ())
