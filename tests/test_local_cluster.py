"""The distributed path on a multi-process cluster: ``local-cluster[2,1,1024]``.

Runs ``cluster_job.py`` in its own process (a second SparkContext cannot live beside the suite's),
with two executor JVMs and their own Python workers, so nothing may depend on driver and
executors sharing a process or memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_golden_reads_and_dml_on_a_local_cluster(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "cluster_job.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    checked = json.loads(proc.stdout.strip().splitlines()[-1])
    assert checked["executor_pids"] >= 2
    assert checked["golden_versions"] > 0
    assert checked["dml_steps"] == 10
    assert checked["row_tracking_rows"] == sum(1 for i in range(300) if i % 7 != 3)
