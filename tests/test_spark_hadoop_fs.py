"""Spark reaches a table only through Hadoop's FileSystem API: a recording FileSystem proves it.

``hadoop_fs_job.py`` runs on ``local-cluster[2,1,1024]`` (two executor JVMs with their own Python
workers) against a table Spark sees as ``dvtest:`` (``jvm/src/test/.../RecordingFileSystem``,
built here into a test-only jar). Every DML step runs on the Spark executor and is checked
against an in-memory model, the Arrow reader and delta-rs. Here the FileSystem's record is
checked against the log: every data and DV file the Spark steps committed was created through
it, every file the last read scanned was opened through it, and nothing was renamed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _build_jars(out: Path) -> tuple[Path, Path]:
    spec = importlib.util.spec_from_file_location("build_jar", ROOT / "jvm" / "build_jar.py")
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    given = os.environ.get("DVENGINE_SPARK_JAR")
    main_jar = Path(given) if given and Path(given).is_file() else build.build_jar(out / build.JAR_NAME, log=lambda _: None)
    test_jar = build.build_jar(out / build.TEST_JAR_NAME, log=lambda _: None, source_dir=build.TEST_SOURCE_DIR)
    if main_jar is None or test_jar is None:
        pytest.skip("no JDK or Spark jars to build dvengine's jars")
    return Path(main_jar), Path(test_jar)


def _commits(table: Path, first: int, last: int) -> list[dict[str, Any]]:
    actions = []
    for version in range(first, last + 1):
        text = (table / "_delta_log" / f"{version:020d}.json").read_text()
        actions.extend(json.loads(line) for line in text.splitlines() if line.strip())
    return actions


def test_spark_dml_reads_and_writes_only_through_the_hadoop_filesystem(tmp_path: Path) -> None:
    main_jar, test_jar = _build_jars(tmp_path / "jars")
    proc = subprocess.run(
        [sys.executable, str(HERE / "hadoop_fs_job.py"), str(tmp_path), str(main_jar), str(test_jar)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    checked = json.loads(proc.stdout.strip().splitlines()[-1])
    assert checked["executor_pids"] >= 2
    assert checked["steps"] == ["delete-dv", "update-dv", "delete-rewrite", "merge", "optimize", "vacuum"]
    records = [(op, path) for op, path in checked["records"]]
    assert not [r for r in records if r[0] == "rename"], "something renamed through the FileSystem"
    created = {path for op, path in records if op == "create"}
    opened = {path for op, path in records if op == "open"}
    table = tmp_path / "t"
    # versions 0-2: appends in-process; 3-6: DELETE (DV), UPDATE, DELETE (rewrite), MERGE on Spark
    spark_actions = _commits(table, 3, 6)
    appended = {a["add"]["path"] for a in _commits(table, 0, 2) if "add" in a}  # DV updates re-add these
    new_data = {str(table / a["add"]["path"]) for a in spark_actions if "add" in a and a["add"]["path"] not in appended}
    dv_files = {
        str(table / f"deletion_vector_{_uuid_of(a['add']['deletionVector']['pathOrInlineDv'])}.bin")
        for a in spark_actions
        if "add" in a and a["add"].get("deletionVector") and a["add"]["deletionVector"]["storageType"] == "u"
    }
    assert new_data and dv_files
    assert new_data <= created, f"data files not created through the FileSystem: {sorted(new_data - created)}"
    assert dv_files <= created, f"DV files not created through the FileSystem: {sorted(dv_files - created)}"
    assert any("-dvw" in Path(p).name for p in new_data), "no file from Spark's writer (direct commit protocol)"
    # the reads after OPTIMIZE and VACUUM scanned exactly the table's files, through the FileSystem
    assert set(checked["table_files"]) <= opened
    # no DV or data file a Spark step wrote was left behind outside the table's files
    leftovers = {p for p in created if Path(p).exists()} - set(checked["table_files"])
    assert not leftovers, f"files left behind: {sorted(leftovers)}"


def _uuid_of(path_or_inline: str) -> str:
    import uuid

    from dvengine.dv.z85 import z85_decode

    return str(uuid.UUID(bytes=z85_decode(path_or_inline[-20:], 16)))
