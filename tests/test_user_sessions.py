"""A user's own SparkSession gets the JVM reader: configured at start, added at first use, or a
single warning naming the setting. Each case runs tests/user_session_job.py in its own process
(a second SparkContext cannot live beside the suite's); rows are checked there against a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dvengine.engine.spark.jar import JAR_ENV, jar_path

HERE = Path(__file__).resolve().parent


def run_job(mode: str, workdir: Path, env: dict[str, str], python: str = sys.executable, master: str = "local[2]") -> Any:
    proc = subprocess.run(
        [python, str(HERE / "user_session_job.py"), mode, str(workdir), master],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=workdir,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", **extra}
    return env


@pytest.fixture(scope="module")
def jar() -> str:
    found = jar_path()
    assert found is not None, "no JVM reader jar: run `make jar`"
    return found


def test_configured_builder_starts_with_the_jar_and_the_delta_format(tmp_path: Path, jar: str) -> None:
    facts = run_job("configured", tmp_path, _env(**{JAR_ENV: jar}))
    assert jar in facts["spark_jars"].split(",")
    assert facts["rows_ok"] and facts["jvm_reader"]
    assert facts["other_thread"] == {"rows_ok": True, "jvm_reader": True}
    assert facts["format_delta_ok"]
    assert facts["warnings"] == []


@pytest.mark.parametrize("master", ["local[2]", "local-cluster[2,1,1024]"])
def test_plain_session_is_given_the_jar_at_first_read(tmp_path: Path, jar: str, master: str) -> None:
    facts = run_job("plain", tmp_path, _env(**{JAR_ENV: jar}), master=master)
    assert facts["spark_jars"] == ""  # started without it
    assert facts["rows_ok"] and facts["jvm_reader"]
    assert facts["other_thread"] == {"rows_ok": True, "jvm_reader": True}
    assert facts["warnings"] == []


def test_without_any_jar_reads_use_the_python_plan_and_warn_once(tmp_path: Path) -> None:
    facts = run_job("nojar", tmp_path, _env(**{JAR_ENV: str(tmp_path / "missing.jar")}))
    assert facts["rows_ok"] and not facts["jvm_reader"]
    assert facts["other_thread"] == {"rows_ok": True, "jvm_reader": False}
    assert len(facts["warnings"]) == 1, facts["warnings"]
    assert "spark.jars=" in facts["warnings"][0] and "--jars" in facts["warnings"][0]


def test_configure_appends_the_jar_and_keeps_the_users_settings(jar: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    import dvengine
    from dvengine.engine.spark.delta_format import CONF_ENABLED

    monkeypatch.setenv(JAR_ENV, jar)
    builder = SparkSession.builder.config("spark.jars", "/opt/other.jar").config(
        "spark.sql.execution.arrow.pyspark.enabled", "false"
    )
    options = dvengine.configure_spark_with_dvengine(builder)._options
    assert options["spark.jars"] == f"/opt/other.jar,{jar}"
    assert options["spark.sql.execution.arrow.pyspark.enabled"] == "false"  # the user's value wins
    # spark.-prefixed: spark-submit drops (and warns about) keys that do not start with "spark."
    assert options[f"spark.{CONF_ENABLED}"] == "true" and CONF_ENABLED not in options
    again = dvengine.configure_spark_with_dvengine(builder)._options  # idempotent
    assert again["spark.jars"] == f"/opt/other.jar,{jar}"


def test_jar_path_prefers_the_env_then_the_checkout_then_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.engine.spark import jar as jar_module

    monkeypatch.setenv(JAR_ENV, str(tmp_path / "missing.jar"))
    assert jar_path() is None  # an explicit setting is never silently replaced
    monkeypatch.delenv(JAR_ENV)
    checkout, package = jar_module.jar_candidates()
    assert checkout.parts[-3:] == ("jvm", "build", "dvengine-spark.jar")
    assert package.parts[-3:] == ("dvengine", "jars", "dvengine-spark.jar")
    assert jar_path() == next((str(p) for p in (checkout, package) if p.is_file()), None)
