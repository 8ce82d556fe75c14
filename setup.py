"""setuptools hook: the wheel carries dvengine's JVM deletion-vector reader.

Metadata lives in pyproject.toml. ``build_py`` additionally compiles ``jvm/`` (``jvm/build_jar.py``)
into ``dvengine/jars/dvengine-spark.jar`` inside the build, so ``pip install .`` and
``python -m build`` produce a package whose ``dvengine.jar_path()`` finds the jar. Editable
installs skip it: a checkout uses ``jvm/build/dvengine-spark.jar`` from ``make jar``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent / "jvm"))
from build_jar import JAR_NAME, build_jar  # noqa: E402


class BuildPyWithJar(build_py):
    """``build_py`` plus the jar, compiled against the Spark jars the build can see."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        build_jar(Path(self.build_lib) / "dvengine" / "jars" / JAR_NAME, log=lambda m: print(m, file=sys.stderr))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        jar = Path(self.build_lib) / "dvengine" / "jars" / JAR_NAME
        return [*super().get_outputs(include_bytecode), *([str(jar)] if jar.is_file() else [])]


setup(cmdclass={"build_py": BuildPyWithJar})
