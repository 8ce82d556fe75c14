"""dvengine.* settings also read as spark.dvengine.*, the only form spark-submit --conf and
spark-defaults.conf pass on (Spark drops other keys with "Ignoring non-Spark config property")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from dvengine.commands.options import CONF_MODE, session_conf, spark_alias


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_a_dvengine_key_is_found_under_its_spark_spelling() -> None:
    assert session_conf(_Session({"spark.dvengine.dml.mode": "rewrite"}))(CONF_MODE) == "rewrite"


def test_the_key_as_written_wins_over_its_spark_spelling() -> None:
    lookup = session_conf(_Session({"spark.dvengine.dml.mode": "rewrite", "dvengine.dml.mode": "dv"}))
    assert lookup(CONF_MODE) == "dv"


def test_only_dvengine_keys_have_an_alias() -> None:
    assert spark_alias("spark.databricks.delta.maxCommitAttempts") is None
    lookup = session_conf(_Session({"spark.spark.databricks.delta.maxCommitAttempts": "3"}))
    assert lookup("spark.databricks.delta.maxCommitAttempts") is None
    assert session_conf(_Session({}))(CONF_MODE) is None


def test_spark_submit_conf_reaches_dml_and_nothing_is_ignored(tmp_path: Path) -> None:
    """A user's job under spark-submit with --conf spark.dvengine.dml.mode=rewrite: the DELETE
    rewrites the file (no deletion vector), and the session dvengine configures starts without
    Spark's warning about a dropped setting."""
    table = tmp_path / "t"
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(f"""
        import dvengine
        from pyspark.sql import SparkSession
        spark = dvengine.configure_spark_with_dvengine(SparkSession.builder.master("local[1]")).getOrCreate()
        spark.range(100).selectExpr("id", "id * 2 as v").write.format("delta").save({str(table)!r})
        metrics = dvengine.DeltaTable.forPath(spark, {str(table)!r}).deleteMetrics("id = 5")
        print("RESULT", metrics["numDeletionVectorsAdded"], metrics["numRemovedFiles"], metrics["numAddedFiles"])
        spark.stop()
    """))
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([str(submit), "--conf", "spark.dvengine.dml.mode=rewrite", "--conf", "spark.ui.enabled=false",
                           str(job)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert result == ["RESULT 0 1 1"], done.stdout[-2000:]
    assert "Ignoring non-Spark config property" not in done.stderr, done.stderr[-2000:]
