"""Per-file Delta statistics computed from a Parquet footer, without reading any data page.

Writers already compute min/max/null counts per row group, so a freshly written file's footer
holds everything ``add.stats`` needs; reading it back costs one small read per file instead of
a second pass over the data. The one rule that matters: a bound we publish must hold for every
row, because data skipping *drops files* on the strength of it. So whenever the footer cannot
prove a bound (a row group without statistics, a float column that may hide NaN, a string that
cannot be truncated to a valid upper bound) the bound is omitted, which readers treat as
"unknown". Details and the reasons for each choice: ``spec_notes/stats.md``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from dvengine.errors import InvalidArgumentError
from dvengine.protocol.schema import ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructField, StructType
from dvengine.protocol.stats import FileStats

MAX_CODE_POINT = "\U0010ffff"
_MIN_MAX_TYPES = frozenset({"long", "integer", "short", "byte", "string", "date", "timestamp", "timestamp_ntz"})


@dataclass(frozen=True, slots=True)
class _Leaf:
    """One stats-eligible column: its physical path and Delta type."""

    path: tuple[str, ...]
    data_type: DataType


def _leaves(fields: tuple[StructField, ...], prefix: tuple[str, ...]) -> Iterator[_Leaf]:
    for f in fields:
        path = (*prefix, f.physical_name)
        if isinstance(f.type, StructType):
            yield from _leaves(f.type.fields, path)
        else:
            yield _Leaf(path, f.type)


def indexed_leaves(schema: StructType, file_columns: set[str], num_indexed_cols: int) -> list[_Leaf]:
    """The first ``num_indexed_cols`` leaf columns (``-1``: all) of the columns stored in the file.

    Columns absent from the file (partition columns) are not counted, as in Delta, where the
    limit applies to the data schema.
    """
    stored = tuple(f for f in schema.fields if f.physical_name in file_columns)
    leaves = list(_leaves(stored, ()))
    return leaves if num_indexed_cols < 0 else leaves[:num_indexed_cols]


# --- value formatting -------------------------------------------------------------------------


def _format_timestamp(value: dt.datetime, round_up: bool, utc: bool) -> str:
    if utc and value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    value = value.replace(tzinfo=None)
    if round_up and value.microsecond % 1000:
        value = value + dt.timedelta(microseconds=1000 - value.microsecond % 1000)
    else:
        value = value - dt.timedelta(microseconds=value.microsecond % 1000)
    text = value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    return text + "Z" if utc else text


def _decimal_bound(value: decimal.Decimal, precision: int, round_up: bool) -> int | float | None:
    """A JSON number that bounds ``value`` on the required side, or None if none is safe.

    JSON numbers go through Python floats here, so exact values are kept exact, integral values
    are written as integers, and anything else is rounded outward by one ulp; beyond 15 digits
    of precision an outward-rounded float could overflow the column type, so the bound is dropped.
    """
    if value == value.to_integral_value():
        return int(value)
    as_float = float(value)
    if decimal.Decimal(as_float) == value:
        return as_float
    if precision > 15:
        return None
    if round_up and decimal.Decimal(as_float) < value:
        as_float = math.nextafter(as_float, math.inf)
    elif not round_up and decimal.Decimal(as_float) > value:
        as_float = math.nextafter(as_float, -math.inf)
    return as_float


def truncate_string_max(value: str, prefix_len: int) -> str | None:
    """Smallest-effort upper bound of ``value`` at most ~``prefix_len`` characters long.

    ``prefix + U+10FFFF`` is >= every string starting with ``prefix`` whose next character is
    below U+10FFFF (UTF-8 byte order equals code point order). If the next character *is*
    U+10FFFF the prefix is extended past it; if no such cut exists within twice the prefix
    length, there is no short upper bound and None is returned (omit the max).
    """
    if len(value) <= prefix_len:
        return value
    for cut in range(prefix_len, min(len(value), 2 * prefix_len)):
        if value[cut] != MAX_CODE_POINT:
            return value[:cut] + MAX_CODE_POINT
    return None


def _format_bound(value: Any, data_type: DataType, is_max: bool, string_prefix_len: int) -> Any:
    """JSON value of one bound in Delta's stats format, or None to omit it."""
    if isinstance(data_type, DecimalType):
        if not isinstance(value, decimal.Decimal):
            return None
        return _decimal_bound(value, data_type.precision, round_up=is_max)
    name = data_type.name
    if name == "string":
        if not isinstance(value, str):
            return None
        return truncate_string_max(value, string_prefix_len) if is_max else value[:string_prefix_len]
    if name in ("timestamp", "timestamp_ntz"):
        if not isinstance(value, dt.datetime):
            return None  # nanosecond timestamps come back as other types: no safe ms bound
        return _format_timestamp(value, round_up=is_max, utc=name == "timestamp")
    if name == "date":
        return value.isoformat() if isinstance(value, dt.date) and not isinstance(value, dt.datetime) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _eligible_for_min_max(data_type: DataType) -> bool:
    if isinstance(data_type, DecimalType):
        return True
    # float/double: footers written by Arrow and parquet-mr leave NaN out of min/max, while Spark
    # orders NaN above every number, so a footer max could wrongly skip a file holding NaN.
    return isinstance(data_type, PrimitiveType) and data_type.name in _MIN_MAX_TYPES


def _eligible_for_null_count(data_type: DataType) -> bool:
    # A leaf's null count inside a list/map counts null *elements*, not null rows: skip those.
    return not isinstance(data_type, (ArrayType, MapType))


# --- merging row groups ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Acc:
    minimum: Any = None
    maximum: Any = None
    min_max_known: bool = True
    null_count: int = 0
    null_count_known: bool = True


def _accumulate(acc: _Acc, column: pq.ColumnChunkMetaData) -> None:
    st = column.statistics
    if st is None:
        acc.min_max_known = False
        acc.null_count_known = False
        return
    if st.has_null_count:
        acc.null_count += st.null_count
    else:
        acc.null_count_known = False
    if st.has_min_max:
        acc.minimum = st.min if acc.minimum is None or st.min < acc.minimum else acc.minimum
        acc.maximum = st.max if acc.maximum is None or st.max > acc.maximum else acc.maximum
    elif not (st.has_null_count and st.null_count == column.num_values):
        acc.min_max_known = False  # values exist but no bounds were recorded


def _put_nested(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = target
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


DEFAULT_NUM_INDEXED_COLS = 32


def num_indexed_cols(configuration: Mapping[str, str]) -> int:
    """``delta.dataSkippingNumIndexedCols`` of a table (default 32; -1 = all columns): how many
    leaf columns every writer, on every executor, collects min/max/nullCount for."""
    raw = configuration.get("delta.dataSkippingNumIndexedCols", str(DEFAULT_NUM_INDEXED_COLS))
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgumentError(f"delta.dataSkippingNumIndexedCols must be an integer, got {raw!r}") from None


def stats_from_parquet_metadata(
    md: pq.FileMetaData,
    schema: StructType,
    num_indexed_cols: int = 32,
    string_prefix_len: int = 32,
) -> FileStats:
    """Delta ``add.stats`` for a freshly written file (``tightBounds`` true).

    ``schema`` is the table schema; stats are keyed by physical names and nested like structs.
    Columns of the schema missing from the file (partition columns) are ignored.
    """
    column_index: dict[tuple[str, ...], int] = {}
    if md.num_row_groups > 0:
        first = md.row_group(0)
        for j in range(first.num_columns):
            column_index[tuple(first.column(j).path_in_schema.split("."))] = j
    file_top_level = {md.schema.column(j).path.split(".")[0] for j in range(md.num_columns)}

    min_values: dict[str, Any] = {}
    max_values: dict[str, Any] = {}
    null_count: dict[str, Any] = {}
    for leaf in indexed_leaves(schema, file_top_level, num_indexed_cols):
        found = column_index.get(leaf.path)
        if found is None:
            if md.num_row_groups == 0 and _eligible_for_null_count(leaf.data_type):
                _put_nested(null_count, leaf.path, 0)
            continue  # complex column (several Parquet leaves) or no row groups
        acc = _Acc()
        for i in range(md.num_row_groups):
            _accumulate(acc, md.row_group(i).column(found))
        if acc.null_count_known and _eligible_for_null_count(leaf.data_type):
            _put_nested(null_count, leaf.path, acc.null_count)
        if acc.min_max_known and acc.minimum is not None and _eligible_for_min_max(leaf.data_type):
            low = _format_bound(acc.minimum, leaf.data_type, False, string_prefix_len)
            high = _format_bound(acc.maximum, leaf.data_type, True, string_prefix_len)
            if low is not None:
                _put_nested(min_values, leaf.path, low)
            if high is not None:
                _put_nested(max_values, leaf.path, high)
    return FileStats(
        num_records=md.num_rows,
        min_values=min_values,
        max_values=max_values,
        null_count=null_count,
        tight_bounds=True,
    )
