"""The kill-9 torture run (dvengine.testing.torture), short: 20 kills, fixed seed, local engine only.

The run itself checks every kill (all three readers equal the model before or after the
operation, time travel, log replay, VACUUM safety net); here we assert it found nothing and that
both sides of the commit were hit. The fault-injection stages make that deterministic: every
4th DML kill arms a stage, cycling commit.after_link, commit.before_link, ... so the first and
fifth DML kills land exactly after and before a commit. A second test makes sure the checker is
not vacuous: a model that differs from the table by one row is reported.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvengine.testing import torture

SEED = 20240611


def test_short_torture_run_has_no_failures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc = torture.main(["--kills", "20", "--seed", str(SEED), "--out", str(out), "--kills-per-table", "10"])
    report = json.loads((out / "torture-report.json").read_text())
    assert report["failures"] == [], report["failures"]
    assert rc == 0
    assert report["killsAttempted"] == 20
    assert report["killsLandedBeforeCommit"] >= 1, report["outcomes"]
    assert report["killsLandedAfterCommit"] >= 1, report["outcomes"]
    # A kill at a commit stage lands exactly on its side of the commit, every time.
    assert set(report["faultStages"]["commit.after_link"]) == {"after_commit"}
    assert set(report["faultStages"]["commit.before_link"]) == {"before_commit"}
    assert {t["partitioned"] for t in report["tables"]} == {True, False}  # both layouts, 10 kills each
    assert report["vacuumRuns"] >= 4
    assert report["orphanFilesReclaimedByVacuum"] == report["orphanFilesFound"]
    assert (out / "torture-report.md").read_text().startswith("# dvengine kill-9 torture run")
    assert len((out / "torture-steps.jsonl").read_text().splitlines()) == report["steps"]
    assert not (out / "tables").exists()  # removed after a clean run


def test_checker_reports_a_table_that_differs_from_the_model(tmp_path: Path) -> None:
    args = torture.parse_args(["--seed", "1", "--rows", "200", "--out", str(tmp_path)])
    t = torture.Torture(args)
    try:
        t.new_table(0)
        version = torture.check_log(t.root)
        assert t.verify(t.model, t.model, version, "same")[0] == version
        wrong = dict(t.model)
        wrong.pop(next(iter(wrong)))
        with pytest.raises(torture.TortureFailure, match="missing ids|unexpected ids"):
            t.verify(wrong, wrong, version, "one row short")
        with pytest.raises(torture.TortureFailure, match="version went from"):
            t.verify(t.model, t.model, version - 2, "stale version")
        # A committed DELETE the model does not know about: the after-model check catches it.
        from dvengine import DeltaTable

        DeltaTable.forPath(None, t.root).deleteMetrics("id = 3", mode="dv", engine="local")
        with pytest.raises(torture.TortureFailure, match="missing ids|unexpected ids"):
            t.verify(t.model, t.model, version, "unmodelled delete")
    finally:
        t.step_log.close()
