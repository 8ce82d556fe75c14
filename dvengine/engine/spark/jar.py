"""Where the JVM reader's jar is: the one place that knows the jar's possible locations.

No pyspark import here: ``dvengine.jar_path()`` and ``configure_spark_with_dvengine`` need the
path before any session exists, and build tooling may ask without Spark installed.
"""

from __future__ import annotations

import os
from pathlib import Path

JAR_ENV = "DVENGINE_SPARK_JAR"
JAR_NAME = "dvengine-spark.jar"


def jar_candidates() -> list[Path]:
    """Where :func:`jar_path` looks, in order: ``$DVENGINE_SPARK_JAR`` alone when set; else
    ``jvm/build/dvengine-spark.jar`` of the source tree this package runs from (a checkout after
    ``make jar``: fresher than any installed copy), then ``dvengine/jars/dvengine-spark.jar``
    inside the installed package (put there by the wheel build, ``setup.py``)."""
    configured = os.environ.get(JAR_ENV)
    if configured:
        return [Path(configured)]
    package = Path(__file__).resolve().parents[2]
    return [package.parent / "jvm" / "build" / JAR_NAME, package / "jars" / JAR_NAME]


def jar_path() -> str | None:
    """The JVM reader's jar (see :func:`jar_candidates`); None when there is none, and Spark
    reads of tables with deletion vectors use the Python plan."""
    for candidate in jar_candidates():
        if candidate.is_file():
            return str(candidate)
    return None


__all__ = ["JAR_ENV", "JAR_NAME", "jar_candidates", "jar_path"]
