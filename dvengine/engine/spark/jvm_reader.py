"""Whether a session can use the JVM deletion-vector reader, and giving it the jar when it lacks it.

A session started with the jar in ``spark.jars`` (``configure_spark_with_dvengine``,
``get_or_create_session``, ``spark-submit --jars``) loads the format class at once. A session
the user started without it is given the jar at its first read of a DV'd table, where Spark
allows that (measured on pyspark 4.3, spec_notes/executors.md):

- classic sessions (local, local-cluster, standalone client mode): what ``ADD JAR`` does, the
  session's ``resourceLoader.addJar``: the jar joins the shared-state class loader and
  ``SparkContext.addJar`` ships it to executors, which fetch it before their next task. Only the
  calling JVM thread gets that loader as its context class loader (py4j pins one JVM thread per
  Python thread), so each later read re-checks its own thread and sets the loader if needed;
- Spark Connect sessions: ``spark.addArtifacts(jar)`` uploads it into the session's artifact
  class loader on the server, which also serves its executors.

Where that fails or no jar is installed, reads use the Python plan (same rows, slower) and
dvengine warns once per process, naming ``spark.jars`` / ``--jars``. ``dvengine.read.attachJar``
``false`` turns the runtime attach off.
"""

from __future__ import annotations

import warnings
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from dvengine.commands.options import session_conf
from dvengine.engine.spark.jar import JAR_NAME, jar_path

JVM_FORMAT = "io.dvengine.spark.DeletionVectorParquetFormat"
CONF_ATTACH_JAR = "dvengine.read.attachJar"

# Session key (classic: applicationId; Connect: its session id) -> whether the format class loads.
_LOADABLE: dict[str, bool] = {}
# Keys whose jar dvengine added at runtime (classic sessions then need the loader per thread).
_ATTACHED: set[str] = set()
_WARNED: list[str] = []


class JvmReaderWarning(UserWarning):
    """The session reads DV'd files through the slower Python plan because the JVM reader is missing."""


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect session: no py4j handle to a local JVM, the server is reached over gRPC."""
    return getattr(spark, "_jsc", None) is None


def session_key(spark: SparkSession) -> str:
    if is_connect(spark):
        return f"connect:{getattr(spark, 'session_id', id(spark))}"
    return str(spark.sparkContext.applicationId)


def _attach_enabled(spark: SparkSession) -> bool:
    return str(session_conf(spark)(CONF_ATTACH_JAR) or "true").strip().lower() != "false"


def _class_loads(spark: SparkSession) -> bool:
    jvm: Any = spark._jvm
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(JVM_FORMAT))


def _use_jar_loader_on_this_thread(spark: SparkSession) -> None:
    """Give the calling JVM thread the class loader ``addJar`` extended, unless it already loads the class."""
    if _class_loads(spark):
        return
    jvm: Any = spark._jvm
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)


def _attach_classic(spark: SparkSession, jar: str) -> tuple[bool, str]:
    """``ADD JAR`` the jar into a running classic session; (loadable now, why not)."""
    from py4j.protocol import Py4JError

    try:
        spark._jsparkSession.sessionState().resourceLoader().addJar(jar)
        _use_jar_loader_on_this_thread(spark)
    except Py4JError as exc:  # reported in the warning, the read goes on with the Python plan
        return False, f"adding {jar} at runtime failed: {str(exc).strip().splitlines()[0]}"
    if _class_loads(spark):
        return True, ""
    return False, f"{jar} was added at runtime but {JVM_FORMAT} still does not load"


def _connect_probe(spark: SparkSession) -> bool:
    """Whether the Connect server resolves the format: one analysis round trip, no job."""
    try:
        spark.read.format(JVM_FORMAT).schema("probe INT").load().schema  # noqa: B018 (forces analysis)
    except PySparkException as exc:
        text = str(exc)
        if "DATA_SOURCE_NOT_FOUND" in text or "ClassNotFoundException" in text:
            return False
        raise
    return True


def _attach_connect(spark: SparkSession, jar: str) -> tuple[bool, str]:
    try:
        spark.addArtifacts(jar)
    except PySparkException as exc:  # e.g. a server that refuses artifacts: reported in the warning
        return False, f"uploading {jar} with addArtifacts failed: {str(exc).strip().splitlines()[0]}"
    if _connect_probe(spark):
        return True, ""
    return False, f"{jar} was uploaded with addArtifacts but the server still cannot load {JVM_FORMAT}"


def _first_check(spark: SparkSession) -> tuple[bool, str]:
    connect = is_connect(spark)
    if (_connect_probe(spark) if connect else _class_loads(spark)):
        return True, ""
    if not _attach_enabled(spark):
        return False, f"{CONF_ATTACH_JAR}=false"
    jar = jar_path()
    if jar is None:
        return False, (
            "dvengine has no jar to add (this install was built without a JDK; reinstall with a JDK present, "
            "e.g. `pip install --no-build-isolation dvengine`, or run `make jar` in a checkout)"
        )
    loadable, reason = _attach_connect(spark, jar) if connect else _attach_classic(spark, jar)
    if loadable:
        _ATTACHED.add(session_key(spark))
    return loadable, reason


def _warn_once(reason: str) -> None:
    if _WARNED:
        return
    _WARNED.append(reason)
    jar = jar_path() or f"/path/to/{JAR_NAME}"
    warnings.warn(
        f"dvengine: the JVM deletion-vector reader ({JVM_FORMAT}) is not on this Spark session's classpath "
        f"({reason}); reads of tables with deletion vectors use the slower Python plan. Start the session with "
        f"spark.jars={jar} (spark-submit --jars {jar}), e.g. through "
        "dvengine.configure_spark_with_dvengine(SparkSession.builder)",
        JvmReaderWarning,
        stacklevel=4,
    )


def jvm_reader_loadable(spark: SparkSession, warn: bool = True) -> bool:
    """Whether this session can read through the JVM format; the first call per session adds the
    jar at runtime if it is missing and allowed (module docstring). ``warn``: warn once per
    process when the answer is no."""
    key = session_key(spark)
    if key not in _LOADABLE:
        loadable, reason = _first_check(spark)
        _LOADABLE[key] = loadable
        if not loadable and warn:
            _warn_once(reason)
    elif key in _ATTACHED and _LOADABLE[key] and not is_connect(spark):
        _use_jar_loader_on_this_thread(spark)
    return _LOADABLE[key]


__all__ = ["CONF_ATTACH_JAR", "JVM_FORMAT", "JvmReaderWarning", "is_connect", "jvm_reader_loadable", "session_key"]
