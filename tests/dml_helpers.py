"""Building small tables for DML tests and snapshotting the log to prove 'no commit happened'."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine.engine.local.merge as local_merge
from dvengine.api import dml
from dvengine.log import load_snapshot, loader


def make_table(
    spark: Any,
    path: Path,
    n: int = 200,
    files: int = 4,
    partition_by: list[str] | None = None,
    configuration: dict[str, str] | None = None,
) -> list[tuple[int, str, int]]:
    """A table of (id, name, part) rows written in ``files`` files sorted by id; returns the rows."""
    from dvengine.engine.spark.write_api import write

    rows = [(i, f"n{i % 7}", i % 3) for i in range(n)]
    data = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "part": pa.array([r[2] for r in rows], pa.int32()),
        }
    )
    df = spark.createDataFrame(data).repartitionByRange(files, "id")
    write(df, str(path), partitionBy=partition_by, configuration=configuration, spark=spark)
    return rows


def log_listing(path: Path) -> list[str]:
    return sorted(os.listdir(path / "_delta_log"))


def data_listing(path: Path) -> list[str]:
    return sorted(
        str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and "_delta_log" not in p.parts
    )


def folder_state(folder: Path) -> dict[str, str]:
    """{relative path: sha256 of the bytes} of every file under ``folder`` (empty if it does not exist):
    equal before and after means byte-for-byte unchanged with no new or removed files."""
    if not folder.exists():
        return {}
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


STRATEGY_CONF = "dvengine.spark.dmlStrategy"


@contextmanager
def spark_conf(spark: Any, key: str, value: str | None) -> Iterator[None]:
    """Run the block with the session conf ``key`` set to ``value`` (None: leave as is), then
    put back what was there."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def spark_dml_strategy(spark: Any, strategy: str | None) -> Any:
    """Run the block with the Spark executor's DML strategy set (None: leave as is)."""
    return spark_conf(spark, STRATEGY_CONF, strategy)


def engine_and_strategy(name: str) -> tuple[str, str | None]:
    """Test parameter names: "spark-rows" / "spark-files" force the Spark executor's strategy."""
    engine, _, strategy = name.partition("-")
    return engine, strategy or None


@contextmanager
def default_engine(spark: Any, name: str) -> Iterator[None]:
    """Run the block with ``dvengine.execution.engine`` (and, for "spark-rows"/"spark-files", the
    Spark strategy) as the session default, for tests whose commands pass no engine."""
    engine, strategy = engine_and_strategy(name)
    with spark_conf(spark, "dvengine.execution.engine", engine), spark_dml_strategy(spark, strategy):
        yield


# "spark" runs DELETE/UPDATE as file tasks where it can; "spark-rows" forces the row plan.
ENGINES_WITH_STRATEGIES = ["local", "spark", "spark-rows"]


@pytest.fixture(params=ENGINES_WITH_STRATEGIES, name="engine")
def engine_per_strategy(request: pytest.FixtureRequest, spark: Any) -> Iterator[str]:
    """The ``engine`` of a test, once per executor and Spark strategy (import it to use it)."""
    name, strategy = engine_and_strategy(request.param)
    with spark_dml_strategy(spark, strategy):
        yield name


def merge_builder(
    spark: Any, table_root: str, target_alias: str | None, source: Any, condition: Any, source_alias: str | None = None
) -> Any:
    """A MERGE of ``source`` into the table at ``table_root``, as ``forPath(...).alias(t).merge(...)`` starts it."""
    from dvengine import DeltaTable

    table = DeltaTable.forPath(spark, table_root)
    if target_alias:
        table = table.alias(target_alias)
    return table.merge(source, condition, source_alias=source_alias)


def plan_from_now_on(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """DELETE / UPDATE / MERGE started from now on plan against the table as it is now: a
    concurrent writer's stale view, so the row-level tests can make two commands race."""
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: they list
    stale = load_snapshot(str(path))
    for module in (dml, local_merge):
        monkeypatch.setattr(module, "load_snapshot", lambda root: stale)


def assert_every_reader_sees(path: Path, columns: list[str], expected: list[tuple[Any, ...]]) -> None:
    """dvengine's Arrow reader, delta-rs and DuckDB all read exactly ``expected`` (any order)."""
    want = sort_rows(expected)
    assert rows_arrow(path, columns) == want
    assert rows_delta_rs(path, columns) == want
    assert rows_duckdb(path, columns) == want


def record_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, argument: int) -> list[Any]:
    """Record positional argument ``argument`` of every call of ``owner.name`` from now on, in
    order; the calls themselves still run."""
    calls: list[Any] = []
    real = getattr(owner, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[argument])
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return calls


def count_log_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every full listing of a ``_delta_log`` the loader makes from now on (the table roots,
    in order); the listing itself still runs."""
    return record_calls(monkeypatch, loader, "list_log", 1)
