"""A catalogue of user mistakes and broken inputs, each mapped to one typed error that names the problem.

Every case checks three things: the error class (so callers can ``except`` precisely), that the
message names what is wrong (the column, file, value, key or URI), and, where a table exists,
that the table folder is byte-for-byte unchanged with no new files. Almost everything here fails
before Spark would start; ``no_spark`` makes that a checked property rather than a hope. The few
cases that need Spark share the session fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake
from dml_helpers import folder_state

import dvengine
from dvengine import DeltaTable
from dvengine.cli.main import main as cli_main
from dvengine.errors import (
    DataFileError,
    DvengineError,
    InvalidArgumentError,
    InvalidPredicateError,
    LogCorruptedError,
    SchemaMismatchError,
    SparkEnvironmentError,
    TableNotFoundError,
    UnsupportedFeatureError,
    UnsupportedStorageError,
)
from dvengine.expressions import parse_predicate, parse_value_expression
from dvengine.log import load_snapshot, table_exists
from dvengine.maintenance.history import history
from dvengine.maintenance.vacuum import vacuum
from dvengine.protocol.schema import StructType, from_arrow_schema
from dvengine.storage import normalize_table_path
from dvengine.writing.properties import KNOWN_PROPERTIES, validate_table_properties
from dvengine.writing.schema_checks import check_new_table_configuration

WORKTREE = Path(__file__).resolve().parents[1]

# --- helpers ---------------------------------------------------------------------------------




def rows() -> pa.Table:
    return pa.table({"id": pa.array(range(20), pa.int64()), "name": [f"n{i}" for i in range(20)]})


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A small Delta table written by delta-rs (no Spark needed): id long, name string."""
    root = tmp_path / "t"
    write_deltalake(str(root), rows())
    return root


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the code under test tries to start (or fetch) a SparkSession."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Spark must not be needed to detect this error")

    import dvengine.cli.dml
    import dvengine.engine.spark.session
    import dvengine.engine.spark.write_api

    monkeypatch.setattr(dvengine.engine.spark.session, "get_or_create_session", refuse)
    monkeypatch.setattr(dvengine.engine.spark.write_api, "_session_for", refuse)
    monkeypatch.setattr(dvengine.cli.dml, "cli_session", refuse)


def one_error_line(err: str) -> str:
    """The CLI's stderr must be exactly one 'dvengine: error: ...' line; return the message part."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dvengine: error: "), err
    return lines[0][len("dvengine: error: ") :]


SCHEMA = from_arrow_schema(
    pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("flag", pa.bool_()),
            ("d", pa.date32()),
            ("s", pa.struct([("x", pa.int32())])),
            ("tags", pa.list_(pa.string())),
        ]
    )
)

# --- URIs and table paths -----------------------------------------------------------------------

# Schemes the storage layer does not serve (s3/s3a/s3n, gs, az/abfs/abfss are served: test_storage_s3.py).
REMOTE_URIS = [
    "wasbs://container@account.blob.core.windows.net/t",
    "hdfs://namenode:8020/warehouse/t",
    "hdfs:///warehouse/t",
    "dbfs:/mnt/t",
    "viewfs://cluster/t",
    "https://example.com/t",
    "my+custom.scheme://host/t",
    "HDFS://UPPER/t",
]


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("s3a://bucket/tables/events/", "s3://bucket/tables/events"),
        ("s3n://bucket/t", "s3://bucket/t"),
        ("S3A://bucket/t", "s3://bucket/t"),
        ("gs://bucket/t", "gs://bucket/t"),
        ("abfss://container@account.dfs.core.windows.net/t", "abfss://container@account.dfs.core.windows.net/t"),
    ],
)
def test_uri_object_store_schemes_served(uri: str, canonical: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_table_path(uri) == canonical  # no request is made to name a table root
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("uri", REMOTE_URIS)
def test_uri_remote_scheme_refused(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedStorageError) as info:
        normalize_table_path(uri)
    assert uri in str(info.value)
    assert isinstance(info.value, UnsupportedFeatureError)
    assert list(tmp_path.iterdir()) == []


def test_uri_file_uri_with_remote_host_refused() -> None:
    with pytest.raises(UnsupportedStorageError, match="'otherhost'"):
        normalize_table_path("file://otherhost/data/t")


ENTRY_POINTS: dict[str, Callable[[str], object]] = {
    "DeltaTable.forPath": lambda p: DeltaTable.forPath(None, p),
    "DeltaTable.isDeltaTable": lambda p: DeltaTable.isDeltaTable(None, p),
    "load_snapshot": load_snapshot,
    "table_exists": table_exists,
    "history": history,
    "vacuum": lambda p: vacuum(p, dry_run=True),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_uri_hdfs_refused_by_every_entry_point(entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedStorageError, match="hdfs://nn/t"):
        ENTRY_POINTS[entry]("hdfs://nn/t")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("uri", ["hdfs://nn/t", "wasbs://c@a.blob.core.windows.net/t", "dbfs:/mnt/t"])
def test_uri_write_refused_before_anything_is_written(
    uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_spark: None
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedStorageError, match=uri.split("/")[0]):
        dvengine.write(rows(), uri)
    assert list(tmp_path.iterdir()) == []  # before the fix: ./s3a:/b/t/_delta_log


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("relative/t", "relative/t", id="relative"),
        pytest.param("C:\\data\\t", "C:\\data\\t", id="windows-drive-backslash"),
        pytest.param("C:/data/t", "C:/data/t", id="windows-drive-slash"),
        pytest.param("name:with:colons", "name:with:colons", id="colon-in-name"),
    ],
)
def test_uri_local_paths_still_accepted(given: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_table_path(given) == str(tmp_path / expected)


@pytest.mark.parametrize("prefix", ["file://", "file://localhost"], ids=["file-uri", "file-uri-localhost"])
def test_uri_file_uris_still_accepted(prefix: str, table: Path) -> None:
    uri = prefix + str(table)
    assert normalize_table_path(uri) == str(table)
    assert DeltaTable.forPath(None, uri).toArrow().num_rows == 20


def test_path_existing_regular_file_refused(tmp_path: Path, no_spark: None) -> None:
    f = tmp_path / "data.csv"
    f.write_text("a,b\n1,2\n")
    before = folder_state(tmp_path)
    for call in (normalize_table_path, lambda p: DeltaTable.forPath(None, p), lambda p: dvengine.write(rows(), p)):
        with pytest.raises(InvalidArgumentError, match="data.csv.*existing file"):
            call(str(f))
    assert folder_state(tmp_path) == before


@pytest.mark.parametrize("path", ["", "   "], ids=["empty", "blank"])
def test_path_empty_refused(path: str) -> None:
    with pytest.raises(InvalidArgumentError, match="must not be empty"):
        normalize_table_path(path)


def test_path_missing_folder_is_table_not_found(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="nothing-here"):
        DeltaTable.forPath(None, tmp_path / "nothing-here")


# --- table properties ---------------------------------------------------------------------------

BAD_PROPERTIES = [
    ("delta.checkpointInterval", "abc"),
    ("delta.checkpointInterval", "0"),
    ("delta.checkpointInterval", "-3"),
    ("delta.checkpointInterval", "1.5"),
    ("delta.checkpointInterval", ""),
    ("delta.enableDeletionVectors", "yes"),
    ("delta.enableDeletionVectors", "1"),
    ("delta.appendOnly", "maybe"),
    ("delta.enableChangeDataFeed", "on"),
    ("delta.logRetentionDuration", "forever"),
    ("delta.logRetentionDuration", "interval 1 month"),
    ("delta.logRetentionDuration", "interval -1 days"),
    ("delta.deletedFileRetentionDuration", "interval 2 fortnights"),
    ("delta.deletedFileRetentionDuration", ""),
    ("delta.dataSkippingNumIndexedCols", "-2"),
    ("delta.dataSkippingNumIndexedCols", "many"),
    ("delta.dataSkippingNumIndexedCols", "3.5"),
]


@pytest.mark.parametrize(("key", "value"), BAD_PROPERTIES, ids=[f"{k.split('.')[1]}={v!r}" for k, v in BAD_PROPERTIES])
def test_properties_bad_value_refused_on_write(key: str, value: str, tmp_path: Path, no_spark: None) -> None:
    target = tmp_path / "t"
    with pytest.raises(InvalidArgumentError) as info:
        dvengine.write(rows(), str(target), configuration={key: value})
    assert key in str(info.value) and repr(value) in str(info.value)
    assert not target.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [True, 5, None], ids=["bool", "int", "none"])
def test_properties_non_string_value_refused(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="delta.appendOnly.*string"):
        validate_table_properties({"delta.appendOnly": value})


def test_properties_not_a_mapping_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="mapping"):
        validate_table_properties([("delta.appendOnly", "true")])  # type: ignore[arg-type]


def test_properties_bad_value_into_existing_table_leaves_it_unchanged(table: Path, no_spark: None) -> None:
    before = folder_state(table)
    with pytest.raises(InvalidArgumentError, match="delta.checkpointInterval='abc'"):
        dvengine.write(rows(), str(table), mode="append", configuration={"delta.checkpointInterval": "abc"})
    assert folder_state(table) == before


@pytest.mark.parametrize(
    "config",
    [
        {"delta.enableDeletionVectors": "TRUE", "delta.appendOnly": "False", "delta.enableChangeDataFeed": "false"},
        {"delta.logRetentionDuration": "interval 30 days", "delta.deletedFileRetentionDuration": "168 hours"},
        {"delta.logRetentionDuration": "interval 1 week"},
        {"delta.checkpointInterval": "10", "delta.dataSkippingNumIndexedCols": "-1"},
        {"delta.dataSkippingNumIndexedCols": "0"},
        {"my.own.property": "anything at all"},
    ],
    ids=["flags-any-case", "durations", "week", "ints", "zero-indexed-cols", "user-defined-key"],
)
def test_properties_valid_values_accepted(config: dict[str, str]) -> None:
    validate_table_properties(config)
    check_new_table_configuration(config)


def test_properties_every_known_key_is_validated() -> None:
    for key in KNOWN_PROPERTIES:
        with pytest.raises(InvalidArgumentError, match=key):
            validate_table_properties({key: "not valid ~"})


# --- predicates -------------------------------------------------------------------------------

SYNTAX_ERRORS = ["id >", "id = = 1", "(id > 1", "id > 1)", "'abc", "id BETWEEN 1", "id IN ()", "CAST(name AS nosuchtype) = 1"]


@pytest.mark.parametrize("text", SYNTAX_ERRORS)
def test_predicate_syntax_error(text: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        parse_predicate(text, SCHEMA)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("nope > 1", "'nope'"),
        ("x.id = 1", "'x.id'"),
        ("s.nope = 1", "'nope'"),
        ("id.x = 1", "'x'"),
        ("NAME_TYPO = 'a'", "'NAME_TYPO'"),
        ("id > 1 AND other < 2", "'other'"),
    ],
)
def test_predicate_unknown_column(text: str, named: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        parse_predicate(text, SCHEMA)
    assert named in str(info.value)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("id + 1", "must be boolean"),
        ("name", "must be boolean"),
        ("flag = 'maybe'", "'maybe'"),
        ("id = 'abc'", "'abc'"),
        ("d = 'not a date'", "'not a date'"),
        ("d > 5", "`d` (date)"),
        ("tags = 1", "`tags`"),
        ("name + 1 > 0", "`name`"),
        ("id AND flag", "`id`"),
        ("NOT id", "`id`"),
        ("rand() > 0.5", "rand()"),
        ("sum(id) > 1", "sum()"),
        ("id > ?", "'?'"),
        ("id IN (SELECT 1)", "subqueries"),
        ("id > 1; id < 2", "2 statements"),
        ("id AS x", "aliases"),
    ],
)
def test_predicate_wrong_type_or_shape(text: str, named: str) -> None:
    with pytest.raises(InvalidPredicateError) as info:
        parse_predicate(text, SCHEMA)
    assert named in str(info.value)


@pytest.mark.parametrize("value", [None, 42, b"id > 1"], ids=["none", "int", "bytes"])
def test_predicate_not_text(value: object) -> None:
    with pytest.raises(InvalidPredicateError, match=type(value).__name__):
        parse_predicate(value, SCHEMA)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "   "], ids=["empty", "blank"])
def test_predicate_empty(text: str) -> None:
    with pytest.raises(InvalidPredicateError, match="must not be empty"):
        parse_predicate(text, SCHEMA)


DEEP = {
    "parens-3000": "(" * 3000 + "id > 1" + ")" * 3000,
    "parens-100": "(" * 100 + "id > 1" + ")" * 100,
    "not-2000": "NOT " * 2000 + "id > 1",
    "or-chain-3000": " OR ".join(f"id = {i}" for i in range(3000)),
    "and-chain-3000": " AND ".join(f"id <> {i}" for i in range(3000)),
    "nested-calls-1000": "abs(" * 1000 + "id" + ")" * 1000 + " > 1",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_predicate_nested_too_deeply(name: str) -> None:
    text = DEEP[name]
    with pytest.raises(InvalidPredicateError, match="nested too deeply") as info:
        parse_predicate(text, SCHEMA)
    assert isinstance(info.value.__cause__, RecursionError)
    assert f"{len(text)} characters" in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize(
    "text", ["(" * 3000 + "id" + ")" * 3000, " + ".join(["id"] * 3000)], ids=["parens", "sum-chain"]
)
def test_value_expression_nested_too_deeply(text: str) -> None:
    with pytest.raises(InvalidPredicateError, match="nested too deeply"):
        parse_value_expression(text, SCHEMA)


def test_predicate_moderate_nesting_still_works() -> None:
    assert parse_predicate("(" * 10 + "id > 1" + ")" * 10, SCHEMA).columns == {"id"}
    assert parse_predicate(" OR ".join(f"id = {i}" for i in range(100)), SCHEMA).columns == {"id"}


# --- writes -----------------------------------------------------------------------------------

NOT_TABLES = {
    "list-of-tuples": [(1, "a"), (2, "b")],
    "dict": {"id": [1, 2]},
    "none": None,
    "str": "id,name\n1,a",
    "int": 42,
    "numpy": np.arange(3),
    "record-batch-list": [pa.record_batch([pa.array([1])], names=["id"])],
}


@pytest.mark.parametrize("name", sorted(NOT_TABLES))
def test_write_wrong_data_type(name: str, tmp_path: Path, no_spark: None) -> None:
    data = NOT_TABLES[name]
    with pytest.raises(TypeError) as info:
        dvengine.write(data, str(tmp_path / "t"))
    message = str(info.value)
    assert "Spark DataFrame" in message and "pyarrow Table" in message and "pandas DataFrame" in message
    assert type(data).__name__ in message
    assert list(tmp_path.iterdir()) == []


CASE_DUPLICATES = {
    "a-A": (pa.table({"a": [1], "A": [2]}), ("'a'", "'A'")),
    "id-ID-name": (pa.table({"id": [1], "name": ["x"], "ID": [2]}), ("'id'", "'ID'")),
    "exact-duplicate": (pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["v", "v"]), ("'v'", "same name")),
    "nested-struct": (
        pa.table({"s": pa.array([{"x": 1, "X": 2}], pa.struct([("x", pa.int64()), ("X", pa.int64())]))}),
        ("'s.x'", "'s.X'"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASE_DUPLICATES))
def test_write_case_duplicate_columns_new_table(name: str, tmp_path: Path, no_spark: None) -> None:
    data, named = CASE_DUPLICATES[name]
    with pytest.raises(SchemaMismatchError) as info:
        dvengine.write(data, str(tmp_path / "t"))
    assert all(n in str(info.value) for n in named)
    assert list(tmp_path.iterdir()) == []


def test_write_case_duplicate_columns_existing_table_unchanged(table: Path, no_spark: None) -> None:
    before = folder_state(table)
    with pytest.raises(SchemaMismatchError, match="'id' and 'ID'"):
        dvengine.write(pa.table({"id": [1], "name": ["x"], "ID": [3]}), str(table), mode="append")
    assert folder_state(table) == before


def test_write_case_duplicate_columns_pandas(tmp_path: Path, no_spark: None) -> None:
    with pytest.raises(SchemaMismatchError, match="'a' and 'A'"):
        dvengine.write(pd.DataFrame({"a": [1], "A": [2]}), str(tmp_path / "t"))
    assert list(tmp_path.iterdir()) == []


def test_write_bad_mode_names_it(table: Path, no_spark: None) -> None:
    before = folder_state(table)
    with pytest.raises(InvalidArgumentError, match="'upsert'"):
        dvengine.write(rows(), str(table), mode="upsert")
    assert folder_state(table) == before


def test_write_case_duplicate_columns_spark_dataframe(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1, 2)], "a long, A long")
    with pytest.raises(SchemaMismatchError, match="'a' and 'A'"):
        dvengine.write(df, str(tmp_path / "t"), spark=spark)
    assert list(tmp_path.iterdir()) == []


def test_write_pandas_dataframe_is_accepted(spark: Any, tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": [3, 1, 2], "name": ["c", "a", "b"]})
    assert dvengine.write(frame, str(tmp_path / "t"), spark=spark) == 0
    assert sorted(DeltaTable.forPath(None, tmp_path / "t").toArrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "c"},
    ]


# --- data-file faults (Arrow reader, no JVM) --------------------------------------------------


def _data_file(root: Path) -> Path:
    files = sorted(root.glob("*.parquet"))
    assert len(files) == 1
    return files[0]


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "garbage-same-size": lambda b: bytes(range(256)) * (len(b) // 256) + b"x" * (len(b) % 256),
    "truncated-half": lambda b: b[: len(b) // 2],
    "truncated-footer": lambda b: b[:-9],
    "empty": lambda b: b"",
    "text": lambda b: b"id,name\n1,a\n",
    "zeroed-middle": lambda b: b[:4] + b"\0" * (len(b) - 12) + b[-8:],
    "magic-only": lambda b: b"PAR1PAR1",
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_datafile_unreadable(name: str, table: Path) -> None:
    f = _data_file(table)
    f.write_bytes(CORRUPTIONS[name](f.read_bytes()))
    before = folder_state(table)
    with pytest.raises(DataFileError) as info:
        DeltaTable.forPath(None, table).toArrow()
    assert f.name in str(info.value) and str(table) in str(info.value)
    assert isinstance(info.value.__cause__, (pa.ArrowException, OSError))
    assert folder_state(table) == before


def test_datafile_replaced_by_folder(table: Path) -> None:
    f = _data_file(table)
    f.unlink()
    f.mkdir()
    with pytest.raises(DataFileError, match=f.name):
        DeltaTable.forPath(None, table).toArrow()


def test_datafile_missing(table: Path) -> None:
    f = _data_file(table)
    f.unlink()
    with pytest.raises(LogCorruptedError, match=f"{f.name}.*is missing"):
        DeltaTable.forPath(None, table).toArrow()


# --- check_python_workers (fake sessions: no second SparkContext) -----------------------------


def _fake_session(app_id: str) -> Any:
    return SimpleNamespace(_jsc=object(), sparkContext=SimpleNamespace(applicationId=app_id, pythonExec="/usr/bin/python3"))


@pytest.fixture
def fresh_worker_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from dvengine.engine.spark import workers

    monkeypatch.setattr(workers, "_CHECKED_APPLICATIONS", set())
    yield workers


def test_workers_without_dvengine(fresh_worker_cache: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    original = RuntimeError(
        "An error occurred while calling o42.collect.\n: org.apache.spark.SparkException: Job aborted\n"
        "Traceback (most recent call last):\n  File \"<string>\", line 1\nModuleNotFoundError: No module named 'dvengine'\n"
        "\tat org.apache.spark.api.python.BasePythonRunner..."
    )

    def broken(_: Any) -> list[Any]:
        raise original

    monkeypatch.setattr(fresh_worker_cache, "_probe_python_workers", broken)
    with pytest.raises(SparkEnvironmentError) as info:
        fresh_worker_cache.check_python_workers(_fake_session("app-broken"))
    message = str(info.value)
    assert "'/usr/bin/python3'" in message and "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message
    assert "ModuleNotFoundError: No module named 'dvengine'" in message and "\n" not in message
    assert info.value.__cause__ is original
    assert isinstance(info.value, DvengineError)


def test_workers_wrong_answer(fresh_worker_cache: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fresh_worker_cache, "_probe_python_workers", lambda _: [])
    with pytest.raises(SparkEnvironmentError, match=r"returned \[\]"):
        fresh_worker_cache.check_python_workers(_fake_session("app-empty"))


def test_workers_checked_once_per_application(fresh_worker_cache: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def probe(spark: Any) -> list[int]:
        calls.append(spark.sparkContext.applicationId)
        return [1]

    monkeypatch.setattr(fresh_worker_cache, "_probe_python_workers", probe)
    for app in ("app-1", "app-1", "app-2", "app-1"):
        fresh_worker_cache.check_python_workers(_fake_session(app))
    assert calls == ["app-1", "app-2"]


def test_workers_real_session_passes(spark: Any, fresh_worker_cache: Any) -> None:
    fresh_worker_cache.check_python_workers(spark)
    assert spark.sparkContext.applicationId in fresh_worker_cache._CHECKED_APPLICATIONS


# --- CLI: usage errors (exit 2) ---------------------------------------------------------------

USAGE_ERRORS = {
    "no-command": ([], "command"),
    "unknown-command": (["bogus"], "'bogus'"),
    "show-no-path": (["show"], "path"),
    "show-negative-limit": (["show", "{t}", "--limit", "-5"], "-5"),
    "show-limit-not-a-number": (["show", "{t}", "--limit", "ten"], "'ten'"),
    "show-bad-format": (["show", "{t}", "--format", "csv"], "'csv'"),
    "history-negative-limit": (["history", "{t}", "--limit", "-1"], "-1"),
    "update-set-no-equals": (["update", "{t}", "--set", "no_equals_sign"], "'no_equals_sign'"),
    "update-set-no-column": (["update", "{t}", "--set", "=1"], "'=1'"),
    "update-set-no-expression": (["update", "{t}", "--set", "name="], "'name='"),
    "update-no-set": (["update", "{t}", "--where", "id = 1"], "--set"),
    "delete-bad-mode": (["delete", "{t}", "--mode", "fast"], "'fast'"),
    "create-no-from": (["create", "{t}"], "--from"),
    "upsert-empty-key": (["upsert", "{t}", "--source", "x.parquet", "--key", " , "], "--key"),
    "unknown-option": (["show", "{t}", "--colour"], "--colour"),
}


@pytest.mark.parametrize("name", sorted(USAGE_ERRORS))
def test_cli_usage_error(name: str, table: Path, capsys: pytest.CaptureFixture[str], no_spark: None) -> None:
    argv, named = USAGE_ERRORS[name]
    before = folder_state(table)
    assert cli_main([a.format(t=table) for a in argv]) == 2
    captured = capsys.readouterr()
    assert named in one_error_line(captured.err) and captured.out == ""
    assert folder_state(table) == before


# --- CLI: failures (exit 1), all detected before Spark -----------------------------------------


def _not_parquet(tmp_path: Path) -> Path:
    f = tmp_path / "rows.csv"
    f.write_text("id,name\n1,a\n")
    return f


def _parquet(tmp_path: Path) -> Path:
    f = tmp_path / "rows.parquet"
    pq.write_table(rows(), f)
    return f


CLI_FAILURES: dict[str, tuple[Callable[[Path, Path], list[str]], str, str]] = {
    # name: (argv from (table, tmp_path), error class, text the message must contain)
    "show-missing-table": (lambda t, d: ["show", str(d / "none")], "TableNotFoundError", "none"),
    "inspect-missing-table": (lambda t, d: ["inspect", str(d / "none")], "TableNotFoundError", "none"),
    "history-missing-table": (lambda t, d: ["history", str(d / "none")], "TableNotFoundError", "none"),
    "vacuum-missing-table": (lambda t, d: ["vacuum", str(d / "none")], "TableNotFoundError", "none"),
    "purge-missing-table": (lambda t, d: ["purge", str(d / "none")], "TableNotFoundError", "none"),
    "delete-missing-table": (lambda t, d: ["delete", str(d / "none"), "--where", "id = 1"], "TableNotFoundError", "none"),
    "show-hdfs": (lambda t, d: ["show", "hdfs://nn/t"], "UnsupportedStorageError", "hdfs://nn/t"),
    "delete-wasbs": (lambda t, d: ["delete", "wasbs://c@a.blob.core.windows.net/t"], "UnsupportedStorageError", "wasbs://"),
    "create-hdfs": (lambda t, d: ["create", "hdfs://nn/t", "--from", str(_parquet(d))], "UnsupportedStorageError", "hdfs://nn/t"),
    "show-file-as-table": (lambda t, d: ["show", str(_not_parquet(d))], "InvalidArgumentError", "rows.csv"),
    "show-version-out-of-range": (lambda t, d: ["show", str(t), "--version", "99"], "VersionNotFoundError", "99"),
    "create-from-missing": (
        lambda t, d: ["create", str(d / "new"), "--from", str(d / "missing.parquet")],
        "InvalidArgumentError",
        "missing.parquet",
    ),
    "create-from-not-parquet": (
        lambda t, d: ["create", str(d / "new"), "--from", str(_not_parquet(d))],
        "InvalidArgumentError",
        "rows.csv",
    ),
    "create-at-a-file-path": (
        lambda t, d: ["create", "{t}", "--from", str(_parquet(d))], "InvalidArgumentError", "is an existing file"
    ),
    "create-existing-table": (
        lambda t, d: ["create", str(t), "--from", str(_parquet(d))], "TableAlreadyExistsError", "already exists"
    ),
    "upsert-source-missing": (
        lambda t, d: ["upsert", str(t), "--source", str(d / "missing.parquet"), "--key", "id"],
        "InvalidArgumentError",
        "missing.parquet",
    ),
    "upsert-source-not-parquet": (
        lambda t, d: ["upsert", str(t), "--source", str(_not_parquet(d)), "--key", "id"],
        "InvalidArgumentError",
        "rows.csv",
    ),
    "delete-unknown-column": (lambda t, d: ["delete", str(t), "--where", "nope > 1"], "UnresolvedColumnError", "'nope'"),
    "delete-syntax-error": (lambda t, d: ["delete", str(t), "--where", "id >"], "InvalidPredicateError", "syntax error"),
    "delete-deep-nesting": (
        lambda t, d: ["delete", str(t), "--where", "(" * 3000 + "id > 1" + ")" * 3000],
        "InvalidPredicateError",
        "nested too deeply",
    ),
    "delete-wrong-type": (lambda t, d: ["delete", str(t), "--where", "id = 'abc'"], "InvalidPredicateError", "'abc'"),
    "update-unknown-column-in-set": (
        lambda t, d: ["update", str(t), "--set", "name = nope || 'x'", "--where", "id = 1"],
        "UnresolvedColumnError",  # an InvalidPredicateError and, as in Spark, an AnalysisException
        "'nope'",
    ),
    "update-unknown-column-in-where": (
        lambda t, d: ["update", str(t), "--set", "name = 'x'", "--where", "idd = 1"],
        "UnresolvedColumnError",
        "'idd'",
    ),
}


@pytest.mark.parametrize("name", sorted(CLI_FAILURES))
def test_cli_failure(name: str, table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: None) -> None:
    make_argv, error_class, named = CLI_FAILURES[name]
    argv = [a.replace("{t}", str(_data_file(table))) for a in make_argv(table, tmp_path)]
    before = folder_state(table)
    assert cli_main(argv) == 1
    captured = capsys.readouterr()
    message = one_error_line(captured.err)
    assert message.startswith(f"{error_class}: ") and named in message, message
    assert "Traceback" not in captured.err and captured.out == ""
    assert folder_state(table) == before
    assert not (tmp_path / "new").exists()


def test_cli_show_garbage_data_file(table: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _data_file(table)
    f.write_bytes(b"not parquet at all")
    assert cli_main(["show", str(table)]) == 1
    message = one_error_line(capsys.readouterr().err)
    assert message.startswith("DataFileError: ") and f.name in message


def test_cli_multiline_message_folded(table: Path, capsys: pytest.CaptureFixture[str], no_spark: None) -> None:
    # sqlglot's syntax errors span several lines (message, then the text with a marker)
    assert cli_main(["delete", str(table), "--where", "id > (1 +\n 2"]) == 1
    assert "syntax error" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("where", ["first", "last"])
def test_cli_debug_shows_traceback(where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["show", str(tmp_path / "none")]
    argv = ["--debug", *argv] if where == "first" else [*argv, "--debug"]
    assert cli_main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("dvengine: error: TableNotFoundError: ")


def test_cli_spark_error_is_one_line(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Spark runtime error (ANSI cast of 'n0' to a number) is translated at the executor boundary into
    dvengine's EvaluationError, printed as one line that keeps Spark's error class."""
    source = _parquet(tmp_path)
    assert cli_main(["create", str(tmp_path / "s"), "--from", str(source)]) == 0
    capsys.readouterr()
    before = folder_state(tmp_path / "s")
    assert cli_main(["delete", str(tmp_path / "s"), "--where", "name > 5"]) == 1
    message = one_error_line(capsys.readouterr().err)
    assert message.startswith("EvaluationError: ") and "CAST_INVALID_INPUT" in message and "\tat " not in message
    assert folder_state(tmp_path / "s") == before


# --- CLI in a subprocess: real exit codes, and stderr exactly one line --------------------------


def _run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    return subprocess.run(
        [sys.executable, "-m", "dvengine.cli", *args], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("args", "code", "named"),
    [
        (["show", "missing-table"], 1, "TableNotFoundError"),
        (["show", "{t}", "--limit", "-5"], 2, "-5"),
        (["create", "new", "--from", "missing.parquet"], 1, "missing.parquet"),
        (["bogus"], 2, "'bogus'"),
    ],
    ids=["missing-table", "negative-limit", "create-from-missing", "unknown-command"],
)
def test_cli_subprocess_exit_codes(args: list[str], code: int, named: str, table: Path, tmp_path: Path) -> None:
    result = _run_cli([a.format(t=table) for a in args], tmp_path)
    assert result.returncode == code, result.stderr
    assert named in one_error_line(result.stderr) and result.stdout == ""
    assert not (tmp_path / "new").exists()


def test_cli_subprocess_spark_failure_is_one_line(tmp_path: Path) -> None:
    """With a JVM of its own: no start-up banner, log lines, JSON logs or Java stacks on stderr."""
    source = _parquet(tmp_path)
    write_deltalake(str(tmp_path / "t"), pq.read_table(source))
    before = folder_state(tmp_path / "t")
    result = _run_cli(["delete", "t", "--where", "name > 5"], tmp_path)
    assert result.returncode == 1
    assert "CAST_INVALID_INPUT" in one_error_line(result.stderr), result.stderr
    assert folder_state(tmp_path / "t") == before


def test_catalogue_types_are_typed() -> None:
    """Every error class the catalogue relies on is a DvengineError (TypeError stays builtin on purpose)."""
    for cls in (DataFileError, SparkEnvironmentError, UnsupportedStorageError, InvalidArgumentError, SchemaMismatchError):
        assert issubclass(cls, DvengineError)
    assert issubclass(InvalidArgumentError, ValueError)
    assert isinstance(SCHEMA, StructType)
