"""``DeltaTable.toArrow(condition=..., columns=...)`` against an in-memory model and delta-rs.

The log must choose the files before any is opened (partition pruning and stats skipping are
proved by damaging the files that must not be read), deletion vectors must be applied before the
condition, SQL's three-valued logic must hold (a NULL condition drops the row), and bad arguments
must be typed errors that name what is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable as DeltaRsTable
from deltalake import QueryBuilder
from interop import sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import DataFileError, InvalidArgumentError, InvalidPredicateError

Row = tuple[Any, ...]


def _table(path: Path, partitioned: bool) -> list[Row]:
    """Four files of 100 rows (ids 0..399), partition ``part`` p0/p1, some NULL scores."""
    rows: list[Row] = []
    for i in range(4):
        ids = np.arange(i * 100, (i + 1) * 100, dtype=np.int64)
        part = [f"p{i % 2}"] * len(ids)
        score = [None if int(x) % 9 == 0 else int(x) % 13 for x in ids]
        dvengine.write(
            pa.table({"id": ids, "part": part, "score": pa.array(score, pa.int64())}),
            str(path),
            mode="append" if i else "error",
            partitionBy=["part"] if partitioned else None,
        )
        rows += list(zip(ids.tolist(), part, score))
    return rows


def _rows(table: pa.Table) -> list[Row]:
    return sort_rows([tuple(r.values()) for r in table.to_pylist()])


def _delta_rs(path: Path, sql: str) -> list[Row]:
    result = QueryBuilder().register("t", DeltaRsTable(str(path))).execute(sql).read_all()
    return _rows(pa.table(result))


@pytest.mark.parametrize("partitioned", [False, True])
def test_condition_and_columns_read_what_the_model_and_delta_rs_read(tmp_path: Path, partitioned: bool) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned)
    t = DeltaTable.forPath(None, path)
    t.delete("id % 10 = 3", engine="local", mode="dv")  # DVs in every file: applied before the condition
    live = [r for r in rows if r[0] % 10 != 3]
    cases = [
        ("part = 'p1' AND id >= 150", lambda r: r[1] == "p1" and r[0] >= 150),
        ("score > 6 OR id < 20", lambda r: (r[2] is not None and r[2] > 6) or r[0] < 20),
        ("NOT (score = 4)", lambda r: r[2] is not None and r[2] != 4),  # NULL score: not returned
        ("id IN (3, 5, 399)", lambda r: r[0] in (3, 5, 399)),
    ]
    for condition, keep in cases:
        got = t.toArrow(condition=condition, columns=["score", "ID"])
        assert got.column_names == ["id", "score"]  # schema order, logical spelling
        expected = sort_rows([(r[0], r[2]) for r in live if keep(r)])
        assert _rows(got) == expected, condition
        assert _delta_rs(path, f"SELECT id, score FROM t WHERE {condition}") == expected, condition
    assert _rows(t.toArrow(columns=["part"])) == sort_rows([(r[1],) for r in live])
    assert _rows(t.toArrow(condition="score IS NULL")) == sort_rows([r for r in live if r[2] is None])


def test_only_the_files_the_log_cannot_rule_out_are_opened(tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned=True)
    t = DeltaTable.forPath(None, path)
    t.delete("id = 150", engine="local", mode="dv")
    holding_100s = next(a for a in t.snapshot().files if '"id":100' in (a.stats or ""))
    for data_file in (path / "part=p0").glob("*.parquet"):
        os.truncate(data_file, 10)  # opening any p0 file now fails
    expected = sort_rows([r for r in rows if r[1] == "p1" and r[0] != 150])
    assert _rows(t.toArrow(condition="part = 'p1'")) == expected  # pruned by partition
    for add in t.snapshot().files:
        if add.path != holding_100s.path:
            os.truncate(path / add.path, 10)
    got = t.toArrow(condition="id >= 120 AND id < 160", columns=["id"])  # skipped by stats
    assert _rows(got) == [(i,) for i in range(120, 160) if i != 150]
    with pytest.raises(DataFileError, match="cannot be read as Parquet"):  # the damage is real
        t.toArrow()


def test_time_travel_with_a_condition(tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned=False)
    t = DeltaTable.forPath(None, path)
    before = t.version()
    t.delete("id < 50", engine="local", mode="dv")
    assert _rows(t.toArrow(before, condition="id < 5", columns=["id"])) == [(i,) for i in range(5)]
    assert t.toArrow(condition="id < 5").num_rows == 0
    assert t.toArrow(before).num_rows == len(rows)


def test_bad_arguments_are_typed_errors_naming_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, partitioned=False)
    t = DeltaTable.forPath(None, path)
    with pytest.raises(InvalidArgumentError, match="'nope'"):
        t.toArrow(columns=["id", "nope"])
    with pytest.raises(TypeError, match="list of column names"):
        t.toArrow(columns="id")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="condition must be"):
        t.toArrow(condition=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidPredicateError, match="nosuch"):
        t.toArrow(condition="nosuch = 1")
    with pytest.raises(InvalidPredicateError, match="cannot be evaluated in Arrow"):
        t.toArrow(condition="initcap(part) = 'P1'")  # no Arrow kernel for initcap
    assert t.version() == 3  # reads never commit
