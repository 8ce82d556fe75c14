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
- ``partitionValues`` of an ``add`` name exactly the (physical) partition columns;
- new metadata with the change data feed on has no column the feed reserves
  (``check_change_data_columns``, called when the metadata is recorded, before files are written).
"""

from __future__ import annotations

from collections.abc import Sequence

from dvengine.errors import (
    ProtocolError,
    ReservedChangeDataColumnsError,
    ReservedChangeDataColumnsOnWriteError,
    UnsupportedFeatureError,
)
from dvengine.protocol.actions import Action, AddFile, Metadata, Protocol
from dvengine.protocol.features import (
    DELETION_VECTORS,
    ENABLE_CHANGE_DATA_FEED,
    change_data_feed_enabled,
    check_writable,
    writer_features,
)
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


CHANGE_DATA_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def check_change_data_columns(new: Metadata, old: Metadata | None) -> None:
    """Refuse metadata with the change data feed on and a top-level column the feed reserves.

    Feed rows are the table's columns plus ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp``, and change files the table's columns plus ``_change_type``: a table
    column of one of those names made every later DML write or feed read fail (a duplicate
    field) after the metadata was committed. Delta's ``CDCReader.checkMetadataChange`` refuses the
    metadata instead; the error says whether the feed was being enabled or was on already."""
    if not change_data_feed_enabled(new):
        return
    reserved = [name for name in parse_schema(new.schema_string).field_names if name in CHANGE_DATA_COLUMNS]
    if not reserved:
        return
    columns = "[" + ",".join(reserved) + "]"
    if old is not None and change_data_feed_enabled(old):
        raise ReservedChangeDataColumnsOnWriteError(
            f"The write contains reserved columns {columns} that are used internally as metadata for Change Data "
            f"Feed. To write to the table either rename/drop these columns or disable Change Data Feed on the "
            f"table by setting {ENABLE_CHANGE_DATA_FEED} to false (RESERVED_CDC_COLUMNS_ON_WRITE); nothing was committed"
        )
    raise ReservedChangeDataColumnsError(
        f"Unable to enable Change Data Capture on the table. The table already contains reserved columns {columns} "
        "that will be used internally as metadata for the table's Change Data Feed. To enable Change Data Feed on "
        "the table rename/drop these columns (DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS); nothing was committed"
    )


def validate_commit(actions: Sequence[Action], protocol: Protocol, metadata: Metadata) -> None:
    """Raise if ``actions`` may not be committed to a table with this (new) protocol and metadata."""
    check_writable(protocol, metadata)
    adds = [a for a in actions if isinstance(a, AddFile)]
    check_unique_adds(adds)
    check_dv_adds(adds, protocol)
    check_partition_values(adds, metadata)
