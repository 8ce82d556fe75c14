"""Row tracking (the ``rowTracking`` writer feature): the log side, as PROTOCOL.md "Row Tracking" says.

*Supported* (``rowTracking`` in ``writerFeatures``, not suspended): every ``add`` a writer commits
carries ``baseRowId`` (fresh row ids ``baseRowId + row index``, unique in every version) and
``defaultRowCommitVersion`` (the version of the commit that first added the file); re-adds keep
both from the file's last ``add``; the highest fresh id handed out is the ``rowIdHighWaterMark`` of
the ``delta.rowTracking`` domain, and new ids start above it. *Enabled* (also
``delta.enableRowTracking=true``): rows copied or updated into new files keep their stable id (and,
when only copied, their commit version) in hidden *materialized* columns whose names are in the
configuration. This module is the pure part: the names, the high-water mark, and the fresh
assignment a transaction applies to its actions when it serializes a commit for a version (a lost
race re-assigns against the winner's mark, exactly as Delta's ``RowId.assignFreshRowIds``).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence

from dvengine.errors import InvalidArgumentError, ProtocolError, UnsupportedFeatureError
from dvengine.protocol.actions import Action, AddFile, DomainMetadata, Protocol
from dvengine.protocol.feature_catalog import with_feature

FEATURE = "rowTracking"
DOMAIN_METADATA_FEATURE = "domainMetadata"
DOMAIN = "delta.rowTracking"
ENABLE = "delta.enableRowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
# Delta's MaterializedRowId / MaterializedRowCommitVersion prefixes, followed by a random UUID.
ROW_ID_PREFIX = "_row-id-col-"
ROW_COMMIT_VERSION_PREFIX = "_row-commit-version-col-"
MISSING_HIGH_WATER_MARK = -1  # Delta's RowId.MISSING_HIGH_WATER_MARK: the first file gets baseRowId 0
# commitInfo.tags Delta writes (DeltaCommitTag.scala). PRESERVED_TAG: "true" on DELETE, UPDATE,
# MERGE and OPTIMIZE (REORG, auto compaction: the same OptimizeExecutor) of a table whose read
# snapshot has row tracking enabled (RowTracking.addPreservedRowTrackingTagIfNotSet); "false" on a
# commit that adopted a concurrent enablement (its rows were written before ids were kept); absent
# means "not preserved". ENABLEMENT_ONLY_TAG: "true" on an ALTER whose only property is the enable.
PRESERVED_TAG = "delta.rowTracking.preserved"
ENABLEMENT_ONLY_TAG = "rowTrackingEnablementOnly"
BACKFILL_OPERATION = "ROW TRACKING BACKFILL"  # Delta's separate backfill commit (DeltaOperations.RowTrackingBackfill)
PRESERVING_OPERATIONS = frozenset({"DELETE", "UPDATE", "MERGE", "OPTIMIZE", "REORG"})
# The configuration keys an enablement adds (Delta's metadataConfigurationChangeAllowList for row tracking).
ENABLEMENT_KEYS = frozenset({ENABLE, ROW_ID_COLUMN_KEY, ROW_COMMIT_VERSION_COLUMN_KEY})


def _true(configuration: Mapping[str, str], key: str) -> bool:
    return str(configuration.get(key, "false")).lower() == "true"


def supported(writer_features: frozenset[str], configuration: Mapping[str, str]) -> bool:
    """Whether writers must assign ``baseRowId`` / ``defaultRowCommitVersion`` (feature on, not suspended)."""
    return FEATURE in writer_features and not _true(configuration, SUSPENDED)


def enabled(configuration: Mapping[str, str]) -> bool:
    """Whether stable ids must be preserved (materialized) when rows are copied or updated."""
    return _true(configuration, ENABLE)


@dataclasses.dataclass(frozen=True, slots=True)
class MaterializedColumns:
    """Physical names of the hidden columns holding preserved row ids and row commit versions."""

    row_id: str
    row_commit_version: str


def materialized_columns(configuration: Mapping[str, str]) -> MaterializedColumns | None:
    """The names from the configuration, or None when the table has not been given them."""
    row_id = configuration.get(ROW_ID_COLUMN_KEY)
    version = configuration.get(ROW_COMMIT_VERSION_COLUMN_KEY)
    if not row_id or not version:
        return None
    return MaterializedColumns(row_id, version)


def required_materialized_columns(configuration: Mapping[str, str], table: str) -> MaterializedColumns:
    names = materialized_columns(configuration)
    if names is None:
        raise ProtocolError(
            f"table {table} has {ENABLE}=true but its configuration lacks {ROW_ID_COLUMN_KEY} / "
            f"{ROW_COMMIT_VERSION_COLUMN_KEY}; stable row ids cannot be preserved"
        )
    return names


def enable_configuration(configuration: Mapping[str, str], column_names: Sequence[str]) -> dict[str, str]:
    """``configuration`` with the materialized column names Delta generates on enable (kept if present).

    The names must differ from every (physical) column name of the schema, now and later; a
    random UUID suffix is how Delta guarantees it, and an improbable clash is still refused.
    """
    out = dict(configuration)
    taken = {c.lower() for c in column_names}
    for key, prefix in ((ROW_ID_COLUMN_KEY, ROW_ID_PREFIX), (ROW_COMMIT_VERSION_COLUMN_KEY, ROW_COMMIT_VERSION_PREFIX)):
        if not out.get(key):
            out[key] = prefix + str(uuid.uuid4())
        if out[key].lower() in taken:
            raise InvalidArgumentError(f"materialized row tracking column {out[key]!r} ({key}) clashes with a table column")
    if _true(out, SUSPENDED):
        raise InvalidArgumentError(f"{ENABLE}=true cannot be set together with {SUSPENDED}=true (PROTOCOL.md)")
    return out


def preserved_tags(operation: str, read_configuration: Mapping[str, str] | None) -> dict[str, str]:
    """The commit tags Delta writes for ``operation`` on a table read with ``read_configuration``:
    ``{PRESERVED_TAG: "true"}`` for the commands that keep stable ids when row tracking is enabled
    (they carry the materialized columns), nothing otherwise (absence = not preserved)."""
    if read_configuration is None or operation not in PRESERVING_OPERATIONS or not enabled(read_configuration):
        return {}
    return {PRESERVED_TAG: "true"}


def with_row_tracking(protocol: Protocol) -> Protocol:
    """``protocol`` on writer 7 listing ``domainMetadata`` and ``rowTracking`` (both writer-only)."""
    return with_feature(with_feature(protocol, DOMAIN_METADATA_FEATURE), FEATURE)


def high_water_mark(domains: Mapping[str, DomainMetadata]) -> int:
    """The ``rowIdHighWaterMark`` of a snapshot's domains (-1 when none was ever written)."""
    domain = domains.get(DOMAIN)
    if domain is None or domain.removed:
        return MISSING_HIGH_WATER_MARK
    return mark_of(domain)


def mark_of(domain: DomainMetadata) -> int:
    try:
        value = json.loads(domain.configuration or "{}")["rowIdHighWaterMark"]
        return int(value)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(
            f"domainMetadata {DOMAIN} has no integer rowIdHighWaterMark ({exc}): {domain.configuration[:200]!r}"
        ) from None


def domain_action(mark: int) -> DomainMetadata:
    """The domain as Delta writes it: ``{"rowIdHighWaterMark":N}``."""
    return DomainMetadata(DOMAIN, json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":")), False)


def assign_fresh(actions: Sequence[Action], mark: int, version: int, table_mark: int | None = None) -> tuple[list[Action], int]:
    """Actions with fresh ``baseRowId`` (above ``mark``) and ``defaultRowCommitVersion`` (= ``version``)
    on every ``add`` lacking them, plus the new ``delta.rowTracking`` domain when ids were handed out.

    ``table_mark``: the mark the table's log holds, when ``mark`` was raised above it (a CLONE
    carries its source's mark); the domain is written whenever the result differs from it.
    Returns (actions, new mark). An ``add`` without ``numRecords`` cannot get ids (Delta's
    rowIdAssignmentWithoutStats); a caller-written row tracking domain is refused, since only the
    assignment may move the mark.
    """
    out: list[Action] = []
    new_mark = mark
    for action in actions:
        if isinstance(action, DomainMetadata) and action.domain == DOMAIN:
            raise InvalidArgumentError(f"the {DOMAIN} domain is written only by row id assignment, not by a command")
        if isinstance(action, AddFile):
            base = action.base_row_id
            if base is None:
                records = action.num_records
                if records is None:
                    raise UnsupportedFeatureError(
                        f"add of {action.path} has no numRecords in its stats; row tracking cannot assign row ids to it"
                    )
                base = new_mark + 1
                new_mark += records
            commit_version = version if action.default_row_commit_version is None else action.default_row_commit_version
            if base != action.base_row_id or commit_version != action.default_row_commit_version:
                action = dataclasses.replace(action, base_row_id=base, default_row_commit_version=commit_version)
        out.append(action)
    if new_mark != (mark if table_mark is None else table_mark):
        out.append(domain_action(new_mark))
    return out, new_mark


# Internal Arrow column names under which a command carries each row's stable id and commit
# version from the file it was read from to the file it is written to (never written as such:
# the writer stores them under the table's materialized column names).
ROW_ID_COLUMN = "__dvengine_row_id"
ROW_COMMIT_VERSION_COLUMN = "__dvengine_row_commit_version"
INTERNAL_COLUMNS = (ROW_ID_COLUMN, ROW_COMMIT_VERSION_COLUMN)
