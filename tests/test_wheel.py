"""The installable wheel carries the JVM reader: built from a copy of the source tree, installed
into a fresh venv outside the repository, and used by a plain user SparkSession.

The build runs without isolation (``pip wheel --no-build-isolation``), the documented way: the
jar is compiled against the pyspark the build can import (setup.py, jvm/build_jar.py). The fresh
venv reaches pyspark, pyarrow and the other dependencies through a .pth line to this
interpreter's site-packages, so nothing is downloaded, while dvengine itself comes only from
the wheel (checked from ``dvengine.__file__`` and the jar's path).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_user_sessions import run_job

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "jvm"))
from build_jar import JAR_NAME, build_jar  # noqa: E402

SOURCES = ["pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "dvengine", "jvm"]


def _copy_sources(dest: Path) -> Path:
    src = dest / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "jars", "build", "*.egg-info")
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=ignore)
        else:
            shutil.copy2(origin, src / name)
    return src


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc  # type: ignore[no-any-return]


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_wheel_carries_the_jar_and_a_plain_session_reads_through_it(tmp_path: Path) -> None:
    src = _copy_sources(tmp_path)
    dist = tmp_path / "dist"
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist), str(src)])
    wheels = list(dist.glob("dvengine-*.whl"))
    assert len(wheels) == 1, build.stdout + build.stderr
    with zipfile.ZipFile(wheels[0]) as whl:
        names = whl.namelist()
    assert f"dvengine/jars/{JAR_NAME}" in names
    assert "dvengine/engine/spark/jvm_reader.py" in names

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = str(venv / "bin" / "python")
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # The dependencies, from this interpreter's site-packages, after the venv's own (dvengine first).
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # Without PYTHONPATH: a checkout on it (a developer's shell) holds dvengine.egg-info, so pip
    # running under the venv's interpreter would see dvengine installed there and not install the wheel.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DVENGINE_SPARK_JAR")}
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", str(wheels[0])], env=env)

    env.update(PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    work = tmp_path / "user"
    work.mkdir()
    facts = run_job("configured", work, env, python=python)
    assert facts["dvengine_file"].startswith(purelib), facts["dvengine_file"]
    assert facts["jar"] == str(Path(purelib) / "dvengine" / "jars" / JAR_NAME)
    assert facts["jar"] in facts["spark_jars"].split(",")
    assert facts["rows_ok"] and facts["jvm_reader"], facts


def test_a_build_without_a_jdk_succeeds_without_the_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    messages: list[str] = []
    out = tmp_path / JAR_NAME
    assert build_jar(out, log=messages.append) is None
    assert not out.exists()
    assert len(messages) == 1 and "no JDK" in messages[0] and "Python plan" in messages[0]


def test_a_failing_compile_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    fake = tmp_path / "javac"
    fake.write_text("#!/bin/sh\necho 'error: broken' >&2\nexit 2\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match="javac failed"):
        build_jar(tmp_path / JAR_NAME, log=lambda _: None, javac=str(fake))
    assert not (tmp_path / JAR_NAME).exists()
