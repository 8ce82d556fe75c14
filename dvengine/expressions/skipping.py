"""Partition pruning and min/max/nullCount data skipping.

Both answer one question soundly: "could any row of this file satisfy the predicate?". A False
answer lets the planner drop the file, so it must only be given when no row can match; any doubt
(missing stats, unknown functions, unusual types) answers True. The heavy lifting is the
three-valued interpreter in :mod:`dvengine.expressions.interpret`; this module only says what
each column may hold in a given file.
"""

from __future__ import annotations

import decimal
import math
import struct
from collections.abc import Collection, Mapping
from typing import Any

from dvengine.expressions.bind import BoundPredicate
from dvengine.expressions.interpret import Interpreter
from dvengine.expressions.kinds import Kind, is_integral, kind_of
from dvengine.expressions.literals import parse_date_text, parse_timestamp_text
from dvengine.expressions.ranges import NULL_ONLY, TOP, ZONE_MARGIN_MICROS, Range, typed_point
from dvengine.expressions.refs import ColumnRef
from dvengine.protocol.schema import DataType, PrimitiveType, StructType
from dvengine.protocol.stats import FileStats

# Delta writes timestamp stats with millisecond precision while data has microseconds.
_STATS_TIMESTAMP_SLACK = 1000


def _is_float32(data_type: DataType) -> bool:
    return isinstance(data_type, PrimitiveType) and data_type.name == "float"


def _as_float32(value: float) -> float:
    """The double Spark sees for a FLOAT column value (floats are widened, not re-parsed)."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _partition_lookup(partition_values: Mapping[str, object]) -> dict[str, tuple[bool, object]]:
    return {key.lower(): (True, value) for key, value in partition_values.items()}


def _is_target(ref: ColumnRef, target_alias: str | None) -> bool:
    """Unqualified refs, and refs through ``target_alias``, denote the file's own columns."""
    return ref.qualifier is None or (target_alias is not None and ref.qualifier.lower() == target_alias.lower())


def _partition_range(
    ref: ColumnRef, lookup: Mapping[str, tuple[bool, object]], target_alias: str | None
) -> Range | None:
    if len(ref.path) != 1:
        return None
    found = lookup.get(ref.key.lower())
    if found is None and _is_target(ref, target_alias):
        found = lookup.get(ref.top.lower())
    if found is None:
        return None
    value = found[1]
    data_type = ref.leaf.type
    if _is_float32(data_type) and isinstance(value, float) and math.isfinite(value):
        value = _as_float32(value)
    return typed_point(kind_of(data_type), value, is_integral(data_type))


def partition_might_match(
    pred: BoundPredicate, partition_values: Mapping[str, object], *, target_alias: str | None = None
) -> bool:
    """False only if no row with these (typed, logical-name keyed) partition values can match.

    Columns that are not partition columns may hold anything, NULL included. For a MERGE
    predicate, ``target_alias`` names the alias whose columns the partition values describe
    (keys may also be spelled ``alias.name``); other qualified columns are unknown.
    """
    lookup = _partition_lookup(partition_values)

    def columns(ref: ColumnRef) -> Range:
        found = _partition_range(ref, lookup, target_alias)
        return TOP if found is None else found

    return True in Interpreter(columns).truth(pred.tree)


def is_partition_only(pred: BoundPredicate, partition_columns: Collection[str]) -> bool:
    """True when the predicate reads partition columns only, so pruning decides it exactly."""
    return pred.references_only(partition_columns)


def _nested(stats: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = stats
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def _stat_bound(raw: Any, data_type: DataType, upper: bool) -> Any:
    """A min (upper=False) or max (upper=True) stat value in the comparison domain, or None."""
    if raw is None or isinstance(raw, Mapping):
        return None
    kind = kind_of(data_type)
    if kind == Kind.NUMERIC:
        if isinstance(raw, str):
            try:
                raw = decimal.Decimal(raw)
            except decimal.InvalidOperation:
                return None
        if isinstance(raw, bool) or not isinstance(raw, (int, float, decimal.Decimal)):
            return None
        if isinstance(raw, decimal.Decimal):
            return raw if raw.is_finite() else None
        if isinstance(raw, float):
            if math.isnan(raw):
                return None
            if _is_float32(data_type) and math.isfinite(raw):
                raw = _as_float32(raw)
                # one float32 ulp of slack: the writer may have rounded differently
                return raw + abs(raw) * 2**-22 + 1e-45 if upper else raw - abs(raw) * 2**-22 - 1e-45
            # JSON text was rounded to the nearest double: step one ulp outwards
            return math.nextafter(raw, math.inf if upper else -math.inf)
        return raw
    if kind == Kind.STRING:
        return raw if isinstance(raw, str) else None
    if kind == Kind.DATE:
        return parse_date_text(raw[:10]) if isinstance(raw, str) else None
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ) and isinstance(raw, str):
        parsed = parse_timestamp_text(raw)
        if parsed is None:
            return None
        # Formatting an instant prints its millisecond field (a floor), so a min is already a
        # lower bound and a max needs up to 999 us more. A zone-less text could be any zone.
        low_slack, high_slack = 0, _STATS_TIMESTAMP_SLACK
        instant = parsed.wall_micros
        if kind == Kind.TIMESTAMP:
            utc = parsed.utc_micros()
            if utc is None:
                low_slack = high_slack = ZONE_MARGIN_MICROS
            else:
                instant = utc
        return instant + high_slack if upper else instant - low_slack
    if kind == Kind.BOOLEAN and isinstance(raw, bool):
        return raw
    return None


def _stats_range(ref: ColumnRef, stats: FileStats) -> Range:
    path = ref.physical_path
    data_type = ref.leaf.type
    kind = kind_of(data_type)
    nulls = _nested(stats.null_count, path)
    null_count = nulls if isinstance(nulls, int) and not isinstance(nulls, bool) else None
    may_null = null_count is None or null_count > 0
    all_null = (
        stats.tight_bounds is not False
        and stats.num_records is not None
        and null_count is not None
        and null_count >= stats.num_records
    )
    if all_null:
        return NULL_ONLY if null_count else Range(Kind.NULL, may_null=False, may_value=False)
    if kind in (Kind.COMPLEX, Kind.BINARY, Kind.UNKNOWN):
        return Range(Kind.UNKNOWN, may_null=may_null)
    lo = _stat_bound(_nested(stats.min_values, path), data_type, upper=False)
    hi = _stat_bound(_nested(stats.max_values, path), data_type, upper=True)
    return Range(kind, lo, hi, may_null, True, is_integral(data_type))


def stats_might_match(
    pred: BoundPredicate,
    stats: FileStats | None,
    schema: StructType,
    partition_values: Mapping[str, object],
    *,
    target_alias: str | None = None,
) -> bool:
    """False only if no row of the file can satisfy ``pred``, judging by its stats.

    Stats are keyed by physical names (column mapping); missing stats or columns mean "may hold
    anything". Partition columns use ``partition_values`` instead. ``schema`` is the table schema
    the predicate was bound to; bound references already carry their fields (and physical names),
    so it is accepted for interface stability only. For a MERGE predicate, only unqualified refs
    and refs through ``target_alias`` read the file's stats; other aliases (the source) are unknown.
    """
    lookup = _partition_lookup(partition_values)

    def columns(ref: ColumnRef) -> Range:
        return file_column_range(ref, stats, lookup, target_alias)

    return True in Interpreter(columns).truth(pred.tree)


def partition_lookup(partition_values: Mapping[str, object]) -> dict[str, tuple[bool, object]]:
    """The lookup :func:`file_column_range` takes, from typed logical-name partition values."""
    return _partition_lookup(partition_values)


def file_column_range(
    ref: ColumnRef,
    stats: FileStats | None,
    lookup: Mapping[str, tuple[bool, object]],
    target_alias: str | None = None,
) -> Range:
    """What ``ref`` may hold in one file: its partition value, else its stats, else anything.

    The one definition both the per-file path (:func:`stats_might_match`) and the vectorized
    one (:mod:`dvengine.expressions.vector_skipping`) use, so they cannot disagree on it.
    """
    found = _partition_range(ref, lookup, target_alias)
    if found is not None:
        return found
    if stats is None or not _is_target(ref, target_alias):
        return TOP
    return _stats_range(ref, stats)
