"""Readers against real tables written by Delta Spark and Databricks (independent truth).

Every version listed in shared/golden/expected must read back exactly, through the Arrow
reader, the Spark reader and the CLI, from a private copy of the table.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLDEN_NAMES, load_expected
from dv_readers import DV_READERS, dv_reader

from dvengine import DeltaTable
from dvengine.cli.main import main as cli_main

CASES = [
    (name, int(version))
    for name in GOLDEN_NAMES
    for version in load_expected(name)["versions"]
]


def _sorted_rows(rows: list[list[Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=lambda r: tuple((v is None, v) for v in r))


@pytest.fixture(scope="module")
def golden_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from conftest import copy_golden

    dest = tmp_path_factory.mktemp("golden")
    return {name: copy_golden(name, dest) for name in GOLDEN_NAMES}


@pytest.mark.parametrize(("name", "version"), CASES)
def test_arrow_reader_matches_expected(golden_tables: dict[str, Path], name: str, version: int) -> None:
    expected = load_expected(name)
    table = DeltaTable.forPath(None, golden_tables[name]).toArrow(version=version)
    assert table.column_names == expected["columns"]
    rows = [list(r.values()) for r in table.to_pylist()]
    assert table.num_rows == expected["versions"][str(version)]["row_count"]
    assert _sorted_rows(rows) == _sorted_rows(expected["versions"][str(version)]["rows"])


@pytest.mark.parametrize("reader", DV_READERS)
@pytest.mark.parametrize(("name", "version"), CASES)
def test_spark_reader_matches_expected(
    spark: Any, golden_tables: dict[str, Path], name: str, version: int, reader: str
) -> None:
    expected = load_expected(name)
    with dv_reader(spark, reader):
        df = DeltaTable.forPath(spark, golden_tables[name]).toDF(version=version)
        assert df.columns == expected["columns"]
        rows = [list(r) for r in df.collect()]
    assert _sorted_rows(rows) == _sorted_rows(expected["versions"][str(version)]["rows"])


@pytest.mark.parametrize(("name", "version"), CASES)
def test_cli_show_jsonl_matches_expected(golden_tables: dict[str, Path], name: str, version: int) -> None:
    expected = load_expected(name)
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli_main(["show", str(golden_tables[name]), "--version", str(version), "--format", "jsonl"])
    assert code == 0
    objects = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(list(o.keys()) == expected["columns"] for o in objects)
    rows = [list(o.values()) for o in objects]
    assert _sorted_rows(rows) == _sorted_rows(expected["versions"][str(version)]["rows"])


def test_partition_column_keeps_schema_type(spark: Any, golden_tables: dict[str, Path]) -> None:
    table = DeltaTable.forPath(spark, golden_tables["dv-partitioned-with-checkpoint"])
    arrow = table.toArrow()
    assert str(arrow.schema.field("part").type) == "int32"
    assert dict(table.toDF().dtypes)["part"] == "int"


def test_cli_inspect_reports_dvs(golden_tables: dict[str, Path]) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main(["inspect", str(golden_tables["kernel-table-with-dv-small"]), "--json"]) == 0
    report = json.loads(out.getvalue())
    assert report["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert report["numFilesWithDV"] == 1
    (f,) = report["files"]
    assert (f["rows"], f["deletedRows"], f["dvStorageType"], f["dvSizeBytes"]) == (10, 2, "u", 36)
    assert report["numRecords"] == 8
