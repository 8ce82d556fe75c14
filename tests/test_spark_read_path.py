"""The Spark read path: files without DVs pay nothing, partition filters prune, DVs apply exactly.

Truth is an in-memory model of the rows and delta-rs; pruning is proven by hiding files that a
correct plan must not open (a read of a hidden file fails the query).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dv_readers import DV_READERS, dv_reader
from interop import rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.engine.spark import reader

COLS = ["id", "part", "name"]


def _table(path: Path, partitioned: bool, files: int = 4) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for i in range(files):
        ids = np.arange(i * 100, (i + 1) * 100, dtype=np.int64)
        part = [f"p{i % 2}"] * len(ids)
        names = [f"n{int(x) % 7}" for x in ids]
        dvengine.write(
            pa.table({"id": ids, "part": part, "name": names}),
            str(path),
            mode="append" if i else "error",
            partitionBy=["part"] if partitioned else None,
        )
        rows += list(zip(ids.tolist(), part, names))
    return rows


def _spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sort_rows([tuple(r[c] for c in COLS) for r in df.collect()])


@pytest.mark.parametrize("dv_mode", DV_READERS)
@pytest.mark.parametrize("partitioned", [False, True])
def test_mixed_clean_and_dv_files_read_exactly(spark: Any, tmp_path: Path, partitioned: bool, dv_mode: str) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned)
    t = DeltaTable.forPath(None, path)
    t.deleteMetrics("id % 10 = 3 AND id < 200", engine="local")  # DVs in two of four files
    expected = sort_rows([r for r in rows if not (r[0] % 10 == 3 and r[0] < 200)])
    snapshot = t.snapshot()
    assert sum(a.deletion_vector is not None for a in snapshot.files) == 2
    with dv_reader(spark, dv_mode):
        assert _spark_rows(DeltaTable.forPath(spark, path).toDF()) == expected
    assert rows_delta_rs(path, COLS) == expected
    if partitioned:
        assert reader._discoverable_partitions(snapshot, snapshot.files)


def test_path_identity_fallback_reads_exactly(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When DV'd files cannot be told apart by size, rows are matched to DVs through the path join
    (Python plan); partition values joined by path work under both readers."""
    path = tmp_path / "t"
    rows = _table(path, partitioned=True, files=3)
    DeltaTable.forPath(None, path).deleteMetrics("id IN (5, 105, 250)", engine="local")
    expected = sort_rows([r for r in rows if r[0] not in (5, 105, 250)])
    monkeypatch.setattr(reader, "_unique_sizes", lambda files: False)
    with dv_reader(spark, "python"):
        assert _spark_rows(DeltaTable.forPath(spark, path).toDF()) == expected
    monkeypatch.setattr(reader, "_discoverable_partitions", lambda snapshot, files: False)
    for mode in DV_READERS:
        with dv_reader(spark, mode):
            assert _spark_rows(DeltaTable.forPath(spark, path).toDF()) == expected


def test_size_identity_requires_unique_sizes() -> None:
    from dvengine.protocol.actions import AddFile

    a = AddFile("a", {}, 10, 0)
    b = AddFile("b", {}, 10, 0)
    c = AddFile("c", {}, 11, 0)
    assert reader._unique_sizes([a, c]) and not reader._unique_sizes([a, b, c])


def test_partition_filter_reads_only_that_partition(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned=True)
    DeltaTable.forPath(None, path).deleteMetrics("id = 150", engine="local")  # a DV in partition p1
    for data_file in (path / "part=p0").glob("*.parquet"):
        os.truncate(data_file, 10)  # opening a p0 file now fails the query: it must not be opened
    expected = sort_rows([r for r in rows if r[1] == "p1" and r[0] != 150])
    t = DeltaTable.forPath(spark, path)
    assert _spark_rows(t.toDF().where("part = 'p1'")) == expected  # Spark's PartitionFilters prune
    assert _spark_rows(t.scan("part = 'p1'")) == expected  # pruned from the log before Spark
    with pytest.raises(Exception):  # noqa: B017 - proves the damaged files would fail a read that opens them
        t.toDF().where("part = 'p0'").collect()


def test_scan_skips_files_by_stats_and_selects_columns(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = _table(path, partitioned=False)
    t = DeltaTable.forPath(spark, path)
    keep = next(a for a in t.snapshot().files if a.num_records and "minValues" in (a.stats or "")
                and '"id":100' in (a.stats or ""))
    for add in t.snapshot().files:  # corrupt every file but the one holding ids 100..199
        if add.path != keep.path:
            os.truncate(path / add.path, 10)
    got = t.scan("id >= 120 AND id < 130", columns=["name", "id"]).collect()
    assert sorted((r["id"], r["name"]) for r in got) == sorted((r[0], r[2]) for r in rows if 120 <= r[0] < 130)
    assert list(t.scan("id = 120", columns=["name"]).columns) == ["name"]


def test_non_hive_folders_use_the_log_values(spark: Any, tmp_path: Path) -> None:
    """Folder names are not part of the protocol: a file whose folder disagrees with its
    partitionValues must read with the log's value."""
    path = tmp_path / "t"
    rows = _table(path, partitioned=True, files=2)
    snapshot = DeltaTable.forPath(None, path).snapshot()
    # Move p1's file under a folder that claims p0 and rewrite the log's path for it.
    victim = next(a for a in snapshot.files if a.partition_values["part"] == "p1")
    (path / "part=p0" / "moved").mkdir()
    new_rel = f"part=p0/moved/{os.path.basename(victim.path)}"
    shutil.move(str(path / victim.path), str(path / new_rel))
    log = sorted((path / "_delta_log").glob("*.json"))
    for entry in log:
        entry.write_text(entry.read_text().replace(victim.path, new_rel))
    snapshot = DeltaTable.forPath(None, path).snapshot()
    assert not reader._discoverable_partitions(snapshot, snapshot.files)
    assert _spark_rows(DeltaTable.forPath(spark, path).toDF()) == sort_rows(rows)
