"""dvengine on Spark Connect: a local Connect server (``remote("local[2]")``) in a process of its
own, the model-checked DML sequence and every golden table version (tests/connect_job.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLDEN_ROOT

HERE = Path(__file__).resolve().parent

pytest.importorskip("grpc", reason="Spark Connect's client needs grpcio (the test extra installs it)")


@pytest.fixture(scope="module")
def facts(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("connect")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(
        [sys.executable, str(HERE / "connect_job.py"), str(work), str(GOLDEN_ROOT)],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=work,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_runs_on_a_connect_session(facts: Any) -> None:
    assert facts["connect"].startswith("pyspark.sql.connect")


def test_model_dml_sequence_matches_the_model(facts: Any) -> None:
    assert facts["failures"] == [], facts["failures"]
    assert [s["step"] for s in facts["steps"] if not s["ok"]] == []
    assert len(facts["steps"]) == 12
    assert facts["delta_rs_ok"]


def test_column_conditions_are_refused_with_a_typed_error(facts: Any) -> None:
    # The step after the refusal checks the table still equals the model (nothing was committed).
    assert facts["column_condition"].startswith("UnsupportedFeatureError: conditions and values given as pyspark Columns")


def test_reads_history_detail_vacuum_and_format_delta(facts: Any) -> None:
    assert facts["format_delta_read_ok"] and facts["scan_ok"]
    ops = facts["history_ops"]  # newest first: versions 10 .. 0
    assert len(ops) == 11 and ops[0] == ops[-1] == "WRITE" and ops.count("MERGE") == 1
    assert facts["detail_num_files"] == facts["live_files"]


def test_dv_reads_use_the_jvm_reader(facts: Any) -> None:
    assert facts["jvm_reader"]


def test_golden_tables_read_back(facts: Any) -> None:
    assert facts["golden_cases"] > 0
    assert facts["golden_bad"] == []


def test_row_id_metadata_fields_on_connect(facts: Any) -> None:
    """Delta's ``_metadata.row_id`` / ``row_commit_version`` reach a Connect client (the jar is
    uploaded as an artifact) and equal the Arrow reader's stable ids after a DV DELETE and UPDATE."""
    assert facts["row_id_metadata"] == {"rows": 75, "equal": True, "ids": True}, facts["failures"]
