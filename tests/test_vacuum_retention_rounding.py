"""VACUUM's retention is whole hours, as Delta's ``gc``: ``TimeUnit.HOURS.toMillis(math.round(h))``.

The expected hours come from Java's ``Math.round`` written here with exact fractions
(``floor(h + 1/2)``), not from dvengine's code; the retention a run used is read back from the
VACUUM START commit's raw ``specifiedRetentionMillis`` and from which files it deleted."""

from __future__ import annotations

import argparse
import json
import os
import time
from fractions import Fraction
from math import floor, isnan
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import folder_state

import dvengine
from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.errors import InvalidArgumentError
from dvengine.maintenance.vacuum import vacuum

HOUR_MS = 3_600_000
LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"


def _java_round(hours: float) -> int:
    """Java's Math.round(double): the nearest long, halves towards positive infinity (exact);
    its Javadoc: "If the argument is NaN, the result is 0"."""
    if isnan(hours):
        return 0
    return floor(Fraction(hours) + Fraction(1, 2))


def _table(root: Path) -> None:
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64())}), str(root))


def _orphan(root: Path, name: str, age_ms: int, now_ms: int) -> Path:
    path = root / name
    path.write_bytes(b"no commit names this file")
    os.utime(path, ns=((now_ms - age_ms) * 1_000_000,) * 2)
    return path


def _start_parameters(root: Path) -> dict[str, Any]:
    last = max(int(f.name[:20]) for f in (root / "_delta_log").glob("*.json"))
    for version in (last - 1, last):
        for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None and info["operation"] == "VACUUM START":
                params: dict[str, Any] = info["operationParameters"]
                return params
    raise AssertionError("no VACUUM START commit")


@pytest.fixture(autouse=True)
def logging_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOGGING_ENV, raising=False)  # local folders log by default, as Delta


@pytest.mark.parametrize("hours", [0.5, 0.49, 0.75, 1.5, 2.5, 0.49999999999999994, -0.4, -0.5, float("nan")])
def test_the_retention_applied_and_logged_is_the_rounded_hours(tmp_path: Path, hours: float) -> None:
    root = tmp_path / "t"
    _table(root)
    now = int(time.time() * 1000)
    expected_ms = _java_round(hours) * HOUR_MS
    # one orphan just older than the rounded retention, one just younger: only the first goes
    old = _orphan(root, "old.parquet", expected_ms + 60_000, now)
    young = _orphan(root, "young.parquet", max(expected_ms - 60_000, 0) if expected_ms else -60_000, now)
    report = vacuum(str(root), retention_hours=hours, enforce_retention=False, now_ms=now)
    assert report["retentionHours"] == _java_round(hours)
    assert report["cutoffTimestampMs"] == now - expected_ms
    assert (not old.exists(), young.exists()) == (True, True)
    params = _start_parameters(root)
    assert type(params["specifiedRetentionMillis"]) is int and params["specifiedRetentionMillis"] == expected_ms


def test_a_retention_negative_once_rounded_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    log = sorted(os.listdir(root / "_delta_log"))
    with pytest.raises(InvalidArgumentError, match="-1 once rounded"):
        vacuum(str(root), retention_hours=-0.6, enforce_retention=False)
    assert sorted(os.listdir(root / "_delta_log")) == log


def test_the_retention_check_sees_the_rounded_hours(tmp_path: Path) -> None:
    """Delta's checkRetentionPeriodSafety compares the rounded millis with the table's retention:
    167.5 hours is 168, a week, allowed; 167.49 is 167, refused."""
    root = tmp_path / "t"
    _table(root)
    table = DeltaTable.forPath(None, str(root))
    version = max(int(f.name[:20]) for f in (root / "_delta_log").glob("*.json"))
    with pytest.raises(InvalidArgumentError, match="167 once rounded"):
        table.vacuum(167.49)
    assert max(int(f.name[:20]) for f in (root / "_delta_log").glob("*.json")) == version
    table.vacuum(167.5)
    assert _start_parameters(root)["specifiedRetentionMillis"] == 168 * HOUR_MS


# --- NaN: VacuumCommand.gc's retentionMillis = TimeUnit.HOURS.toMillis(math.round(h)), so NaN is 0 ms
CHECK_ENV = "SPARK_DATABRICKS_DELTA_RETENTIONDURATIONCHECK_ENABLED"


def test_nan_with_the_retention_check_on_is_refused_as_zero_hours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """checkRetentionPeriodSafety sees Some(0) < one week: DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT
    in Delta; here the same refusal as for 0 hours, and the folder is byte for byte unchanged."""
    monkeypatch.delenv(CHECK_ENV, raising=False)  # the check is on by default
    root = tmp_path / "t"
    _table(root)
    _orphan(root, "old.parquet", 30 * 24 * HOUR_MS, int(time.time() * 1000))
    before = folder_state(root)
    with pytest.raises(InvalidArgumentError, match=r"retention of nan hours \(0 once rounded.*deletedFileRetentionDuration"):
        DeltaTable.forPath(None, str(root)).vacuum(float("nan"))
    with pytest.raises(InvalidArgumentError, match="0 once rounded"):
        vacuum(str(root), retention_hours=float("nan"))
    assert folder_state(root) == before


def test_nan_with_the_retention_check_off_vacuums_with_a_zero_retention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``retentionDurationCheck.enabled=false`` NaN is VACUUM RETAIN 0 HOURS: the cutoff is
    now, an orphan a minute old goes, and VACUUM START logs what Delta's VacuumStart would:
    retentionCheckEnabled false, the table's default, specifiedRetentionMillis 0 (a number)."""
    monkeypatch.setenv(CHECK_ENV, "false")
    root = tmp_path / "t"
    _table(root)
    now = int(time.time() * 1000)
    minute_old = _orphan(root, "minute.parquet", 60_000, now)
    report = DeltaTable.forPath(None, str(root)).vacuum(float("nan"))
    assert not minute_old.exists() and report["retentionHours"] == 0
    params = _start_parameters(root)
    assert params == {"retentionCheckEnabled": False, "defaultRetentionMillis": 168 * HOUR_MS, "specifiedRetentionMillis": 0}
    assert list(params) == ["retentionCheckEnabled", "defaultRetentionMillis", "specifiedRetentionMillis"]
    assert type(params["specifiedRetentionMillis"]) is int


def test_nan_passes_the_check_on_a_table_whose_retention_is_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """retentionSafe = retentionMs.forall(_ >= configuredRetention): 0 >= 0 with the check on."""
    monkeypatch.delenv(CHECK_ENV, raising=False)
    root = tmp_path / "t"
    dvengine.write(pa.table({"id": pa.array([1], pa.int64())}), str(root),
                   configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"})
    old = _orphan(root, "old.parquet", 60_000, int(time.time() * 1000))
    DeltaTable.forPath(None, str(root)).vacuum(float("nan"))
    assert not old.exists()
    assert _start_parameters(root) == {"retentionCheckEnabled": True, "defaultRetentionMillis": 0, "specifiedRetentionMillis": 0}


def test_the_cli_takes_nan_as_the_api(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "nan", "--force"])
    assert args.handler(args) == 0
    assert _start_parameters(root)["specifiedRetentionMillis"] == 0


def test_infinite_retentions_are_still_refused(tmp_path: Path) -> None:
    """Not Delta's behaviour (Math.round saturates to Long.MaxValue / MinValue): kept as a refusal,
    stated in spec_notes/retention-vacuum-purge.md."""
    root = tmp_path / "t"
    _table(root)
    before = folder_state(root)
    for hours in (float("inf"), float("-inf")):
        with pytest.raises(InvalidArgumentError, match="finite"):
            vacuum(str(root), retention_hours=hours, enforce_retention=False)
    assert folder_state(root) == before


def test_the_cli_rounds_as_the_api(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["vacuum", str(root), "--retain-hours", "0.5", "--force"])
    assert args.handler(args) == 0
    assert _start_parameters(root)["specifiedRetentionMillis"] == HOUR_MS


def test_sql_retain_rounds_as_the_api(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    now = int(time.time() * 1000)
    kept = _orphan(root, "kept.parquet", 45 * 60_000, now)  # 45 minutes: older than 0.5 h, younger than 1 h
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        dry = dvengine.sql(spark, f"VACUUM delta.`{root}` RETAIN 0.5 HOURS DRY RUN").collect()
        dvengine.sql(spark, f"VACUUM delta.`{root}` RETAIN 0.5 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert dry == [] and kept.exists()
    assert _start_parameters(root)["specifiedRetentionMillis"] == HOUR_MS
