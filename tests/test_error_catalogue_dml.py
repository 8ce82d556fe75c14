"""Error catalogue, DML part: UPDATE, MERGE and DML on damaged tables, on both executors.

Each case asserts the error class, that the message names the problem (column, file, value),
and that the table folder is byte-for-byte unchanged with no new files. The first part of the
catalogue (paths, properties, predicates, writes, data files, CLI) is test_error_catalogue.py;
concurrency losers are in test_failed_command_cleanup.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dml_helpers import engine_per_strategy, folder_state  # noqa: F401  (engine_per_strategy: the "engine" fixture)

import dvengine
from dvengine import DeltaTable
from dvengine.errors import (
    DataFileError,
    DeletionVectorError,
    EvaluationError,
    InvalidArgumentError,
    InvalidPredicateError,
    LogCorruptedError,
    MergeCardinalityError,
    NotLocallyEvaluableError,
    SchemaMismatchError,
    SchemaViolationError,
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    for i in range(2):
        ids = np.arange(i * 50, (i + 1) * 50, dtype=np.int64)
        data = pa.table(
            {
                "id": ids,
                "name": [f"n{x % 5}" for x in ids.tolist()],
                "cnt": (ids % 7).astype(np.int32),
                "tiny": (ids % 3).astype(np.int8),
            }
        )
        dvengine.write(data, str(path), mode="append" if i else "error")
    DeltaTable.forPath(None, path).deleteMetrics("id IN (3, 77)", engine="local")  # both files carry a DV
    return path


def _assert_refused(path: Path, action: Callable[[], Any], error: type[BaseException], *fragments: str) -> None:
    before = folder_state(path)
    with pytest.raises(error) as info:
        action()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert folder_state(path) == before


# --- UPDATE ---------------------------------------------------------------------------------------

UPDATE_CASES = [
    ("unknown-column", "id = 1", {"nope": "1"}, InvalidPredicateError, ("nope",)),
    ("string-into-int", "id = 1", {"cnt": "'abc'"}, (SchemaViolationError, NotLocallyEvaluableError, InvalidPredicateError), ("cnt",)),
    ("overflow-int", "id = 1", {"cnt": "cnt + 2147483647"}, (SchemaViolationError, EvaluationError), ("cnt",)),
    ("overflow-tinyint-literal", "id = 1", {"tiny": "1000"}, (SchemaViolationError, InvalidPredicateError), ("tiny",)),
    ("assigned-twice", "id = 1", {"cnt": "1", "CNT": "2"}, InvalidArgumentError, ("cnt",)),
    ("empty-set", "id = 1", {}, InvalidArgumentError, ("assignment",)),
    ("bad-condition", "idd = 1", {"cnt": "1"}, InvalidPredicateError, ("idd",)),
    ("syntax", "id = = 1", {"cnt": "1"}, InvalidPredicateError, ()),
]


@pytest.mark.parametrize(("case", "condition", "assignments", "error", "fragments"), UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update_errors(
    spark: Any, table: Path, engine: str, case: str, condition: str, assignments: dict[str, str],
    error: Any, fragments: tuple[str, ...],
) -> None:
    session = spark if engine == "spark" else None
    _assert_refused(
        table, lambda: DeltaTable.forPath(session, table).updateMetrics(condition, assignments, engine=engine), error, *fragments
    )


@pytest.mark.parametrize("bad_set", [[("cnt", "1")], "cnt = 1", {1: "2"}, {"cnt": 5}], ids=["list", "str", "int-key", "int-value"])
def test_update_argument_types(spark: Any, table: Path, engine: str, bad_set: Any) -> None:
    session = spark if engine == "spark" else None
    _assert_refused(table, lambda: DeltaTable.forPath(session, table).updateMetrics("id = 1", bad_set, engine=engine), TypeError)


# --- MERGE ----------------------------------------------------------------------------------------


def _source(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"s{i}" for i in ids],
            "cnt": pa.array([1] * len(ids), pa.int32()),
            "tiny": pa.array([1] * len(ids), pa.int8()),
        }
    )


MERGE_CASES: list[tuple[str, Callable[[Any], Any], Any, tuple[str, ...]]] = [
    ("duplicate-source-keys", lambda b: b.whenMatchedUpdateAll(), MergeCardinalityError, ("multiple source rows",)),
    ("unknown-target-column", lambda b: b.whenMatchedUpdate(set={"nope": "s.cnt"}), SchemaMismatchError, ("nope",)),
    ("no-clauses", lambda b: b, InvalidArgumentError, ("WHEN",)),
    ("unconditional-not-last", lambda b: b.whenMatchedDelete().whenMatchedUpdateAll(), InvalidArgumentError, ("last",)),
    ("insert-reads-target", lambda b: b.whenNotMatchedInsert(values={"id": "t.id"}), InvalidPredicateError, ("t",)),
    ("null-into-not-null-free-type", lambda b: b.whenMatchedUpdate(set={"cnt": "s.name"}), (SchemaViolationError, EvaluationError, InvalidPredicateError), ()),
]


@pytest.mark.parametrize(("case", "clauses", "error", "fragments"), MERGE_CASES, ids=[c[0] for c in MERGE_CASES])
def test_merge_errors(
    spark: Any, table: Path, engine: str, case: str, clauses: Callable[[Any], Any], error: Any, fragments: tuple[str, ...]
) -> None:
    session = spark if engine == "spark" else None
    source = _source([5, 5, 6] if case == "duplicate-source-keys" else [5, 6, 1000])

    def run() -> Any:
        builder = DeltaTable.forPath(session, table).alias("t").merge(source, "t.id = s.id", source_alias="s")
        return clauses(builder.withEngine(engine)).executeMetrics()

    _assert_refused(table, run, error, *fragments)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda t, s: t.merge(s, 42), TypeError),
        (lambda t, s: t.merge([1, 2], "t.id = s.id"), TypeError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").whenMatchedUpdate(set=None), ValueError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").whenMatchedUpdate(set=[("cnt", "1")]), TypeError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").whenNotMatchedInsert(values=None), ValueError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").whenMatchedDelete(condition=3), TypeError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").withMode("fast"), InvalidArgumentError),
        (lambda t, s: t.merge(s, "t.id = s.id", source_alias="s").withEngine("gpu"), InvalidArgumentError),
    ],
    ids=["condition-int", "source-list", "set-none", "set-list", "values-none", "condition-int-clause", "mode", "engine"],
)
def test_merge_builder_checks_arguments_at_call_time(table: Path, call: Callable[[Any, Any], Any], error: Any) -> None:
    t = DeltaTable.forPath(None, table).alias("t")
    _assert_refused(table, lambda: call(t, _source([1])), error)


# --- DML on damaged tables ----------------------------------------------------------------------


def _first_data_file(path: Path) -> Path:
    return path / DeltaTable.forPath(None, path).snapshot().files[0].path


def _damage(path: Path, how: str) -> str:
    """Damage the table; returns the name the error must mention."""
    snapshot = DeltaTable.forPath(None, path).snapshot()
    add = next(a for a in snapshot.files if '"minValues":{"id":0' in (a.stats or ""))  # holds the ids every case touches
    data = path / add.path
    if how == "missing-data-file":
        os.unlink(data)
        return add.path
    if how == "garbage-data-file":
        data.write_bytes(b"not parquet at all" * 10)
        return add.path
    if how == "truncated-data-file":
        os.truncate(data, data.stat().st_size // 2)
        return add.path
    raise AssertionError(how)


DAMAGE = [
    ("missing-data-file", (LogCorruptedError,)),
    ("garbage-data-file", (DataFileError, LogCorruptedError)),
    ("truncated-data-file", (DataFileError, LogCorruptedError)),
]


@pytest.mark.parametrize("operation", ["delete", "update", "merge"])
@pytest.mark.parametrize(("how", "errors"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_dml_on_damaged_tables(spark: Any, table: Path, engine: str, operation: str, how: str, errors: Any) -> None:
    name = _damage(table, how)
    session = spark if engine == "spark" else None
    t = DeltaTable.forPath(session, table)
    actions: dict[str, Callable[[], Any]] = {
        "delete": lambda: t.deleteMetrics("id >= 0 AND id < 10", engine=engine, mode="dv"),
        "update": lambda: t.updateMetrics("id >= 0 AND id < 10", {"cnt": "cnt + 1"}, engine=engine, mode="dv"),
        "merge": lambda: t.alias("t").merge(_source([1, 2]), "t.id = s.id", source_alias="s").withEngine(engine)
        .whenMatchedUpdateAll().executeMetrics(),
    }
    _assert_refused(table, actions[operation], errors, os.path.basename(name) if engine == "local" else "")


def test_dml_with_a_missing_dv_file(spark: Any, tmp_path: Path, engine: str) -> None:
    path = tmp_path / "t"
    ids = np.arange(0, 4000, dtype=np.int64)
    dvengine.write(pa.table({"id": ids, "cnt": (ids % 7).astype(np.int32)}), str(path))
    DeltaTable.forPath(None, path).deleteMetrics("id % 3 = 0", engine="local", mode="dv")  # large: a DV file
    dv_files = list(path.rglob("deletion_vector_*.bin"))
    assert dv_files
    dv_files[0].unlink()
    session = spark if engine == "spark" else None
    _assert_refused(
        path, lambda: DeltaTable.forPath(session, path).deleteMetrics("id % 3 = 1", engine=engine, mode="dv"),
        DeletionVectorError, "deletion vector",
    )
