"""A table written by one executor and changed by the other, step by step.

Each step is checked against an in-memory model through four readers (dvengine's Arrow and Spark
readers, delta-rs and DuckDB), and against the log: which files carry deletion vectors, how
many rows each vector holds, and which files were rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import assert_all_readers

import dvengine
from dvengine import DeltaTable

Row = tuple[int, str, int]
COLS = ["id", "name", "part"]


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "part": pa.array([r[2] for r in rows], pa.int32()),
        }
    )


def write_without_jvm(path: Path, rows: list[Row], files: int, partition_by: list[str] | None = None) -> None:
    """``files`` appends of Arrow data (no ``spark=``): one data file each when not partitioned."""
    size = -(-len(rows) // files)
    for n in range(files):
        chunk = rows[n * size : (n + 1) * size]
        dvengine.write(_arrow(chunk), str(path), mode="error" if n == 0 else "append", partitionBy=partition_by)


def dv_cardinalities(path: Path) -> dict[str, int]:
    """Data file -> rows its deletion vector deletes (0 without one)."""
    snapshot = DeltaTable.forPath(None, path).snapshot()
    return {a.path: (a.deletion_vector.cardinality if a.deletion_vector else 0) for a in snapshot.files}


class Steps:
    """Runs DML on either executor and keeps the model in step."""

    def __init__(self, spark: Any, path: Path, model: list[Row]) -> None:
        self.spark = spark
        self.path = path
        self.model = model

    def _table(self, engine: str) -> DeltaTable:
        return DeltaTable.forPath(self.spark if engine == "spark" else None, self.path)

    def delete(self, engine: str, sql: str, test: Callable[[Row], bool], mode: str = "dv") -> dict[str, Any]:
        metrics = self._table(engine).deleteMetrics(sql, mode=mode, engine=engine)
        kept = [r for r in self.model if not test(r)]
        assert metrics["executionEngine"] == engine
        assert metrics["numDeletedRows"] == len(self.model) - len(kept), (sql, metrics)
        self.model = kept
        self.check()
        return metrics

    def update(
        self, engine: str, sql: str, test: Callable[[Row], bool], assignments: dict[str, str],
        apply: Callable[[Row], Row], mode: str = "dv",
    ) -> dict[str, Any]:
        metrics = self._table(engine).updateMetrics(sql, set=assignments, mode=mode, engine=engine)
        assert metrics["executionEngine"] == engine
        assert metrics["numUpdatedRows"] == sum(1 for r in self.model if test(r)), (sql, metrics)
        self.model = [apply(r) if test(r) else r for r in self.model]
        self.check()
        return metrics

    def check(self) -> None:
        assert_all_readers(self.spark, self.path, COLS, self.model)


def ids_in(ids: range) -> str:
    """``id IN (...)``: the local executor evaluates IN lists but not ``%``."""
    return f"id IN ({', '.join(str(i) for i in ids)})"


def _initial(n: int = 200) -> list[Row]:
    return [(i, f"n{i % 7}", i % 3) for i in range(n)]


@pytest.mark.parametrize("first,second", [("local", "spark"), ("spark", "local")])
def test_deletion_vectors_pass_between_executors(spark: Any, tmp_path: Path, first: str, second: str) -> None:
    path = tmp_path / "t"
    model = _initial()
    write_without_jvm(path, model, files=2)  # ids 0..99 and 100..199
    steps = Steps(spark, path, model)
    steps.check()
    (file_a, file_b) = sorted(dv_cardinalities(path), key=lambda p: p)  # both files, no DVs yet
    assert dv_cardinalities(path) == {file_a: 0, file_b: 0}

    # 1. DELETE 10 rows of the first file with DVs
    m = steps.delete(first, ids_in(range(3, 100, 10)), lambda r: r[0] % 10 == 3 and r[0] < 100)
    assert m["numDeletionVectorsAdded"] == 1 and m["numRemovedFiles"] == 0
    dvs = dv_cardinalities(path)
    first_file = next(p for p, c in dvs.items() if c)
    assert dvs[first_file] == 10 and sum(dvs.values()) == 10

    # 2. UPDATE 10 more rows of that same file with the other executor: its DV is updated in place
    m = steps.update(
        second, ids_in(range(5, 100, 10)), lambda r: r[0] % 10 == 5 and r[0] < 100,
        {"name": "'u'"}, lambda r: (r[0], "u", r[2]),
    )
    assert m["numDeletionVectorsUpdated"] == 1 and m["numCopiedRows"] == 0
    dvs = dv_cardinalities(path)
    assert dvs[first_file] == 20  # 10 deleted + 10 updated rows retired from the same file
    assert len(dvs) == 3  # the updated rows were written to one new file

    # 3. DELETE again with the first executor: rows of the original file and of the new file
    m = steps.delete(first, f"{ids_in(range(7, 200, 10))} OR name = 'u' AND id < 30", lambda r: r[0] % 10 == 7 or (r[1] == "u" and r[0] < 30))
    dvs = dv_cardinalities(path)
    assert dvs[first_file] == 30
    assert sum(dvs.values()) == 30 + 10 + 3  # file b lost its 10 sevens, the new file its 3 ids < 30
    assert m["numDeletedRows"] == 10 + 10 + 3


def test_local_update_over_the_rewrite_threshold_rewrites_the_file(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    model = _initial()
    write_without_jvm(path, model, files=2)
    steps = Steps(spark, path, model)
    before = set(dv_cardinalities(path))
    # 20 of the 100 rows of the first file (20% > the 15% threshold): copy-on-write
    m = steps.update(
        "local", f"id < 100 AND {ids_in(range(0, 200, 5))}", lambda r: r[0] < 100 and r[0] % 5 == 0,
        {"part": "part + 10", "name": "'big'"}, lambda r: (r[0], "big", r[2] + 10), mode="auto",
    )
    assert m["numRemovedFiles"] == 1 and m["numCopiedRows"] == 80 and m["numDeletionVectorsAdded"] == 0
    after = dv_cardinalities(path)
    assert len(before & set(after)) == 1 and not any(after.values())
    # 5 of the other file's 100 (5%): a deletion vector
    m = steps.update(
        "local", f"id >= 100 AND {ids_in(range(0, 200, 20))}", lambda r: r[0] >= 100 and r[0] % 20 == 0,
        {"name": "'small'"}, lambda r: (r[0], "small", r[2]), mode="auto",
    )
    assert m["numRemovedFiles"] == 0 and m["numCopiedRows"] == 0 and m["numDeletionVectorsAdded"] == 1
    # and Spark carries on from there
    steps.delete("spark", "name IN ('big', 'small') AND id % 2 = 0", lambda r: r[1] in ("big", "small") and r[0] % 2 == 0)


def test_local_rewrite_delete_leaves_no_deletion_vectors(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    model = _initial()
    write_without_jvm(path, model, files=2)
    steps = Steps(spark, path, model)
    steps.delete("spark", "id = 150", lambda r: r[0] == 150)  # a DV on the second file first
    assert sum(dv_cardinalities(path).values()) == 1
    m = steps.delete("local", ids_in(range(1, 200, 50)), lambda r: r[0] % 50 == 1, mode="rewrite")
    assert m["numRemovedFiles"] == 2 and m["numDeletionVectorsAdded"] == 0
    assert m["numDeletionVectorsRemoved"] == 1  # the rewrite dropped the DV (and the row it hid)
    assert m["numCopiedRows"] == 200 - 1 - 4
    assert not any(dv_cardinalities(path).values())


def test_partitioned_table_through_the_local_executor(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    model = _initial(150)
    write_without_jvm(path, model, files=1, partition_by=["part"])
    steps = Steps(spark, path, model)
    snapshot = DeltaTable.forPath(None, path).snapshot()
    assert sorted(a.partition_values["part"] for a in snapshot.files) == ["0", "1", "2"]

    steps.delete("local", "part = 1 AND id < 50", lambda r: r[2] == 1 and r[0] < 50)
    # move the even ids of partition 0 into partition 2, named by partition and data columns
    m = steps.update(
        "local", f"part = 0 AND {ids_in(range(0, 150, 2))}", lambda r: r[2] == 0 and r[0] % 2 == 0,
        {"part": "part + 2", "name": "'moved'"}, lambda r: (r[0], "moved", r[2] + 2),
    )
    assert m["numUpdatedRows"] == 25
    snapshot = DeltaTable.forPath(None, path).snapshot()
    moved = [a for a in snapshot.files if a.deletion_vector is None and a.num_records == 25]
    assert [a.partition_values["part"] for a in moved] == ["2"] and "part=2/" in moved[0].path
    # the whole partition 2 in one condition, then a DELETE only Spark can evaluate
    steps.delete("local", "part = 2 AND name = 'moved' AND id > 100", lambda r: r[2] == 2 and r[1] == "moved" and r[0] > 100)
    steps.delete("spark", "length(name) > 2 AND part = 2", lambda r: len(r[1]) > 2 and r[2] == 2)
    steps.update("local", "part IN (0, 2)", lambda r: r[2] in (0, 2), {"part": "1"}, lambda r: (r[0], r[1], 1))
    assert {a.partition_values["part"] for a in DeltaTable.forPath(None, path).snapshot().files} >= {"1"}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_both_executors_honour_num_indexed_cols(spark: Any, tmp_path: Path, engine: str) -> None:
    """Files written by UPDATE carry stats for the first delta.dataSkippingNumIndexedCols columns only,
    whichever executor wrote them (the table's own files are the reference)."""
    import json as _json

    import dvengine as _dvengine

    path = tmp_path / "t"
    data = pa.table({"id": pa.array(range(50), pa.int64()), "name": [f"n{i}" for i in range(50)]})
    _dvengine.write(data, str(path), configuration={"delta.dataSkippingNumIndexedCols": "1"})
    session = spark if engine == "spark" else None
    metrics = DeltaTable.forPath(session, path).updateMetrics("id < 5", {"name": "'x'"}, mode="dv", engine=engine)
    assert metrics["executionEngine"] == engine and metrics["numUpdatedRows"] == 5
    for add in DeltaTable.forPath(None, path).snapshot().files:
        stats = _json.loads(add.stats or "{}")
        assert set(stats["minValues"]) == {"id"} and set(stats["maxValues"]) == {"id"}
