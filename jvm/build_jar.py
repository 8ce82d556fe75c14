"""Compile dvengine's JVM deletion-vector reader (``jvm/src``) into ``dvengine-spark.jar``.

One implementation for every way the project is built: ``make jar`` runs this file as a script,
and ``setup.py``'s ``build_py`` hook imports it so that ``pip install .`` / ``python -m build``
put the jar inside the package (``dvengine/jars/``). It runs at build time, before dvengine's own
dependencies are importable, so it needs only the standard library.

The Java sources are compiled against the jars of a Spark installation, found in this order:
``$DVENGINE_SPARK_JARS_DIR``, ``$SPARK_HOME/jars``, the ``jars/`` folder of an importable
``pyspark``. ``pyspark`` is importable at build time when the build runs without isolation
(``pip install --no-build-isolation .``, the documented way: the jar is then compiled against the
pyspark it will run with) or with ``SPARK_HOME`` pointing at it. Without a JDK (``javac``) or
without Spark's jars the build still succeeds, says why, and dvengine's Spark reads of DV tables
use the Python plan. A compilation that starts and fails is an error: it means broken sources or
an incompatible Spark, which a silent fallback would hide.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

JAR_NAME = "dvengine-spark.jar"
TEST_JAR_NAME = "dvengine-spark-tests.jar"
SOURCE_DIR = Path(__file__).resolve().parent / "src" / "main" / "java"
# Test-only classes (a recording Hadoop FileSystem): never packaged, built by the tests that use them.
TEST_SOURCE_DIR = Path(__file__).resolve().parent / "src" / "test" / "java"
FALLBACK_NOTE = "dvengine's Spark reads of tables with deletion vectors will use the Python plan"
# Spark 4 runs on Java 17+; classes for 17 load on every JVM Spark supports.
JAVA_RELEASE = "17"


def find_javac() -> str | None:
    """``$JAVA_HOME/bin/javac`` if present, else ``javac`` on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "javac"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("javac")


def spark_jars_dir() -> Path | None:
    """The folder of Spark's jars to compile against (see the module docstring for the order)."""
    for variable, suffix in (("DVENGINE_SPARK_JARS_DIR", ""), ("SPARK_HOME", "jars")):
        value = os.environ.get(variable)
        if value:
            folder = Path(value) / suffix if suffix else Path(value)
            if folder.is_dir() and any(folder.glob("spark-sql_*.jar")):
                return folder
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return folder if folder.is_dir() else None


def build_jar(
    out: Path, log: Callable[[str], None] = print, javac: str | None = None, source_dir: Path = SOURCE_DIR
) -> Path | None:
    """Compile the reader into ``out``; the jar's path, or None (with a message) when this machine
    lacks a JDK or Spark's jars. Raises ``RuntimeError`` when javac runs and fails.
    ``source_dir``: TEST_SOURCE_DIR builds the test-only jar instead."""
    javac = javac if javac is not None else find_javac()
    if not javac:
        log(f"dvengine: no JDK found (javac on PATH or in JAVA_HOME): building without the JVM reader; {FALLBACK_NOTE}")
        return None
    jars = spark_jars_dir()
    if jars is None:
        log(
            "dvengine: Spark's jars not found (pyspark not importable here and SPARK_HOME unset; under pip's build "
            "isolation use `pip install --no-build-isolation .`): building without the JVM reader; " + FALLBACK_NOTE
        )
        return None
    sources = sorted(str(p) for p in source_dir.rglob("*.java"))
    if not sources:
        raise RuntimeError(f"no Java sources under {source_dir}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dvengine-jar-") as tmp:
        classes = Path(tmp)
        command = [javac, "--release", JAVA_RELEASE, "-nowarn", "-d", str(classes), "-cp", str(jars / "*"), *sources]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed compiling dvengine's JVM reader against {jars}:\n{done.stderr}")
        partial = out.with_name(out.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: dvengine jvm/build_jar.py\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        partial.replace(out)  # never leave a half-written jar where jar_path() looks
    log(f"dvengine: built the JVM reader {out} against {jars}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "build" / JAR_NAME)
    parser.add_argument("--require", action="store_true", help="exit 1 when no jar could be built (make jar)")
    parser.add_argument("--tests", action="store_true", help=f"build the test-only jar ({TEST_JAR_NAME}) instead")
    args = parser.parse_args(argv)
    source = TEST_SOURCE_DIR if args.tests else SOURCE_DIR
    built = build_jar(args.out, log=lambda m: print(m, file=sys.stderr), source_dir=source)
    return 1 if built is None and args.require else 0


if __name__ == "__main__":
    sys.exit(main())
