"""An empty string in a partition column is NULL (PROTOCOL.md "Partition Value Serialization": "An
empty string for any type translates to a null partition value"; Spark's partitioned writes put such
rows under ``__HIVE_DEFAULT_PARTITION__`` with a null value in the log, so Delta reads them back
NULL). dvengine used to log ``""`` and read it back as ``''`` while the folder said NULL: other
readers and dvengine then disagreed about the row. Checked against delta-rs and DuckDB; a log that
holds ``""`` (older dvengine tables) is read as Delta Spark and delta-rs read it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from interop import rows_arrow, rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable


def _partition_values(path: Path, version: int) -> list[dict[str, str | None]]:
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line)["add"]["partitionValues"] for line in lines if '"add"' in line]


def test_an_empty_string_partition_value_is_written_and_read_as_null(tmp_path: Path) -> None:
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1, 2, 3], "p": ["", None, "a"]}), str(path), partitionBy=["p"])
    assert sorted(_partition_values(path, 0), key=lambda v: v["p"] or "") == [{"p": None}, {"p": None}, {"p": "a"}]
    want = [(1, None), (2, None), (3, "a")]
    assert rows_arrow(path, ["id", "p"]) == rows_delta_rs(path, ["id", "p"]) == rows_duckdb(path, ["id", "p"]) == want
    table = DeltaTable.forPath(None, str(path))
    assert table.delete("p IS NULL")["numDeletedRows"] == 2  # both rows are NULL for predicates too
    assert rows_arrow(path, ["id", "p"]) == rows_delta_rs(path, ["id", "p"]) == [(3, "a")]


def test_a_logged_empty_string_reads_as_delta_spark_reads_it(tmp_path: Path) -> None:
    """A log entry of ``""`` for a string column (what dvengine wrote before) reads as ``''``: the
    protocol text says NULL, but Delta Spark casts the logged string (``TahoeFileIndex
    .getPartitionValuesRow``: ``Cast(Literal(""), StringType)``) and delta-rs also gives ``''``;
    dvengine reads what they read. For other types ``""`` is NULL everywhere."""
    path = tmp_path / "t"
    dvengine.write(pa.table({"id": [1], "p": ["a"], "n": pa.array([5], pa.int32())}), str(path), partitionBy=["p", "n"])
    log = path / "_delta_log" / f"{0:020d}.json"
    text = log.read_text()
    assert '"partitionValues":{"p":"a","n":"5"}' in text
    log.write_text(text.replace('"partitionValues":{"p":"a","n":"5"}', '"partitionValues":{"p":"","n":""}'))
    assert _partition_values(path, 0) == [{"p": "", "n": ""}]
    assert rows_arrow(path, ["id", "p", "n"]) == rows_delta_rs(path, ["id", "p", "n"]) == [(1, "", None)]
