"""Skipping precision and the stats subtleties the property tests cannot reach.

Each case states by hand whether a file can hold a match; the stats are written the way Delta
writers write them (physical names, ms timestamps, truncated strings, loose bounds after DVs).
"""

from __future__ import annotations

import datetime as dt

import pytest

from dvengine.expressions import parse_predicate, partition_might_match, stats_might_match
from dvengine.protocol.schema import PrimitiveType, StructField, StructType
from dvengine.protocol.stats import FileStats

MAPPED = {"delta.columnMapping.physicalName": "col-a1"}
SCHEMA = StructType(
    (
        StructField("id", PrimitiveType("long"), metadata=MAPPED),
        StructField("name", PrimitiveType("string")),
        StructField("ts", PrimitiveType("timestamp")),
        StructField("f", PrimitiveType("float")),
        StructField(
            "nested",
            StructType(
                (StructField("v", PrimitiveType("integer"), metadata={"delta.columnMapping.physicalName": "col-v"}),)
            ),
            metadata={"delta.columnMapping.physicalName": "col-n"},
        ),
        StructField("part", PrimitiveType("date")),
    )
)
STATS = FileStats(
    num_records=10,
    min_values={"col-a1": 10, "name": "apple", "ts": "2024-01-01T00:00:00.000Z", "f": 1.1, "col-n": {"col-v": 5}},
    max_values={"col-a1": 20, "name": "mango", "ts": "2024-01-01T12:00:00.123Z", "f": 2.5, "col-n": {"col-v": 7}},
    null_count={"col-a1": 0, "name": 3, "ts": 0, "f": 0, "col-n": {"col-v": 0}},
)
PART = {"part": dt.date(2024, 3, 1)}


@pytest.mark.parametrize(
    ("text", "might"),
    [
        ("id = 15", True),
        ("id = 9", False),
        ("id < 10", False),
        ("id <= 10", True),
        ("id > 20", False),
        ("id >= 20", True),
        ("id <> 15", True),
        ("id IN (1, 2, 30)", False),
        ("id IN (1, 12)", True),
        ("id NOT IN (1, NULL)", False),  # never TRUE
        ("id BETWEEN 21 AND 30", False),
        ("NOT (id BETWEEN 5 AND 25)", False),
        ("NOT (id < 30)", False),
        ("id IS NULL", False),
        ("id IS NOT NULL", True),
        ("name IS NULL", True),
        ("NOT (name = 'zebra')", True),  # no row TRUE for name='zebra' but NOT is TRUE for non-null
        ("name LIKE 'b%'", True),
        ("name LIKE 'z%'", False),
        ("name LIKE 'a%'", True),
        ("name LIKE 'ma%'", True),
        ("name LIKE 'mb%'", False),
        ("name NOT LIKE '%'", False),
        ("name = 'zebra'", False),
        ("name > 'mango'", False),
        ("name >= 'mango'", True),
        ("nested.v = 6", True),
        ("nested.v = 8", False),
        ("part = '2024-03-01'", True),
        ("part > DATE '2024-03-01'", False),
        ("part IS NULL", False),
        ("part = '2024-03-01' AND id = 9", False),
        ("part = '2024-03-02' OR id = 12", True),
        ("ts > '2024-01-01T12:00:00.123Z'", True),  # max has ms precision; data may be .123999
        ("ts > '2024-01-01T12:00:00.124Z'", False),
        ("ts < '2024-01-01T00:00:00Z'", False),
        ("ts > TIMESTAMP '2024-01-01 12:00:01'", True),  # zone-less: session time zone unknown
        ("ts > TIMESTAMP '2024-01-03 12:00:01'", False),
        ("f > 2.5", True),  # float 2.5 is exact; > needs a value above
        ("f < 1.1", True),  # float32(1.1) > 1.1 as double, but widened bound keeps it
        ("f > 2.6", False),
        ("id * 2 = 2", True),  # arithmetic on data columns is unknown
        ("upper(name) = 'Z'", True),
    ],
)
def test_stats_skipping_cases(text: str, might: bool) -> None:
    assert stats_might_match(parse_predicate(text, SCHEMA), STATS, SCHEMA, PART) is might


def test_missing_stats_or_columns_might_match() -> None:
    pred = parse_predicate("id = 999", SCHEMA)
    assert stats_might_match(pred, None, SCHEMA, PART)
    assert stats_might_match(pred, FileStats(num_records=10), SCHEMA, PART)
    logical_keyed = FileStats(10, {"id": 1}, {"id": 2}, {"id": 0})  # wrong (logical) key: unknown
    assert stats_might_match(pred, logical_keyed, SCHEMA, PART)


def test_all_null_reasoning_needs_tight_bounds() -> None:
    all_null = FileStats(num_records=4, null_count={"name": 4})
    pred = parse_predicate("name = 'x'", SCHEMA)
    assert not stats_might_match(pred, all_null, SCHEMA, PART)
    assert not stats_might_match(parse_predicate("name IS NOT NULL", SCHEMA), all_null, SCHEMA, PART)
    loose = all_null.with_loose_bounds()
    assert stats_might_match(pred, loose, SCHEMA, PART)
    no_nulls = FileStats(num_records=4, null_count={"name": 0}, tight_bounds=False)
    assert not stats_might_match(parse_predicate("name IS NULL", SCHEMA), no_nulls, SCHEMA, PART)


def test_truncated_string_max_is_an_inclusive_bound() -> None:
    # Delta truncates long strings: min to a prefix, max to a prefix rounded up.
    stats = FileStats(2, {"name": "abc"}, {"name": "abd\uffff"}, {"name": 0})
    assert stats_might_match(parse_predicate("name = 'abdzzzzzzzz'", SCHEMA), stats, SCHEMA, PART)
    assert stats_might_match(parse_predicate("name LIKE 'abd%'", SCHEMA), stats, SCHEMA, PART)
    assert not stats_might_match(parse_predicate("name LIKE 'abe%'", SCHEMA), stats, SCHEMA, PART)
    assert not stats_might_match(parse_predicate("name < 'abc'", SCHEMA), stats, SCHEMA, PART)


def test_partition_pruning_three_valued() -> None:
    null_part = {"part": None}
    assert not partition_might_match(parse_predicate("part = '2024-03-01'", SCHEMA), null_part)
    assert not partition_might_match(parse_predicate("NOT (part = '2024-03-01')", SCHEMA), null_part)
    assert partition_might_match(parse_predicate("part IS NULL", SCHEMA), null_part)
    # other columns are unknown, so an OR with them keeps the file
    assert partition_might_match(parse_predicate("part = '2024-01-01' OR id = 1", SCHEMA), PART)
    assert not partition_might_match(parse_predicate("part = '2024-01-01' AND id = 1", SCHEMA), PART)
    # NOT IN with NULL can never be TRUE
    assert not partition_might_match(parse_predicate("part NOT IN ('2024-01-01', NULL)", SCHEMA), PART)


def test_merge_predicate_only_reads_target_stats() -> None:
    source = StructType((StructField("id", PrimitiveType("long")),))
    pred = parse_predicate("t.id = s.id AND t.id = 999", SCHEMA, {"t": SCHEMA, "s": source})
    assert stats_might_match(pred, STATS, SCHEMA, PART)  # target alias unknown: no skipping
    assert not stats_might_match(pred, STATS, SCHEMA, PART, target_alias="t")
    src_only = parse_predicate("s.id = 999", SCHEMA, {"t": SCHEMA, "s": source})
    assert stats_might_match(src_only, STATS, SCHEMA, PART, target_alias="t")
    assert not partition_might_match(
        parse_predicate("t.part = '2024-01-01'", SCHEMA, {"t": SCHEMA, "s": source}), PART, target_alias="t"
    )
