"""Checking that Spark's Python workers can run dvengine, once per SparkContext.

Separate from ``session`` (which starts sessions and registers the ``delta`` format, and so sits
above the writers) because the executors, far below that, call it before their first job.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from pyspark.sql import SparkSession

from dvengine.errors import SparkEnvironmentError

# SparkContexts (by applicationId) whose Python workers were seen to import dvengine and pyarrow.
_CHECKED_APPLICATIONS: set[str] = set()
_IMPORT_ERROR_LINE = re.compile(r"^\s*((?:ModuleNotFoundError|ImportError)\b.*)$", re.MULTILINE)


def _probe_python_workers(spark: SparkSession) -> list[Any]:
    """One task on one partition that imports dvengine and pyarrow in a Python worker (a seam for tests)."""
    sc = spark.sparkContext
    return sc.parallelize([0], 1).map(lambda _: __import__("dvengine") and __import__("pyarrow") and 1).collect()


def _failure_summary(exc: BaseException) -> str:
    """The Python worker's own error line (e.g. ``ModuleNotFoundError: No module named 'dvengine'``)
    out of the Java stack it arrives wrapped in; else the first line of the message."""
    text = str(exc)
    found = _IMPORT_ERROR_LINE.search(text)
    if found is not None:
        return found.group(1).strip()
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def check_python_workers(spark: SparkSession) -> None:
    """Fail fast, and readably, when Spark's Python workers cannot import dvengine and pyarrow.

    A SparkSession built by the user without ``PYSPARK_PYTHON`` starts workers with whatever
    ``python3`` is on the PATH; every DML job would then die inside a worker with a
    ModuleNotFoundError buried in a Java stack trace. One tiny job per SparkContext (cached by
    applicationId) turns that into a SparkEnvironmentError that says which interpreter the
    workers run and how to point them at the right one. Spark Connect sessions have no
    SparkContext here (their workers are the server's business) and are not checked.
    """
    if getattr(spark, "_jsc", None) is None:
        return
    sc = spark.sparkContext
    app_id = str(sc.applicationId)
    if app_id in _CHECKED_APPLICATIONS:
        return
    worker_python = getattr(sc, "pythonExec", None) or "python3"
    advice = (
        f"Spark's Python workers run {worker_python!r} (this driver runs {sys.executable!r}); set PYSPARK_PYTHON "
        f"(or the Spark conf spark.pyspark.python) to an interpreter with dvengine and pyarrow installed, e.g. "
        f"PYSPARK_PYTHON={sys.executable}, before the SparkSession is created"
    )
    try:
        result = _probe_python_workers(spark)
    except Exception as exc:  # Py4JJavaError, PythonException, ...: any failure means unusable workers
        raise SparkEnvironmentError(f"{advice}. The workers failed with: {_failure_summary(exc)}") from exc
    if result != [1]:
        raise SparkEnvironmentError(f"{advice}. The probe job returned {result!r} instead of [1]")
    _CHECKED_APPLICATIONS.add(app_id)


# Task count for a job over a few files on a Spark Connect session, whose client cannot ask the
# server's SparkContext for defaultParallelism: spark.default.parallelism if the server sets it, else this.
CONNECT_DEFAULT_PARALLELISM = 8


def default_parallelism(spark: SparkSession) -> int:
    """``SparkContext.defaultParallelism``; on Spark Connect the conf or CONNECT_DEFAULT_PARALLELISM."""
    if getattr(spark, "_jsc", None) is not None:
        return int(spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    return int(configured) if configured else CONNECT_DEFAULT_PARALLELISM


__all__ = ["check_python_workers", "default_parallelism"]
