"""Checks a commit must pass before anything is written to the log.

A bad commit is worse than a failed one: once a JSON file lands in ``_delta_log`` every reader
sees it forever. So the invariants other engines rely on are enforced here, before the
put-if-absent, and a violation raises without touching the table:

- an ``add`` carrying a DV must have stats with ``numRecords`` (the *physical* row count that
  readers subtract the DV cardinality from) and ``tightBounds: false`` (min/max may now describe
  deleted rows); Delta Spark rejects the commit otherwise;
- adding DVs needs the ``deletionVectors`` feature in the protocol the commit will run under;
- the table's writer features must all be implemented by dvengine;
- a logical file (path, DV) is added at most once per commit;
- ``partitionValues`` of an ``add`` name exactly the (physical) partition columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from dvengine.errors import ProtocolError, UnsupportedFeatureError
from dvengine.protocol.actions import Action, AddFile, Metadata, Protocol
from dvengine.protocol.features import DELETION_VECTORS, check_writable, writer_features
from dvengine.protocol.schema import parse_schema
from dvengine.protocol.stats import FileStats


def check_dv_adds(adds: Sequence[AddFile], protocol: Protocol) -> None:
    with_dv = [a for a in adds if a.deletion_vector is not None]
    if not with_dv:
        return
    if DELETION_VECTORS not in writer_features(protocol):
        raise UnsupportedFeatureError(
            f"this commit adds deletion vectors (first on {with_dv[0].path}) but the table protocol "
            f"{protocol.to_json()} lacks the '{DELETION_VECTORS}' feature; upgrade the protocol first"
        )
    for add in with_dv:
        stats = FileStats.parse(add.stats)
        if stats is None or stats.num_records is None:
            raise ProtocolError(
                f"add of {add.path} carries a deletion vector but its stats lack numRecords; readers need the "
                "physical row count of the file"
            )
        if stats.tight_bounds is not False:
            raise ProtocolError(
                f"add of {add.path} carries a deletion vector but its stats do not say tightBounds=false "
                f"(got {stats.tight_bounds}); use dvengine.protocol.stats.stats_for_dv_file"
            )


def check_unique_adds(adds: Sequence[AddFile]) -> None:
    seen: set[tuple[str, str | None]] = set()
    for add in adds:
        if add.key in seen:
            raise ProtocolError(f"commit adds the logical file {add.key} more than once")
        seen.add(add.key)


def physical_partition_columns(metadata: Metadata) -> list[str]:
    schema = parse_schema(metadata.schema_string)
    return [schema.get(col).physical_name for col in metadata.partition_columns]


def check_partition_values(adds: Sequence[AddFile], metadata: Metadata) -> None:
    expected = set(physical_partition_columns(metadata))
    for add in adds:
        got = set(add.partition_values)
        if got != expected:
            raise ProtocolError(
                f"add of {add.path} has partitionValues for {sorted(got)} but the table is partitioned by "
                f"{sorted(expected)} (physical names)"
            )


def validate_commit(actions: Sequence[Action], protocol: Protocol, metadata: Metadata) -> None:
    """Raise if ``actions`` may not be committed to a table with this (new) protocol and metadata."""
    check_writable(protocol, metadata)
    adds = [a for a in actions if isinstance(a, AddFile)]
    check_unique_adds(adds)
    check_dv_adds(adds, protocol)
    check_partition_values(adds, metadata)
