"""The JVM options of a session dvengine starts: JVM defaults for users and the bench, C1-only
fast start only when asked for (the test suite asks, through conftest)."""

from __future__ import annotations

from typing import Any

import pytest

from dvengine.engine.spark.session import FAST_START_ENV, LOCAL_DEFAULTS, session_defaults

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


def test_user_sessions_keep_the_jvm_jit_and_gc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAST_START_ENV, raising=False)
    conf = session_defaults()
    assert DRIVER_OPTIONS not in conf
    assert conf == LOCAL_DEFAULTS


@pytest.mark.parametrize("value", ["0", "", "true", "yes"])
def test_only_the_value_1_turns_fast_start_on(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAST_START_ENV, value)
    assert DRIVER_OPTIONS not in session_defaults()


def test_fast_start_adds_c1_jit_and_serial_gc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAST_START_ENV, "1")
    conf = session_defaults()
    options = conf[DRIVER_OPTIONS].split()
    assert "-XX:TieredStopAtLevel=1" in options and "-XX:+UseSerialGC" in options
    assert {k: v for k, v in conf.items() if k != DRIVER_OPTIONS} == LOCAL_DEFAULTS


def test_session_defaults_never_alter_the_shared_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAST_START_ENV, "1")
    session_defaults()[DRIVER_OPTIONS] = "changed"
    assert DRIVER_OPTIONS not in LOCAL_DEFAULTS


def test_the_test_suite_session_runs_fast_start(spark: Any) -> None:
    assert "-XX:TieredStopAtLevel=1" in spark.sparkContext.getConf().get(DRIVER_OPTIONS, "")
