"""The vectorized stats skipping gives exactly the per-file interpreter's answer.

Truth is the per-file path (``Interpreter`` over ``file_column_range``, i.e. what
``stats_might_match`` computes), itself checked against DuckDB in test_expressions_properties.
Compared is the whole truth set of the predicate per file (may be TRUE / FALSE / NULL), not only
the skip verdict, on random predicates and random files: NULL and missing stats, all-NULL and
empty files, truncated strings, timestamps, loose bounds, odd stat types (mixed int/float,
decimals as strings, huge integers, wrong types), and a partition column.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from test_expressions_properties import COLUMNS, SCHEMA, SETTINGS, file_stats, files, predicates

import dvengine
from dvengine.api.table import DeltaTable
from dvengine.expressions import parse_predicate, partition_might_match, stats_might_match
from dvengine.expressions.interpret import Interpreter
from dvengine.expressions.ranges import Range
from dvengine.expressions.refs import ColumnRef
from dvengine.expressions.skipping import file_column_range, partition_lookup
from dvengine.expressions.vector_skipping import ColumnVec, VectorInterpreter, truth_sets
from dvengine.log import Snapshot
from dvengine.planning.candidates import VECTOR_MIN_FILES, plan_candidates, reads_partition_values
from dvengine.protocol.stats import FileStats

ODD_STATS: dict[str, list[Any]] = {
    "i": [2**70, -(2**70), 1.5, "3", True, None, {"nested": 1}],
    "l": [2**63, 7.0, "x", None],
    "x": [1, -3, "2.5", "NaN", float("inf"), -1e308, None],
    "s": [1, "\ud800", "zz", None],
    "d": ["2024-01-03T00:00:00", "bad", 5, None],
    "ts": ["2024-01-01T00:00:00", "2024-01-01T00:00:00.000+01:00", "junk", 3, None],
    "b": [True, False, 1, None],
}


@st.composite
def odd_stats(draw: st.DrawFn, base: FileStats) -> FileStats | None:
    """Stats as other writers (or bugs) leave them: missing, partial, wrongly typed."""
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return None
    if choice == 1:
        return base
    mins, maxs, nulls = dict(base.min_values), dict(base.max_values), dict(base.null_count)
    for column in draw(st.sets(st.sampled_from([c for c in COLUMNS if c != "p"]), max_size=3)):
        target = draw(st.sampled_from([mins, maxs, nulls]))
        target[column] = draw(st.sampled_from(ODD_STATS[column])) if target is not nulls else draw(
            st.sampled_from([0, 1, 100, None, "2", -1])
        )
    num = draw(st.sampled_from([base.num_records, None, 0]))
    return FileStats(num, mins, maxs, nulls, tight_bounds=draw(st.sampled_from([base.tight_bounds, True, False, None])))


@st.composite
def file_set(draw: st.DrawFn) -> list[tuple[FileStats | None, dict[str, object]]]:
    out = []
    for layout in draw(files()) * draw(st.integers(1, 3)):
        base = file_stats(layout["live"] + layout["hidden"], tight=not layout["hidden"], drop=layout["drop"])
        out.append((draw(odd_stats(base)), {"p": layout["p"]}))
    return out


def per_file_truth(predicate: Any, stats: FileStats | None, values: dict[str, object]) -> frozenset[bool | None]:
    lookup = partition_lookup(values)
    return Interpreter(lambda ref: file_column_range(ref, stats, lookup)).truth(predicate.tree)


def vector_truth(predicate: Any, layout: list[tuple[FileStats | None, dict[str, object]]]) -> list[frozenset[bool | None]]:
    def column(ref: ColumnRef) -> ColumnVec:
        ranges: list[Range] = [file_column_range(ref, s, partition_lookup(v)) for s, v in layout]
        return ColumnVec(ranges)

    return truth_sets(VectorInterpreter(column, len(layout)).truth(predicate.tree))


@SETTINGS
@given(predicate=predicates, layout=file_set())
def test_vectorized_truth_sets_equal_the_per_file_interpreter(predicate: str, layout: Any) -> None:
    bound = parse_predicate(predicate, SCHEMA)
    expected = [per_file_truth(bound, s, v) for s, v in layout]
    assert vector_truth(bound, layout) == expected, predicate
    # and the skip verdict is stats_might_match's
    assert [True in t for t in expected] == [stats_might_match(bound, s, SCHEMA, v) for s, v in layout]


def test_plan_candidates_equals_the_per_file_path_as_the_table_grows(tmp_path: Path) -> None:
    """Real snapshots, partitioned, growing by one file at a time (the per-snapshot columns and
    the cross-snapshot Range cache are both exercised), against stats_might_match per file."""
    root = str(tmp_path / "t")
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

    def batch(k: int) -> pa.Table:
        return pa.table({
            "id": pa.array([k * 10 + j for j in range(3)], pa.int64()),
            "s": pa.array([f"k{k:02d}", None, f"k{k:02d}z"], pa.string()),
            "ts": pa.array([base + dt.timedelta(hours=k), None, base + dt.timedelta(hours=k, microseconds=1)],
                           pa.timestamp("us", tz="UTC")),
            "p": pa.array(["a" if k % 2 else "b"] * 3, pa.string()),
        })

    predicates_sql = [
        "id = 41", "id IN (3, 77, 120)", "NOT (id < 50) AND p = 'a'", "s IS NULL OR id >= 90",
        "s > 'k05' AND s <= 'k07'", "ts >= TIMESTAMP '2024-01-01 05:00:00' AND ts < '2024-01-01 07:00:00'",
        "id NOT IN (1, 2) OR s LIKE 'k1%'", "id + 1 = 42 OR p IS NOT NULL",
        # no partition column read (one verdict for all files), a constant-false one, a spelling
        "1 = 0", "id = 41 AND 1 = 0", "P = 'a' AND id >= 60",
    ]
    dvengine.write(batch(0), root, mode="error", partitionBy=["p"])
    skipped_any = False
    for k in range(1, 2 * VECTOR_MIN_FILES):
        dvengine.write(batch(k), root, mode="append")
        if k % 5 and k != VECTOR_MIN_FILES - 2:  # one plan below the vectorizing threshold
            continue
        snapshot = DeltaTable.forPath(None, root).snapshot()
        for sql in predicates_sql:
            bound = parse_predicate(sql, snapshot.schema)
            for _ in range(2):  # the second plan reads the snapshot's cached columns
                got = {a.path for a in plan_candidates(snapshot, bound).candidates}
                want = {
                    a.path for a in snapshot.files
                    if partition_might_match(bound, snapshot.partition_values_logical(a))
                    and stats_might_match(bound, FileStats.parse(a.stats), snapshot.schema,
                                          snapshot.partition_values_logical(a))
                }
                assert got == want, sql
            skipped_any |= len(got) < len(snapshot.files)
    assert skipped_any  # the comparison covered files really skipped, not only kept ones


def test_a_predicate_that_reads_no_partition_column_types_no_partition_value(tmp_path: Path, monkeypatch: Any) -> None:
    """A point DML on ``id`` of a table partitioned by ``p``: the partition verdict is judged once,
    not per file (typing every file's partition values was most of a single-row DML on 10,000
    files); a predicate on ``p`` still judges, and prunes, by each file's values."""
    root = str(tmp_path / "t")
    dvengine.write(pa.table({"id": pa.array(range(40), pa.int64()), "p": [f"v{i // 2:02d}" for i in range(40)]}),
                   root, partitionBy=["p"])
    snapshot = DeltaTable.forPath(None, root).snapshot()
    assert len(snapshot.files) == 20
    typed: list[str] = []
    original = Snapshot.partition_values_logical

    def counting(self: Snapshot, add: Any) -> dict[str, object]:
        typed.append(add.path)
        return original(self, add)

    monkeypatch.setattr(Snapshot, "partition_values_logical", counting)
    plan = plan_candidates(snapshot, parse_predicate("id = 7", snapshot.schema))
    assert typed == []
    assert [a.partition_values["p"] for a in plan.candidates] == ["v03"]  # stats skipping did the rest
    assert plan_candidates(snapshot, parse_predicate("id = 7 AND 1 = 0", snapshot.schema)).candidates == ()
    plan = plan_candidates(snapshot, parse_predicate("p = 'v03' OR p = 'v04'", snapshot.schema))
    assert len(typed) == 20 and plan.num_pruned_by_partition == 18 and plan.partition_only


def test_reads_partition_values_by_name_spelling_and_top_level_column() -> None:
    schema = SCHEMA
    assert not reads_partition_values([parse_predicate("i = 1", schema)], ["s"])
    assert reads_partition_values([parse_predicate("S = 'a' OR i = 1", schema)], ["s"])
    assert reads_partition_values([None, parse_predicate("l > 2", schema)], ["L"])
    assert not reads_partition_values([parse_predicate("l > 2", schema)], [])
