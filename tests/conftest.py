"""Shared fixtures: one SparkSession for the whole run, and throwaway copies of golden tables."""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Thousands of tiny Spark jobs: the C1-only JIT starts faster (see dvengine.engine.spark.session).
# Set before any session starts, and inherited by the subprocesses tests launch (CLI, local-cluster).
os.environ.setdefault("DVENGINE_SPARK_FAST_START", "1")

GOLDEN_ROOT = (Path(__file__).resolve().parents[2] / "shared" / "golden").resolve()
GOLDEN_TABLES = GOLDEN_ROOT / "tables"
GOLDEN_EXPECTED = GOLDEN_ROOT / "expected"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from dvengine.engine.spark.session import get_or_create_session
    from dvengine.storage.catalog import WAREHOUSE_OVERRIDE_CONF

    session = get_or_create_session()
    # Catalog names registered by tests (forName, CREATE TABLE name) live in this run's own
    # warehouse, never in ./spark-warehouse, where they would outlive the run and clash with the next.
    session.conf.set(WAREHOUSE_OVERRIDE_CONF, str(tmp_path_factory.mktemp("warehouse")))
    yield session
    session.stop()


def copy_golden(name: str, dest: Path) -> Path:
    """Copy a golden table to a writable folder (the originals are read-only and shared)."""
    target = dest / name
    shutil.copytree(GOLDEN_TABLES / name, target)
    for p in [target, *target.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return target


@pytest.fixture
def golden_copy(tmp_path: Path) -> Any:
    return lambda name: copy_golden(name, tmp_path)


def load_expected(name: str) -> dict[str, Any]:
    with open(GOLDEN_EXPECTED / f"{name}.json") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


GOLDEN_NAMES = sorted(p.stem for p in GOLDEN_EXPECTED.glob("*.json"))


@pytest.fixture(params=["local", "spark"])
def merge_engine(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """(executor name, the Spark session or None): a test run once on each executor; the session
    is started only for the Spark run."""
    engine = request.param
    return engine, (request.getfixturevalue("spark") if engine == "spark" else None)
