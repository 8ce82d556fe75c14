"""File paths reach Spark's reader in a constant number of py4j calls, with the same rows as
PySpark's own ``reader.parquet(*paths)``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import py4j.clientserver
import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.engine.spark.jvm_paths import load_paths


def _files(folder: Path, count: int, name: str = "part-{i}.parquet") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / name.format(i=i)
        pq.write_table(pa.table({"id": pa.array([i * 10 + j for j in range(3)], pa.int64())}), path)
        paths.append(str(path))
    return paths


@contextmanager
def _py4j_calls() -> Iterator[list[int]]:
    counted = [0]
    original = py4j.clientserver.ClientServerConnection.send_command

    def counting(self: Any, command: str) -> Any:
        # Not py4j's "m" (memory) commands: the release of Java objects whose Python proxies the
        # garbage collector frees happens whenever it runs, whatever the code under test does.
        if not command.startswith("m\n"):
            counted[0] += 1
        return original(self, command)

    py4j.clientserver.ClientServerConnection.send_command = counting  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        py4j.clientserver.ClientServerConnection.send_command = original  # type: ignore[method-assign]


def _ids(df: Any) -> list[int]:
    return sorted(r[0] for r in df.select("id").collect())


def test_same_rows_as_pyspark(spark: Any, tmp_path: Path) -> None:
    paths = _files(tmp_path, 12)
    ours = load_paths(spark.read.schema("id long"), paths, parquet=True)
    assert _ids(ours) == _ids(spark.read.schema("id long").parquet(*paths)) == [i * 10 + j for i in range(12) for j in range(3)]
    loaded = load_paths(spark.read.format("parquet").schema("id long"), paths, parquet=False)
    assert _ids(loaded) == _ids(ours)


def test_calls_do_not_grow_with_the_number_of_files(spark: Any, tmp_path: Path) -> None:
    few, many = _files(tmp_path / "few", 5), _files(tmp_path / "many", 60)
    load_paths(spark.read.schema("id long"), few, parquet=True)  # warm py4j's class lookups
    with _py4j_calls() as few_calls:
        load_paths(spark.read.schema("id long"), few, parquet=True)
    with _py4j_calls() as many_calls:
        df = load_paths(spark.read.schema("id long"), many, parquet=True)
    with _py4j_calls() as pyspark_calls:
        spark.read.schema("id long").parquet(*many)
    assert many_calls[0] == few_calls[0]
    assert pyspark_calls[0] > many_calls[0] + 50  # PySpark's own conversion: one call per path
    assert df.count() == 180


def test_a_path_with_a_newline_falls_back_to_pyspark(spark: Any, tmp_path: Path) -> None:
    paths = _files(tmp_path, 5, name="odd\nname-{i}.parquet")
    assert _ids(load_paths(spark.read.schema("id long"), paths, parquet=True)) == [i * 10 + j for i in range(5) for j in range(3)]


def test_few_paths_use_pyspark(spark: Any, tmp_path: Path) -> None:
    paths = _files(tmp_path, 2)
    assert _ids(load_paths(spark.read.schema("id long"), paths, parquet=True)) == [0, 1, 2, 10, 11, 12]
