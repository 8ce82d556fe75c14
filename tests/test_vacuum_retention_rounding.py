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
from math import floor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.cli.maintenance import register
from dvengine.errors import InvalidArgumentError
from dvengine.maintenance.vacuum import vacuum

HOUR_MS = 3_600_000
LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"


def _java_round(hours: float) -> int:
    """Java's Math.round(double): the nearest long, halves towards positive infinity (exact)."""
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


@pytest.mark.parametrize("hours", [0.5, 0.49, 0.75, 1.5, 2.5, 0.49999999999999994, -0.4, -0.5])
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
