"""Stats from Parquet footers vs truth computed independently with pyarrow.compute over the data."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from dvengine.protocol.schema import from_arrow_schema, parse_schema
from dvengine.protocol.stats import FileStats
from dvengine.writing.stats import MAX_CODE_POINT, stats_from_parquet_metadata, truncate_string_max

UTC = dt.UTC


def _write(tmp_path: Path, table: pa.Table, **kwargs: Any) -> pq.FileMetaData:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kwargs)
    return pq.read_metadata(path)


def _truth(col: pa.ChunkedArray) -> tuple[Any, Any, int]:
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py(), pc.sum(pc.is_null(col)).as_py() or 0


def _table() -> pa.Table:
    return pa.table(
        {
            "i": pa.array([5, None, -3, 12, 7, None], pa.int64()),
            "s": pa.array(["pear", "apple", None, "zebra", "mango", "kiwi"]),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC), None, dt.datetime(2023, 5, 6, 7, 8, 9, 999999, tzinfo=UTC),
                 dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2020, 1, 1, tzinfo=UTC), None],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array([dt.date(2024, 2, 29), dt.date(1999, 12, 31), None, None, dt.date(2000, 1, 1), dt.date(2010, 1, 1)]),
            "dec": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50"), None, decimal.Decimal("0.30"),
                             decimal.Decimal("100.00"), None], pa.decimal128(10, 2)),
            "st": pa.array([{"a": 1, "b": "x"}, None, {"a": 9, "b": None}, {"a": -2, "b": "y"}, None, {"a": None, "b": "q"}]),
            "bin": pa.array([b"x", None, b"y", b"z", None, None]),
            "f": pa.array([1.0, float("nan"), 2.0, None, 0.5, -1.0]),
            "arr": pa.array([[1], None, [], [2, 3], None, [None]], pa.list_(pa.int64())),
        }
    )


def test_stats_match_truth_over_several_row_groups(tmp_path: Path) -> None:
    table = _table()
    md = _write(tmp_path, table, row_group_size=2)
    assert md.num_row_groups == 3
    s = stats_from_parquet_metadata(md, from_arrow_schema(table.schema))
    assert s.num_records == 6 and s.tight_bounds is True

    lo, hi, nulls = _truth(table["i"])
    assert (s.min_values["i"], s.max_values["i"], s.null_count["i"]) == (lo, hi, nulls)
    lo, hi, nulls = _truth(table["s"])
    assert (s.min_values["s"], s.max_values["s"], s.null_count["s"]) == (lo, hi, nulls)
    lo, hi, nulls = _truth(table["d"])
    assert (s.min_values["d"], s.max_values["d"], s.null_count["d"]) == (lo.isoformat(), hi.isoformat(), nulls)
    lo, hi, nulls = _truth(table["dec"])
    assert decimal.Decimal(str(s.min_values["dec"])) == lo and decimal.Decimal(str(s.max_values["dec"])) == hi
    assert s.null_count["dec"] == nulls

    # timestamps: ms precision, min floored, max rounded up to the next ms
    lo, hi, nulls = _truth(table["ts"])
    assert s.min_values["ts"] == "2020-01-01T00:00:00.000Z"
    assert s.max_values["ts"] == "2024-01-01T00:00:00.002Z"
    assert s.null_count["ts"] == nulls
    parse = lambda text: dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)  # noqa: E731
    assert parse(s.min_values["ts"]) <= lo and parse(s.max_values["ts"]) >= hi

    # nested struct, keyed like the schema; a null struct counts as null for its leaves (as Spark's IS NULL)
    a = pc.struct_field(table["st"], [0])
    b = pc.struct_field(table["st"], [1])
    assert s.min_values["st"] == {"a": -2, "b": "q"} and s.max_values["st"] == {"a": 9, "b": "y"}
    assert s.null_count["st"] == {"a": pc.sum(pc.is_null(a)).as_py(), "b": pc.sum(pc.is_null(b)).as_py()}

    # binary: null count only; float: no bounds (NaN is invisible to footers); arrays: skipped entirely
    assert "bin" not in s.min_values and s.null_count["bin"] == 3
    assert "f" not in s.min_values and "f" not in s.max_values
    assert "arr" not in s.min_values and "arr" not in s.null_count

    # the JSON form keeps decimals as numbers
    obj = json.loads(s.to_json_string())
    assert obj["minValues"]["dec"] == -3.5 and isinstance(obj["maxValues"]["dec"], int)
    assert FileStats.parse(s.to_json_string()) == s


def test_row_group_without_stats_omits_bounds(tmp_path: Path) -> None:
    table = pa.table({"a": [1, 2, 3], "b": [4, 5, 6]})
    md = _write(tmp_path, table, write_statistics=["a"])
    s = stats_from_parquet_metadata(md, from_arrow_schema(table.schema))
    assert s.min_values == {"a": 1} and s.max_values == {"a": 3}
    assert "b" not in s.null_count


def test_all_null_row_group_does_not_hide_bounds(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([None, None, 4, 9], pa.int32())})
    md = _write(tmp_path, table, row_group_size=2)
    s = stats_from_parquet_metadata(md, from_arrow_schema(table.schema))
    assert (s.min_values["a"], s.max_values["a"], s.null_count["a"]) == (4, 9, 2)


def test_num_indexed_cols_counts_leaves_of_file_columns(tmp_path: Path) -> None:
    table = pa.table({"x": [1], "st": pa.array([{"a": 1, "b": 2}]), "y": [3]})
    md = _write(tmp_path, table)
    schema = from_arrow_schema(table.schema)
    assert set(stats_from_parquet_metadata(md, schema, num_indexed_cols=2).min_values) == {"x", "st"}
    assert stats_from_parquet_metadata(md, schema, num_indexed_cols=2).min_values["st"] == {"a": 1}
    assert set(stats_from_parquet_metadata(md, schema, num_indexed_cols=-1).min_values) == {"x", "st", "y"}
    assert stats_from_parquet_metadata(md, schema, num_indexed_cols=0).min_values == {}


def test_physical_names_and_partition_columns(tmp_path: Path) -> None:
    schema = parse_schema(json.dumps({"type": "struct", "fields": [
        {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        {"name": "v", "type": "long", "nullable": True,
         "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-abc"}},
    ]}))
    md = _write(tmp_path, pa.table({"col-abc": [3, 1]}))
    s = stats_from_parquet_metadata(md, schema, num_indexed_cols=1)
    assert s.min_values == {"col-abc": 1} and s.max_values == {"col-abc": 3}


def test_string_truncation_keeps_bounds(tmp_path: Path) -> None:
    long_low = "a" * 40 + "b"
    long_high = "z" * 50
    table = pa.table({"s": [long_low, "m", long_high]})
    s = stats_from_parquet_metadata(_write(tmp_path, table), from_arrow_schema(table.schema), string_prefix_len=8)
    assert s.min_values["s"] == "a" * 8 and s.max_values["s"] == "z" * 8 + MAX_CODE_POINT
    for v in table["s"].to_pylist():
        assert s.min_values["s"] <= v <= s.max_values["s"]
        assert s.min_values["s"].encode() <= v.encode() <= s.max_values["s"].encode()  # UTF-8 byte order too


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(["a", "b", "é", "\U0001f600", MAX_CODE_POINT]), max_size=12), min_size=1),
       st.integers(min_value=1, max_value=5))
def test_truncated_bounds_hold_for_every_value(values: list[str], prefix: int) -> None:
    low, high = min(values), max(values)
    bound = truncate_string_max(high, prefix)
    assert low[:prefix] <= low
    if bound is not None:
        assert all(v <= bound for v in values)
        assert all(v.encode() <= bound.encode() for v in values)
        assert len(bound) <= 2 * prefix + 1


def test_no_valid_upper_bound_omits_max(tmp_path: Path) -> None:
    table = pa.table({"s": [MAX_CODE_POINT * 10, "a"]})
    s = stats_from_parquet_metadata(_write(tmp_path, table), from_arrow_schema(table.schema), string_prefix_len=3)
    assert "s" not in s.max_values and s.min_values["s"] == "a"


def test_timestamp_ntz_and_inexact_decimal(tmp_path: Path) -> None:
    table = pa.table({
        "n": pa.array([dt.datetime(2024, 3, 1, 12, 0, 0, 123456), dt.datetime(2024, 3, 1)], pa.timestamp("us")),
        "d": pa.array([decimal.Decimal("0.10"), decimal.Decimal("0.30")], pa.decimal128(5, 2)),
        "big": pa.array([decimal.Decimal("12345678901234567890.12")] * 2, pa.decimal128(38, 2)),
    })
    s = stats_from_parquet_metadata(_write(tmp_path, table), from_arrow_schema(table.schema))
    assert s.min_values["n"] == "2024-03-01T00:00:00.000" and s.max_values["n"] == "2024-03-01T12:00:00.124"
    assert decimal.Decimal(s.min_values["d"]) <= decimal.Decimal("0.10")
    assert decimal.Decimal(s.max_values["d"]) >= decimal.Decimal("0.30")
    assert "big" not in s.min_values and "big" not in s.max_values and s.null_count["big"] == 0


def test_empty_file(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([], pa.int64())})
    s = stats_from_parquet_metadata(_write(tmp_path, table), from_arrow_schema(table.schema))
    assert s.num_records == 0 and s.min_values == {} and s.null_count.get("a", 0) == 0
