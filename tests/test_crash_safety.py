"""Crash safety: a writer killed (SIGKILL) at any stage leaves the table at its last commit.

Each case runs a DELETE, UPDATE or MERGE in a child process armed with ``DVENGINE_FAULT_INJECT=<stage>``; the
child kills itself at that stage. The parent then checks that every reader returns exactly the
rows of the last committed version (the model), that the dead writer's files are orphans
nobody references, and that VACUUM (retention 0, forced) reclaims exactly those orphans.

The stages are the product's own fault points (dvengine.faults.fault_point): after the
executor DV job, after data files are placed, and around the ``os.link`` that publishes a
commit (LocalLogStore.put_if_absent). The last part checks that a corrupt, truncated or missing DV file fails reads loudly.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]
COLS = ["id", "v"]


def _child(kind: str, root: str, condition: str, mode: str) -> None:
    if kind.startswith(("spark", "local")):
        from dvengine import DeltaTable

        engine = "spark" if kind.startswith("spark") else "local"
        spark = None
        if engine == "spark":
            from dvengine.engine.spark.session import get_or_create_session

            spark = get_or_create_session()
            spark.conf.set("dvengine.dv.inlineMaxBytes", "0")  # DVs in files, so orphans are visible
        else:
            os.environ["DVENGINE_DV_INLINEMAXBYTES"] = "0"  # the same setting without a session
        table = DeltaTable.forPath(spark, root)
        if kind.endswith("-update"):
            table.updateMetrics(condition, {"v": "v + 100"}, mode=mode, engine=engine)
        elif kind.endswith("-merge"):
            data = pa.table({"id": pa.array([3, 99], pa.int64()), "v": pa.array([300, 99], pa.int64())})
            source = spark.createDataFrame(data).alias("s") if spark is not None else data
            builder = table.alias("t").merge(source, "t.id = s.id", source_alias="s").withEngine(engine)
            builder.whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode(mode).executeMetrics()
        else:
            table.deleteMetrics(condition, mode=mode, engine=engine)
    else:
        from test_concurrency_support import core_delete

        core_delete(root, condition)
    sys.exit(0)  # reached only if the armed stage was never hit


def _spawn(kind: str, stage: str, root: Path, condition: str, mode: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["DVENGINE_FAULT_INJECT"] = stage
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return subprocess.Popen(
        [sys.executable, __file__, kind, str(root), condition, mode],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _files(root: Path) -> set[str]:
    out = set()
    for dirpath, _, names in os.walk(root):
        out.update(os.path.relpath(os.path.join(dirpath, n), root) for n in names)
    return out


def _make(root: Path) -> dict[int, int]:
    from test_concurrency_support import create_table

    create_table(root, [pa.table({"id": list(range(10)), "v": list(range(10))}),
                        pa.table({"id": list(range(10, 20)), "v": list(range(10, 20))})])
    return {i: i for i in range(20)}


CASES = [
    # (stage, child kind, DML mode, committed?)
    # data_files_written is hit by MERGE (after both its DV and data files), DELETE and UPDATE by
    # dv_files_written; one Spark child per case is what this test's run time is made of.
    ("dml.dv_files_written", "spark", "dv", False),
    ("dml.dv_files_written", "spark-update", "dv", False),
    ("dml.data_files_written", "spark-merge", "dv", False),
    ("dml.dv_files_written", "local", "dv", False),
    ("dml.dv_files_written", "local-update", "dv", False),
    ("dml.data_files_written", "local-merge", "dv", False),
    ("commit.before_link", "core", "dv", False),
    ("commit.after_link", "core", "dv", True),
]


def test_kill_at_every_stage_leaves_last_committed_version(spark: Any, tmp_path: Path) -> None:
    from interop import assert_all_readers, rows_arrow, rows_delta_rs, rows_duckdb

    from dvengine import DeltaTable
    from dvengine.log import latest_version
    from dvengine.maintenance import vacuum

    condition = "id in (3, 14)"
    runs = []
    for n, (stage, kind, mode, committed) in enumerate(CASES):
        root = tmp_path / f"t{n}"
        model = _make(root)
        before = _files(root)
        runs.append((stage, kind, mode, committed, root, model, before, _spawn(kind, stage, root, condition, mode)))
    for stage, kind, _mode, committed, root, model, before, proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, f"{stage}/{kind}: child exited {proc.returncode}: {err.decode()[-2000:]}"
        stage = f"{stage}/{kind}"
        expected_version = 1 if committed else 0
        assert latest_version(str(root)) == expected_version, stage
        if committed:
            model = {k: v for k, v in model.items() if k not in (3, 14)}
        assert_all_readers(spark, root, COLS, sorted(model.items()))
        leftovers = {f for f in _files(root) - before if not f.startswith("_delta_log")}
        if stage.startswith(("dml.", "commit.before_link")):
            assert leftovers, f"{stage}: the killed writer should have left files behind"
        if stage.startswith("commit.before_link"):  # the temp commit exists but is invisible to readers
            assert any(f.endswith(".tmp") for f in os.listdir(root / "_delta_log"))
        time.sleep(0.01)
        report = vacuum(str(root), retention_hours=0, enforce_retention=False)
        assert set(report["files"]) == (set() if committed else leftovers), stage
        assert rows_arrow(root, COLS) == rows_delta_rs(root, COLS) == sorted(model.items())
        # The table stays writable: the next DELETE commits at the next version.
        if stage.startswith("commit.before_link"):
            time.sleep(0.01)
            after_vacuum = latest_version(str(root))  # VACUUM START / END may have committed since
            DeltaTable.forPath(spark, root).deleteMetrics("id = 0", mode="dv")
            assert latest_version(str(root)) == after_vacuum + 1
            del model[0]
            assert rows_arrow(root, COLS) == rows_duckdb(root, COLS) == sorted(model.items())


@pytest.mark.parametrize("damage", ["truncate", "corrupt", "missing", "garbage_version"])
def test_damaged_dv_file_fails_reads_loudly(spark: Any, tmp_path: Path, damage: str) -> None:
    from dv_readers import dv_reader
    from test_concurrency_support import core_delete, rows_of

    from dvengine import DeltaTable
    from dvengine.dv import absolute_dv_path
    from dvengine.errors import DeletionVectorError
    from dvengine.log import load_snapshot

    root = tmp_path / "t"
    model = _make(root)
    core_delete(root, "id in (1, 2, 3)")
    dv = next(a.deletion_vector for a in load_snapshot(str(root)).files if a.deletion_vector is not None)
    assert dv is not None and not dv.is_inline
    path = Path(absolute_dv_path(str(root), dv))
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 6])
    elif damage == "corrupt":
        path.write_bytes(data[:-8] + bytes(b ^ 0xFF for b in data[-8:-4]) + data[-4:])
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"\x07" + data[1:])
    with pytest.raises(DeletionVectorError):
        DeltaTable.forPath(None, root).toArrow()
    # Spark, Python plan: bitmaps are read on the driver, so the error is dvengine's typed one.
    with dv_reader(spark, "python"), pytest.raises(DeletionVectorError):
        DeltaTable.forPath(spark, root).toDF().collect()
    # Spark, JVM reader: a missing or short file is found on the driver (typed error); a corrupt
    # one only by the executor decoding it, which fails the Spark job with dvengine's reason.
    with dv_reader(spark, "jvm"):
        if damage in ("truncate", "missing"):
            with pytest.raises(DeletionVectorError):
                DeltaTable.forPath(spark, root).toDF().collect()
        else:
            reason = "CRC-32 mismatch" if damage == "corrupt" else "version"
            with pytest.raises(Exception, match=f"dvengine: .*{reason}"):
                DeltaTable.forPath(spark, root).toDF().collect()
    # The version before the DV is unaffected.
    assert rows_of(root, version=0) == sorted(model.items())
    shutil.rmtree(root)


if __name__ == "__main__":
    _child(*sys.argv[1:5])
