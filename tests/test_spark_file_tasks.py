"""The Spark executor's file tasks: DELETE/UPDATE as one Spark job whose tasks work on whole files.

The results are compared with an in-memory model and the independent readers; that the two Spark
strategies and the embedded executor agree under Spark SQL semantics on generated cases is
``test_engine_differential``'s job, and the random sequences of ``test_model_dml`` run with each
strategy forced. Here: how work is split, which strategy a command gets, and the job count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from dml_helpers import folder_state, spark_dml_strategy
from interop import assert_all_readers

import dvengine
from dvengine import DeltaTable
from dvengine.bench.spark_jobs import count_spark_jobs
from dvengine.engine.spark import executor as spark_executor
from dvengine.engine.spark.file_tasks import balanced_groups
from dvengine.errors import InvalidArgumentError
from dvengine.protocol.actions import AddFile

COLS = ["id", "name", "part"]


def _add(path: str, size: int) -> AddFile:
    return AddFile(path=path, partition_values={}, size=size, modification_time=0, data_change=True)


def test_balanced_groups_hand_out_every_file_once_and_even_out_sizes() -> None:
    sizes = [100, 90, 80, 10, 10, 10, 5, 5, 300]
    files = [_add(f"f{i}.parquet", s) for i, s in enumerate(sizes)]
    groups = balanced_groups(files, 3)
    assert sorted(a.path for g in groups for a in g) == sorted(a.path for a in files)
    totals = sorted(sum(a.size for a in g) for g in groups)
    # largest first onto the lightest group: 300 | 100 10 10 10 5 5 | 90 80
    assert totals == [140, 170, 300]
    assert len(balanced_groups(files[:2], 8)) == 2  # never more groups than files
    assert balanced_groups(files, 1) == (tuple(sorted(files, key=lambda a: (-a.size, a.path))),)


def _table(path: Path, files: int = 6, rows_per_file: int = 3000) -> list[tuple[int, str, int]]:
    rows: list[tuple[int, str, int]] = []
    for i in range(files):
        ids = np.arange(i * rows_per_file, (i + 1) * rows_per_file, dtype=np.int64)
        data = pa.table({"id": ids, "name": [f"n{x % 7}" for x in ids.tolist()], "part": (ids % 3).astype(np.int32)})
        dvengine.write(data, str(path), mode="append" if i else "error")
        rows += [(int(x), f"n{x % 7}", int(x % 3)) for x in ids.tolist()]
    return rows


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which strategy each Spark DELETE/UPDATE ran with."""
    ran: list[str] = []
    original = spark_executor.SparkExecutor._file_tasks

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append("files")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(spark_executor.SparkExecutor, "_file_tasks", spy)
    return ran


def test_dv_update_and_delete_over_many_files_are_one_job_each(spark: Any, tmp_path: Path, spied: list[str]) -> None:
    path = tmp_path / "t"
    model = _table(path)
    spark.conf.set("dvengine.dv.inlineMaxBytes", "0")  # every DV in a DV file: tasks pack theirs
    try:
        table = DeltaTable.forPath(spark, path)
        table.deleteMetrics("id = -1", engine="spark")  # nothing to do; the first one probes the Python workers
        with count_spark_jobs(spark, "update") as update_jobs:
            metrics = table.updateMetrics("id % 10 = 3", {"name": "'u'", "part": "part + 10"}, mode="dv", engine="spark")
        model = [(i, "u", p + 10) if i % 10 == 3 else (i, n, p) for i, n, p in model]
        assert metrics["numUpdatedRows"] == 1800 and metrics["numCopiedRows"] == 0
        assert metrics["numDeletionVectorsAdded"] == 6
        with count_spark_jobs(spark, "delete") as delete_jobs:
            metrics = table.deleteMetrics("id % 10 = 4 OR name = 'u' AND id < 3000", mode="dv", engine="spark")
        model = [r for r in model if not (r[0] % 10 == 4 or (r[1] == "u" and r[0] < 3000))]
        assert metrics["numDeletedRows"] == 1800 + 300
        assert metrics["numDeletionVectorsUpdated"] == 6
    finally:
        spark.conf.unset("dvengine.dv.inlineMaxBytes")
    assert spied == ["files", "files"]
    assert update_jobs.jobs == 1 and delete_jobs.jobs == 1
    # DV files are packed per task: fewer DV files than files with a DV
    assert 1 <= len(list(path.glob("deletion_vector_*.bin"))) < 12
    assert_all_readers(spark, path, COLS, model)


def test_rewrites_happen_in_the_same_pass(spark: Any, tmp_path: Path, spied: list[str]) -> None:
    path = tmp_path / "t"
    model = _table(path, files=3, rows_per_file=1000)
    table = DeltaTable.forPath(spark, path)
    metrics = table.updateMetrics("id < 1500", {"name": "'r'"}, mode="rewrite", engine="spark")
    assert metrics["numUpdatedRows"] == 1500 and metrics["numCopiedRows"] == 500
    assert metrics["numRemovedFiles"] == 2 and metrics["numDeletionVectorsAdded"] == 0
    model = [(i, "r", p) if i < 1500 else (i, n, p) for i, n, p in model]
    metrics = table.deleteMetrics("id >= 2500 OR id < 100", mode="auto", engine="spark")  # half of file 3: rewrite
    assert metrics["numDeletedRows"] == 600 and metrics["numCopiedRows"] > 0
    model = [r for r in model if not (r[0] >= 2500 or r[0] < 100)]
    assert spied == ["files", "files"]
    assert_all_readers(spark, path, COLS, model)


# upper(name), spelled with initcap(), which the embedded (Arrow) evaluator cannot evaluate:
# substring(x, 1, 0) is '' in Spark.
_UPPER_VIA_INITCAP = "concat(upper(name), substring(initcap(name), 1, 0))"


def test_strategy_follows_what_the_embedded_evaluator_can_do(spark: Any, tmp_path: Path, spied: list[str]) -> None:
    path = tmp_path / "t"
    model = _table(path, files=2, rows_per_file=500)
    table = DeltaTable.forPath(spark, path)
    table.deleteMetrics("length(initcap(name)) = 2 AND length(name) = 2 AND id < 10", engine="spark")  # initcap(): row plan
    assert spied == []
    table.updateMetrics("id < 20", {"name": _UPPER_VIA_INITCAP}, engine="spark")  # initcap(): row plan
    assert spied == []
    with spark_dml_strategy(spark, "rows"):
        table.deleteMetrics("id = 30", engine="spark")
    assert spied == []
    table.deleteMetrics("id = 31", engine="spark")
    assert spied == ["files"]
    model = [(i, n.upper() if i < 20 else n, p) for i, n, p in model if i >= 10 and i not in (30, 31)]
    assert_all_readers(spark, path, COLS, model)


def test_change_data_tables_use_the_row_plan(spark: Any, tmp_path: Path, spied: list[str]) -> None:
    path = tmp_path / "t"
    data = pa.table({"id": pa.array(range(100), pa.int64()), "name": ["a"] * 100, "part": pa.array([1] * 100, pa.int32())})
    dvengine.write(data, str(path), configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable.forPath(spark, path).updateMetrics("id < 5", {"name": "'b'"}, engine="spark")
    assert spied == []
    changes = DeltaTable.forPath(None, path).changes(1, 1).to_pylist()
    assert sorted((c["id"], c["_change_type"]) for c in changes) == sorted(
        [(i, "update_preimage") for i in range(5)] + [(i, "update_postimage") for i in range(5)]
    )


@pytest.mark.parametrize("value", ["sideways", "files,rows", ""])
def test_bad_strategy_is_refused_before_anything_is_written(spark: Any, tmp_path: Path, value: str) -> None:
    path = tmp_path / "t"
    _table(path, files=1, rows_per_file=100)
    before = folder_state(path)
    refused = pytest.raises(InvalidArgumentError, match="dvengine.spark.dmlStrategy must be one of")
    with spark_dml_strategy(spark, value or " "), refused:
        DeltaTable.forPath(spark, path).deleteMetrics("id = 1", engine="spark")
    assert folder_state(path) == before


def test_forcing_file_tasks_on_what_they_cannot_evaluate_is_refused(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, files=1, rows_per_file=100)
    before = folder_state(path)
    refused = pytest.raises(InvalidArgumentError, match=r"dmlStrategy=files, but UPDATE cannot run as file tasks.*'name'")
    with spark_dml_strategy(spark, "files"), refused:
        DeltaTable.forPath(spark, path).updateMetrics("id = 1", {"name": _UPPER_VIA_INITCAP}, engine="spark")
    assert folder_state(path) == before
