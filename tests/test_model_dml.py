"""Model-based test: random interleavings of append / delete / update / merge (all modes, partitioned
or not, several files, DVs accumulating) must leave exactly the rows of an in-memory model,
as seen by dvengine's Arrow and Spark readers, delta-rs and DuckDB.

DELETE and UPDATE run on each executor (``engine`` local, spark, auto; MERGE always runs on
Spark). Each predicate and assignment knows whether the local executor can evaluate it: with
``engine="local"`` the others must be refused without a commit, with ``auto`` they must go to Spark.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import engine_and_strategy, spark_dml_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import assert_all_readers, rows_arrow, sort_rows

from dvengine import DeltaTable
from dvengine.errors import InvalidPredicateError

Row = tuple[int, str, int]
COLS = ["id", "name", "part"]


@dataclass(frozen=True)
class Pred:
    sql: str
    test: Callable[[Row], bool]
    local: bool = True  # the local executor evaluates it (no functions)

    def __repr__(self) -> str:
        return self.sql


def _initcap(text: str) -> str:
    """Spark's initcap for the one-word names of this table: first letter upper, the rest lower."""
    return text[:1].upper() + text[1:].lower()


def _spark_only_predicate(j: int) -> Pred:
    return Pred(f"initcap(name) = 'N{j}'", lambda x: _initcap(x[1]) == f"N{j}", local=False)


def predicates() -> st.SearchStrategy[Pred]:
    return st.one_of(
        st.builds(
            lambda k, r: Pred(f"id % {k} = {r % k}", lambda x: x[0] % k == r % k),
            st.integers(2, 7), st.integers(0, 6),
        ),
        st.builds(lambda n: Pred(f"length(name) = {n}", lambda x: len(x[1]) == n), st.integers(2, 3)),
        # initcap() has no Arrow kernel: the local executor refuses it, "auto" must pick Spark
        # (test_spark_only_examples_are_refused_locally keeps that premise checked)
        st.builds(_spark_only_predicate, st.integers(0, 6)),
        st.builds(
            lambda a, b: Pred(f"id IN ({a}, {b}, NULL)", lambda x: x[0] in (a, b)), st.integers(0, 150), st.integers(0, 150)
        ),
        st.builds(lambda v: Pred(f"id < {v}", lambda x: x[0] < v), st.integers(0, 120)),
        st.builds(lambda j: Pred(f"name = 'n{j}'", lambda x: x[1] == f"n{j}"), st.integers(0, 6)),
        st.builds(lambda p: Pred(f"part = {p}", lambda x: x[2] == p), st.integers(0, 2)),
        st.builds(
            lambda a, b: Pred(f"id BETWEEN {a} AND {a + b}", lambda x: a <= x[0] <= a + b),
            st.integers(0, 100), st.integers(0, 30),
        ),
        st.builds(
            lambda p, v: Pred(f"part = {p} AND id > {v}", lambda x: x[2] == p and x[0] > v),
            st.integers(0, 2), st.integers(0, 100),
        ),
    )


# (assignments, effect on a row, whether the local executor evaluates them)
ASSIGNMENTS: list[tuple[dict[str, str], Callable[[Row], Row], bool]] = [
    ({"name": "concat(initcap(name), 'u')"}, lambda r: (r[0], _initcap(r[1]) + "u", r[2]), False),
    ({"part": "(part + 1) % 3"}, lambda r: (r[0], r[1], (r[2] + 1) % 3), True),
    ({"id": "id + 1000", "name": "'moved'"}, lambda r: (r[0] + 1000, "moved", r[2]), True),
    ({"part": "part + 1", "name": "name"}, lambda r: (r[0], r[1], r[2] + 1), True),
]

modes = st.sampled_from(["dv", "rewrite", "auto"])
operations = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 40), st.integers(1, 3)),
    st.tuples(st.just("merge"), st.lists(st.integers(0, 250), min_size=1, max_size=12, unique=True), modes),
    st.tuples(st.just("delete"), predicates(), modes),
    st.tuples(st.just("update"), predicates(), st.integers(0, len(ASSIGNMENTS) - 1), modes),
)


def _append(spark: Any, path: Path, rows: list[Row], files: int, create: bool, partitioned: bool) -> None:
    from dvengine.engine.spark.write_api import write

    data = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "part": pa.array([r[2] for r in rows], pa.int32()),
        }
    )
    df = spark.createDataFrame(data).repartition(files)
    write(df, str(path), mode="error" if create else "append",
          partitionBy=["part"] if (create and partitioned) else None, spark=spark)


def _upsert(spark: Any, path: Path, rows: list[Row], mode: str) -> dict[str, Any]:
    source = spark.createDataFrame(rows, "id long, name string, part int").alias("s")
    return (
        DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode(mode).executeMetrics()
    )


def _expect_engine(
    table: DeltaTable, engine: str, local_ok: bool, run: Callable[[], dict[str, Any]]
) -> dict[str, Any] | None:
    """Run a DELETE/UPDATE; None when the local executor refused it (and so nothing was committed)."""
    if engine == "local" and not local_ok:
        version = table.version()
        with pytest.raises(InvalidPredicateError, match="cannot run on the local executor"):
            run()
        assert table.version() == version
        return None
    metrics = run()
    expected = {"local": "local", "spark": "spark", "auto": "local" if local_ok else "spark"}[engine]
    assert metrics["executionEngine"] == expected
    return metrics


# spark-files / spark-rows: the Spark executor's two DELETE/UPDATE strategies, forced (plain
# "spark" is its default choice, files wherever the embedded evaluator is exact).
@pytest.mark.parametrize("engine_name", ["local", "spark", "spark-files", "spark-rows", "auto"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(partitioned=st.booleans(), initial=st.integers(20, 120), ops=st.lists(operations, min_size=2, max_size=5))
def test_random_dml_sequences_match_model(
    spark: Any, tmp_path: Path, engine_name: str, partitioned: bool, initial: int, ops: list[Any]
) -> None:
    engine, strategy = engine_and_strategy(engine_name)
    if strategy == "files":  # forced file tasks refuse what the embedded evaluator cannot do exactly
        ops = [op for op in ops if op[0] not in ("delete", "update") or (op[1].local and (op[0] == "delete" or ASSIGNMENTS[op[2]][2]))]
    with spark_dml_strategy(spark, strategy):
        _run_sequence(spark, tmp_path, engine, partitioned, initial, ops)


def _run_sequence(spark: Any, tmp_path: Path, engine: str, partitioned: bool, initial: int, ops: list[Any]) -> None:
    path = tmp_path / uuid.uuid4().hex
    next_id = initial
    model: list[Row] = [(i, f"n{i % 7}", i % 3) for i in range(initial)]
    _append(spark, path, model, files=3, create=True, partitioned=partitioned)
    table = DeltaTable.forPath(spark, path)
    for op in ops:
        if op[0] == "append":
            new = [(i, f"n{i % 7}", i % 3) for i in range(next_id, next_id + op[1])]
            next_id += op[1]
            _append(spark, path, new, files=op[2], create=False, partitioned=partitioned)
            model += new
        elif op[0] == "delete":
            pred, mode = op[1], op[2]
            deleted = _expect_engine(table, engine, pred.local, lambda: table.deleteMetrics(pred.sql, mode=mode, engine=engine))
            if deleted is None:
                assert rows_arrow(path, COLS) == sort_rows(model), op
                continue
            metrics = deleted
            kept = [r for r in model if not pred.test(r)]
            assert metrics["numDeletedRows"] == len(model) - len(kept), (pred, mode)
            model = kept
        elif op[0] == "merge":
            keys, mode = op[1], op[2]
            source = [(k, f"m{k % 5}", (k + 1) % 3) for k in keys]
            metrics = _upsert(spark, path, source, mode)
            present = {r[0] for r in model}
            by_key = {r[0]: r for r in source}
            assert metrics["numTargetRowsInserted"] == sum(1 for k in keys if k not in present), (keys, mode)
            assert metrics["numTargetRowsUpdated"] == sum(1 for r in model if r[0] in by_key), (keys, mode)
            model = [by_key.get(r[0], r) for r in model] + [r for r in source if r[0] not in present]
        else:
            pred, which, mode = op[1], op[2], op[3]
            assignment, apply, local_ok = ASSIGNMENTS[which]
            updated = _expect_engine(
                table, engine, pred.local and local_ok, lambda: table.updateMetrics(pred.sql, assignment, mode=mode, engine=engine)
            )
            if updated is None:
                assert rows_arrow(path, COLS) == sort_rows(model), op
                continue
            metrics = updated
            assert metrics["numUpdatedRows"] == sum(1 for r in model if pred.test(r)), (pred, mode)
            if mode == "dv" and metrics["numUpdatedRows"]:
                assert metrics["numCopiedRows"] == 0
            model = [apply(r) if pred.test(r) else r for r in model]
        assert rows_arrow(path, COLS) == sort_rows(model), op
    assert_all_readers(spark, path, COLS, model)


def test_spark_only_examples_are_refused_locally(tmp_path: Path) -> None:
    """The random test above counts on its Spark-only predicate and assignment being refused by the
    local executor; when the Arrow evaluator learns initcap this fails here, deterministically,
    instead of as a rare Hypothesis example (md5 and concat were learned that way)."""
    import dvengine

    path = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["n1", "n2"], "part": pa.array([0, 1], pa.int32())}), str(path))
    table = DeltaTable.forPath(None, path)
    for run in (
        lambda: table.deleteMetrics(_spark_only_predicate(1).sql, engine="local"),
        lambda: table.updateMetrics("id = 1", next(a for a, _, local in ASSIGNMENTS if not local), engine="local"),
    ):
        with pytest.raises(InvalidPredicateError, match="cannot run on the local executor"):
            run()
    assert table.version() == 0
