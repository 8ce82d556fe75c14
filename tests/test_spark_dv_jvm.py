"""The JVM DV reader (io.dvengine.spark.DeletionVectorParquetFormat) against independent truth.

Each table is read through the JVM format and through the Python plan; both must equal an
in-memory model of the rows, delta-rs and DuckDB. The plan proves which path ran. Row indexes
must survive file splits and row-group skipping, so one table has many small row groups and
is read with tiny splits and a pushed filter. Damaged DVs fail the read and change nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dv_readers import DV_READERS, JVM_CLASS, dv_reader, executed_plan
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.dv import absolute_dv_path
from dvengine.engine.spark import dv_format
from dvengine.errors import DeletionVectorError, InvalidArgumentError, SparkEnvironmentError

COLS = ["id", "part", "value"]


def _write(path: Path, files: int, per_file: int, partitioned: bool) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        part = [f"p {i % 2}"] * len(ids)  # a space: file URIs must match however Hadoop spells them
        values = (ids * 0.5).tolist()
        dvengine.write(
            pa.table({"id": ids, "part": part, "value": values}),
            str(path),
            mode="append" if i else "error",
            partitionBy=["part"] if partitioned else None,
        )
        rows += list(zip(ids.tolist(), part, values))
    return rows


def _spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sort_rows([tuple(r[c] for c in COLS) for r in df.collect()])


def test_the_session_loads_the_jar(spark: Any) -> None:
    jar = dv_format.jar_path()
    assert jar is not None, "jvm/build/dvengine-spark.jar is missing: run `make install` (or `make jar`)"
    assert jar in spark.conf.get("spark.jars", "")
    assert dv_format.jvm_reader_loadable(spark)


@pytest.mark.parametrize("partitioned", [False, True])
def test_both_paths_read_what_the_model_and_other_readers_read(spark: Any, tmp_path: Path, partitioned: bool) -> None:
    path = tmp_path / "t"
    rows = _write(path, files=4, per_file=3000, partitioned=partitioned)
    t = DeltaTable.forPath(None, path)
    t.delete("id % 10 = 3 AND id < 9000", engine="local", mode="dv")  # DVs in files on disk
    t.delete("id = 9500", engine="local", mode="dv")  # a one-row DV: small enough to be inline
    kinds = {a.deletion_vector.storage_type for a in t.snapshot().files if a.deletion_vector is not None}
    assert kinds == {"u", "i"}
    expected = sort_rows([r for r in rows if not ((r[0] % 10 == 3 and r[0] < 9000) or r[0] == 9500)])
    for reader in DV_READERS:
        with dv_reader(spark, reader):
            df = DeltaTable.forPath(spark, path).toDF()
            assert _spark_rows(df) == expected, reader
            assert (JVM_CLASS in executed_plan(df)) == (reader == "jvm")
            scanned = DeltaTable.forPath(spark, path).scan("id >= 2990 AND id < 3010 AND part = 'p 1'")
            assert _spark_rows(scanned) == [r for r in expected if 2990 <= r[0] < 3010 and r[1] == "p 1"]
    spark.conf.set("spark.sql.parquet.enableVectorizedReader", "false")  # rows, not batches
    try:
        with dv_reader(spark, "jvm"):
            assert _spark_rows(DeltaTable.forPath(spark, path).toDF()) == expected
    finally:
        spark.conf.unset("spark.sql.parquet.enableVectorizedReader")
    assert rows_delta_rs(path, COLS) == expected
    assert rows_duckdb(path, COLS) == expected


def _many_row_groups(path: Path) -> None:
    """Rewrite every data file with 500-row row groups (same rows, same order) and fix its
    size in the log, so that splits and row-group skipping happen inside one file."""
    for add in DeltaTable.forPath(None, path).snapshot().files:
        data = path / add.path
        pq.write_table(pq.read_table(data), data, row_group_size=500)
        for entry in (path / "_delta_log").glob("*.json"):
            lines = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
            for action in lines:
                if "add" in action and action["add"]["path"] == add.path:
                    action["add"]["size"] = os.path.getsize(data)
            entry.write_text("".join(json.dumps(a) + "\n" for a in lines))


@pytest.mark.parametrize("splits", ["tiny", "whole files"])
@pytest.mark.parametrize("vectorized", ["true", "false"])
def test_row_indexes_survive_splits_and_row_group_skipping(
    spark: Any, tmp_path: Path, vectorized: str, splits: str
) -> None:
    """Tiny splits take Spark's row index column; whole files count rows, which is only right if
    no pushed filter reached their reader (it would skip row groups and shift the count)."""
    path = tmp_path / "t"
    rows = _write(path, files=2, per_file=20_000, partitioned=False)
    _many_row_groups(path)
    DeltaTable.forPath(None, path).delete("id % 7 = 1 OR (id >= 12000 AND id < 12500)", engine="local", mode="dv")
    live = [r for r in rows if not (r[0] % 7 == 1 or 12000 <= r[0] < 12500)]
    settings = {
        "spark.sql.parquet.enableVectorizedReader": vectorized,
        "spark.sql.maxMetadataStringLength": "10000",  # explain shows every pushed filter
    }
    if splits == "tiny":
        settings["spark.sql.files.maxPartitionBytes"] = "16384"  # many splits per file
        settings["spark.sql.files.openCostInBytes"] = "0"
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        with dv_reader(spark, "jvm"):
            df = DeltaTable.forPath(spark, path).toDF()
            assert (df.rdd.getNumPartitions() > 2) == (splits == "tiny")
            assert _spark_rows(df) == sort_rows(live)
            # a pushed filter lets Parquet skip row groups before the DV'd rows are marked
            later = df.where("id >= 31000 AND value >= 0")
            assert "GreaterThanOrEqual(id,31000)" in executed_plan(later)
            assert _spark_rows(later) == sort_rows([r for r in live if r[0] >= 31000])
    finally:
        for key in settings:
            spark.conf.unset(key)


def _set_num_records(path: Path, data_file: str, num_records: int) -> None:
    """Make the log claim ``num_records`` rows for ``data_file`` (a damaged or foreign log)."""
    for entry in (path / "_delta_log").glob("*.json"):
        lines = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        for action in lines:
            if "add" in action and action["add"]["path"] == data_file:
                stats = json.loads(action["add"]["stats"])
                stats["numRecords"] = num_records
                action["add"]["stats"] = json.dumps(stats)
        entry.write_text("".join(json.dumps(a) + "\n" for a in lines))


@pytest.mark.parametrize(("claimed", "vectorized"), [(5001, "true"), (4999, "false")])
def test_a_whole_file_read_checks_its_count_against_the_log(
    spark: Any, tmp_path: Path, vectorized: str, claimed: int
) -> None:
    """A file with a DV read whole gets its row indexes by counting, so a log whose numRecords
    disagrees with the file fails the read on the executor (instead of applying the DV to the
    wrong rows); a split of part of the file uses Spark's row index and reads correctly."""
    path = tmp_path / "t"
    rows = _write(path, files=1, per_file=5000, partitioned=False)
    _many_row_groups(path)
    table = DeltaTable.forPath(None, path)
    table.delete("id < 30", engine="local", mode="dv")
    _set_num_records(path, table.snapshot().files[0].path, claimed)
    before = _log_files(path)
    got = f"more than {claimed}" if claimed < 5000 else "5000"
    tiny_splits = {"spark.sql.files.maxPartitionBytes": "16384", "spark.sql.files.openCostInBytes": "0"}
    spark.conf.set("spark.sql.parquet.enableVectorizedReader", vectorized)
    try:
        with dv_reader(spark, "jvm"):
            with pytest.raises(Exception, match=f"Parquet returned {got} rows but the log says numRecords={claimed}"):
                DeltaTable.forPath(spark, path).toDF().collect()
            for key, value in tiny_splits.items():
                spark.conf.set(key, value)
            df = DeltaTable.forPath(spark, path).toDF()
            assert df.rdd.getNumPartitions() > 1
            assert _spark_rows(df) == sort_rows([r for r in rows if r[0] >= 30])
    finally:
        for key in ["spark.sql.parquet.enableVectorizedReader", *tiny_splits]:
            spark.conf.unset(key)
    assert _log_files(path) == before


def test_without_the_class_auto_falls_back_and_jvm_refuses(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    rows = _write(path, files=2, per_file=100, partitioned=False)
    DeltaTable.forPath(None, path).delete("id IN (3, 150)", engine="local")
    expected = sort_rows([r for r in rows if r[0] not in (3, 150)])
    monkeypatch.setitem(dv_format._LOADABLE, str(spark.sparkContext.applicationId), False)
    df = DeltaTable.forPath(spark, path).toDF()  # auto: the Python plan
    assert JVM_CLASS not in executed_plan(df)
    assert _spark_rows(df) == expected
    with dv_reader(spark, "jvm"), pytest.raises(SparkEnvironmentError, match="dvengine.read.dvReader=jvm"):
        DeltaTable.forPath(spark, path).toDF()
    with dv_reader(spark, "fast"), pytest.raises(InvalidArgumentError, match="dvengine.read.dvReader"):
        DeltaTable.forPath(spark, path).toDF()


def _table_with_file_dv(path: Path) -> tuple[list[tuple[Any, ...]], str, int]:
    rows = _write(path, files=1, per_file=1000, partitioned=False)
    DeltaTable.forPath(None, path).delete("id % 10 = 0", engine="local", mode="dv")
    snapshot = DeltaTable.forPath(None, path).snapshot()
    dv = snapshot.files[0].deletion_vector
    assert dv is not None and dv.storage_type == "u"
    return rows, absolute_dv_path(snapshot.table_root, dv), snapshot.version


def _log_files(path: Path) -> list[str]:
    return sorted(os.listdir(path / "_delta_log"))


def test_a_missing_dv_file_is_a_typed_error_before_any_job(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _, dv_path, _ = _table_with_file_dv(path)
    os.remove(dv_path)
    before = _log_files(path)
    with dv_reader(spark, "jvm"), pytest.raises(DeletionVectorError, match="does not exist"):
        DeltaTable.forPath(spark, path).toDF()
    assert _log_files(path) == before


def test_a_corrupt_dv_fails_the_read_on_the_executor(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _, dv_path, _ = _table_with_file_dv(path)
    data = bytearray(Path(dv_path).read_bytes())
    data[-6] ^= 0xFF  # a byte of the bitmap: the CRC no longer matches
    Path(dv_path).write_bytes(bytes(data))
    before = _log_files(path)
    with dv_reader(spark, "jvm"):
        df = DeltaTable.forPath(spark, path).toDF()
        with pytest.raises(Exception, match="CRC-32 mismatch"):
            df.collect()
    assert _log_files(path) == before


def test_a_column_named_like_the_marker_keeps_the_python_plan(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    marker = dv_format.IS_DELETED_COL
    ids = list(range(50))
    dvengine.write(pa.table({"id": ids, marker: [i % 3 for i in ids]}), str(path))
    DeltaTable.forPath(None, path).delete("id < 5", engine="local", mode="dv")
    with dv_reader(spark, "jvm"):
        df = DeltaTable.forPath(spark, path).toDF()
        assert JVM_CLASS not in executed_plan(df)
        assert sorted((r["id"], r[marker]) for r in df.collect()) == [(i, i % 3) for i in ids if i >= 5]


@pytest.mark.parametrize("vectorized", ["true", "false"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_files_without_a_dv_share_the_jvm_scan(spark: Any, tmp_path: Path, partitioned: bool, vectorized: str) -> None:
    """One DV'd file among clean ones: the JVM path reads all files in one scan (no union of a
    plain scan and a DV scan, whose extra tasks cost a wave on a small cluster), and the clean
    files lose no rows; the Python plan keeps its plain scan for them. The clean files go through
    the format's second reader (no row index), as batches and, unvectorized, as rows."""
    path = tmp_path / "t"
    rows = _write(path, files=4, per_file=2000, partitioned=partitioned)
    DeltaTable.forPath(None, path).delete("id IN (2001, 2500)", engine="local", mode="dv")
    with_dv = [a for a in DeltaTable.forPath(None, path).snapshot().files if a.deletion_vector is not None]
    assert len(with_dv) == 1
    expected = sort_rows([r for r in rows if r[0] not in (2001, 2500)])
    assert rows_delta_rs(path, COLS) == expected
    spark.conf.set("spark.sql.parquet.enableVectorizedReader", vectorized)
    try:
        for reader in DV_READERS:
            with dv_reader(spark, reader):
                df = DeltaTable.forPath(spark, path).toDF()
                assert _spark_rows(df) == expected, reader
                plan = executed_plan(df)
                if reader == "jvm":
                    assert plan.count(JVM_CLASS) == 1 and "Union" not in plan, plan
                else:
                    assert "Union" in plan, plan
    finally:
        spark.conf.unset("spark.sql.parquet.enableVectorizedReader")


def _all_atomic_types(n: int) -> pa.Table:
    """Every column type the format copies when it drops deleted rows, with NULLs in each."""
    import datetime as dt
    from decimal import Decimal

    def nulls(values: list[Any]) -> list[Any]:
        return [None if i % 11 == 5 else v for i, v in enumerate(values)]

    ids = list(range(n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "b": pa.array(nulls([i % 2 == 0 for i in ids]), pa.bool_()),
            "i8": pa.array(nulls([i % 100 for i in ids]), pa.int8()),
            "i16": pa.array(nulls([i % 30000 for i in ids]), pa.int16()),
            "i32": pa.array(nulls([i * 7 for i in ids]), pa.int32()),
            "f": pa.array(nulls([i / 4 for i in ids]), pa.float32()),
            "d": pa.array(nulls([i / 3 for i in ids]), pa.float64()),
            "dec": pa.array(nulls([Decimal(i) / 100 for i in ids]), pa.decimal128(10, 2)),
            "wide": pa.array(nulls([Decimal(i) * 10**20 for i in ids]), pa.decimal128(30, 0)),
            "s": pa.array(nulls([f"s{i}" * (i % 4) for i in ids]), pa.string()),
            "bin": pa.array(nulls([bytes([i % 256]) * (i % 5) for i in ids]), pa.binary()),
            "day": pa.array(nulls([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids]), pa.date32()),
            "ts": pa.array(nulls([dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i) for i in ids]),
                           pa.timestamp("us", tz="UTC")),
            "ntz": pa.array(nulls([dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i) for i in ids]), pa.timestamp("us")),
        }
    )


@pytest.mark.parametrize("off_heap", ["false", "true"])
def test_drop_mode_copies_every_atomic_type(
    spark: Any, tmp_path: Path, off_heap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With atomic columns the format leaves deleted rows out of its batches (no marker, no filter):
    scattered deletes copy the survivors, a batch losing every row is skipped, a batch losing none
    passes through. The Python plan (a plain scan and a join) must read exactly the same rows, on-
    and off-heap vectors alike, and a count with no column read must agree with the model."""
    path = tmp_path / "t"
    data = _all_atomic_types(3000)
    dvengine.write(data.slice(0, 1500), str(path))
    dvengine.write(data.slice(1500), str(path), mode="append")
    DeltaTable.forPath(None, path).delete("id % 7 = 3 OR (id >= 64 AND id < 192) OR id >= 2900", engine="local", mode="dv")
    live = [i for i in range(3000) if not (i % 7 == 3 or 64 <= i < 192 or i >= 2900)]
    monkeypatch.setattr(dv_format, "DROP_MAX_COPIED_SHARE", 1.0)  # every batch loses rows here
    settings = {"spark.sql.parquet.columnarReaderBatchSize": "64", "spark.sql.columnVector.offheap.enabled": off_heap}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        read: dict[str, list[tuple[Any, ...]]] = {}
        for reader in DV_READERS:
            with dv_reader(spark, reader):
                df = DeltaTable.forPath(spark, path).toDF()
                if reader == "jvm":
                    plan = executed_plan(df)
                    assert JVM_CLASS in plan and dv_format.IS_DELETED_COL not in plan, plan
                    assert df.count() == len(live)
                    assert df.select("s", "day").count() == len(live)
                read[reader] = sorted((tuple(r) for r in df.collect()), key=lambda r: r[0])
        assert [r[0] for r in read["jvm"]] == live
        assert read["jvm"] == read["python"]
    finally:
        for key in settings:
            spark.conf.unset(key)


@pytest.mark.parametrize("off_heap", ["false", "true"])
def test_nested_columns_keep_the_marker_filter(spark: Any, tmp_path: Path, off_heap: str) -> None:
    """A struct column is not copied: the format marks deleted rows and a filter drops them."""
    path = tmp_path / "t"
    ids = list(range(400))
    dvengine.write(pa.table({"id": ids, "pt": [{"x": i, "y": str(i)} for i in ids]}), str(path))
    DeltaTable.forPath(None, path).delete("id % 9 = 2", engine="local", mode="dv")
    spark.conf.set("spark.sql.columnVector.offheap.enabled", off_heap)
    try:
        with dv_reader(spark, "jvm"):
            df = DeltaTable.forPath(spark, path).toDF()
            assert dv_format.IS_DELETED_COL in executed_plan(df)
            got = sorted((r["id"], r["pt"]["x"], r["pt"]["y"]) for r in df.collect())
    finally:
        spark.conf.unset("spark.sql.columnVector.offheap.enabled")
    assert got == [(i, i, str(i)) for i in ids if i % 9 != 2]


def test_the_mode_follows_how_many_batches_lose_rows(spark: Any, tmp_path: Path) -> None:
    """Sparse DVs: the format drops rows (no marker in the plan); DVs in most batches: the marker
    filter when strings would be copied, still the drop when every column is fixed-width. All
    read the model's rows."""
    path = tmp_path / "t"
    rows = _write(path, files=2, per_file=50_000, partitioned=False)
    table = DeltaTable.forPath(None, path)
    table.delete("id = 7", engine="local", mode="dv")
    files = table.snapshot().files
    assert dv_format.copied_share(files) == pytest.approx(4096 / 100_000)
    with dv_reader(spark, "jvm"):
        df = DeltaTable.forPath(spark, path).toDF()
        assert JVM_CLASS in executed_plan(df) and dv_format.IS_DELETED_COL not in executed_plan(df)
        assert _spark_rows(df) == sort_rows([r for r in rows if r[0] != 7])
    table.delete("id % 100 = 1", engine="local", mode="dv")
    assert dv_format.copied_share(table.snapshot().files) == 1.0
    live = sort_rows([r for r in rows if r[0] != 7 and r[0] % 100 != 1])
    with dv_reader(spark, "jvm"):
        df = DeltaTable.forPath(spark, path).toDF()
        assert dv_format.IS_DELETED_COL in executed_plan(df)  # the string column makes copying dear
        assert _spark_rows(df) == live
        numbers = DeltaTable.forPath(spark, path).scan(columns=["id", "value"])  # fixed width: always copied
        plan = executed_plan(numbers)
        assert JVM_CLASS in plan and dv_format.IS_DELETED_COL not in plan, plan
        assert sorted((r["id"], r["value"]) for r in numbers.collect()) == [(r[0], r[2]) for r in live]
