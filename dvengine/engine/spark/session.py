"""A SparkSession tuned for short, frequent jobs on a local machine.

A cold local session costs ~10 s. The defaults below turn off what a library session does not
need (the UI, console progress) and size shuffles for one machine, without changing results. Any
existing session (a user's cluster) is reused untouched.

The JVM keeps its own JIT and GC defaults. ``-XX:TieredStopAtLevel=1`` (C1 JIT only) shortens
start-up and suits a test suite of thousands of tiny jobs, but a 10M-row Parquet scan then takes
1.41 s instead of 0.56 s (measured on this machine), which both slows users and dilutes every fixed
cost a benchmark is meant to show. It is therefore opt-in: ``DVENGINE_SPARK_FAST_START=1`` (the
test suite sets it) adds :data:`FAST_START_JAVA_OPTIONS` to the driver of a session started here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from pyspark.sql import SparkSession

from dvengine.commands.options import SPARK_PREFIX
from dvengine.engine.spark.catalog_routes import install_catalog_hooks
from dvengine.engine.spark.connect_format import install_connect_hooks
from dvengine.engine.spark.delta_format import CONF_ENABLED, install_hooks
from dvengine.engine.spark.delta_format import register as register_classic
from dvengine.engine.spark.jar import jar_path
from dvengine.engine.spark.jvm_reader import is_connect
from dvengine.engine.spark.workers import check_python_workers

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}

# Driver JVM options for short-lived sessions (tests): C1 JIT only and the serial collector.
FAST_START_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
FAST_START_ENV = "DVENGINE_SPARK_FAST_START"


def session_defaults() -> dict[str, str]:
    """The conf a session started by dvengine gets: LOCAL_DEFAULTS, plus the fast-start JVM options
    when ``DVENGINE_SPARK_FAST_START`` is set to ``1`` (read at each call, so a test run's
    subprocesses inherit it)."""
    conf = dict(LOCAL_DEFAULTS)
    if os.environ.get(FAST_START_ENV, "") == "1":
        conf["spark.driver.extraJavaOptions"] = FAST_START_JAVA_OPTIONS
    return conf


def register(spark: SparkSession) -> None:
    """Serve ``format("delta")`` of this session (classic or Spark Connect) with dvengine."""
    if is_connect(spark):
        install_connect_hooks()
    else:
        install_catalog_hooks()  # saveAsTable / spark.table on dvengine's catalog (classic sessions)
    register_classic(spark)


def active_session() -> SparkSession | None:
    """The active SparkSession of this thread, if any (never starts one)."""
    return SparkSession.getActiveSession()


def get_or_create_session(master: str | None = None, app_name: str = "dvengine") -> SparkSession:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master or os.environ.get("DVENGINE_SPARK_MASTER", "local[*]"))
    for key, value in session_defaults().items():
        builder = builder.config(key, value)
    jar = jar_path()
    if jar is not None:  # the JVM DV reader; without it reads use the Python plan
        builder = builder.config("spark.jars", jar)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


# What configure_spark_with_dvengine sets on a user's builder besides the jar: the ``delta``
# format served by dvengine, and Arrow transfers (dvengine's driver-side frames and a MERGE
# source's collect go through Arrow). Nothing that changes how the user's jobs run or are sized.
# The format switch goes in its spark.-prefixed spelling: a builder's settings reach spark-submit,
# which warns about and drops any key not starting with "spark." (commands.options.spark_alias).
USER_SESSION_CONF: dict[str, str] = {
    SPARK_PREFIX + CONF_ENABLED: "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def configure_spark_with_dvengine(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Add dvengine's JVM reader jar and settings to a session builder (delta-spark's
    ``configure_spark_with_delta_pip`` convention) and return it::

        spark = dvengine.configure_spark_with_dvengine(SparkSession.builder.master("local[4]")).getOrCreate()

    The jar is appended to any ``spark.jars`` already set on the builder. Without a jar (an install
    built without a JDK) the settings still apply and reads use the Python plan. On a Spark
    Connect builder (``.remote(...)``) ``spark.jars`` reaches a server the builder starts itself
    (``remote("local")``); a running server gets the jar at first read (``addArtifacts``).
    """
    install_hooks()
    install_catalog_hooks()
    options: dict[str, object] = getattr(builder, "_options", {})
    if options.get("spark.remote") or os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
        install_connect_hooks()
    jar = jar_path()
    if jar is not None:
        existing = [j.strip() for j in str(options.get("spark.jars", "") or "").split(",") if j.strip()]
        if jar not in existing:
            builder = builder.config("spark.jars", ",".join([*existing, jar]))
    for key, value in USER_SESSION_CONF.items():
        if key not in options and key.removeprefix(SPARK_PREFIX) not in options:
            builder = builder.config(key, value)
    return builder


SESSION_KINDS = ("dvengine", "plain", "connect")


def start_session(kind: str, master: str = "local[*]") -> SparkSession:
    """A session of the kind a benchmark or a check asks for: ``dvengine`` (get_or_create_session),
    ``plain`` (a user's bare ``SparkSession.builder.master(...).getOrCreate()``: no jar, no
    dvengine settings; the jar is attached at the first DV read), ``connect`` (a Spark Connect
    client of a local server, ``builder.remote(master)``, configured by configure_spark_with_dvengine)."""
    if kind == "dvengine":
        return get_or_create_session(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if kind == "plain":
        session = SparkSession.builder.master(master).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        register(session)  # format("delta") for the bench's format case; nothing else of dvengine's
        return session
    if kind == "connect":
        session = configure_spark_with_dvengine(SparkSession.builder.remote(master)).getOrCreate()
        register(session)
        return session
    raise ValueError(f"session kind must be one of {SESSION_KINDS}, got {kind!r}")


__all__ = [
    "FAST_START_ENV",
    "LOCAL_DEFAULTS",
    "USER_SESSION_CONF",
    "check_python_workers",
    "configure_spark_with_dvengine",
    "get_or_create_session",
    "register",
    "session_defaults",
    "start_session",
]


@contextlib.contextmanager
def _stderr_fd_to_devnull() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null while the JVM is launched, so the JVM (and the Python
    workers it forks) inherit it: their banners, log lines and Java stacks never reach the
    terminal. Our own stderr is restored as soon as the launch returns."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _quiet_pyspark_loggers() -> None:
    """PySpark logs every SQL error with a query context as a JSON line on stderr (and then raises it).

    The CLI reports the raised error itself, so these duplicates are raised above ERROR. They are
    fetched through PySparkLogger.getLogger so that the logger keeps PySpark's class (PySpark calls
    it with extra keyword arguments a plain logging.Logger would reject).
    """
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # PySpark < 4 has no structured loggers to quiet
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def quiet_session(debug: bool = False) -> SparkSession:
    """The SparkSession for a CLI command: reused if one is active, else started quietly.

    Without ``--debug`` a new JVM gets /dev/null as stderr and PySpark's duplicate error logging
    is quieted; either way the log level is set to ERROR before the session runs any job. Failures still reach the user: as exceptions, which
    the CLI boundary reports as one line.
    """
    if not debug:
        _quiet_pyspark_loggers()
    if SparkSession.getActiveSession() is None and not debug:
        with _stderr_fd_to_devnull():
            session = get_or_create_session()
    else:
        session = get_or_create_session()
    session.sparkContext.setLogLevel("ERROR")
    return session


def hadoop_settings(spark: SparkSession, prefix: str) -> dict[str, str]:
    """The session's Hadoop settings starting with ``prefix`` (e.g. ``fs.s3a.``), set either way Spark
    allows: ``spark.hadoop.*`` in the Spark conf or directly on the Hadoop configuration."""
    out: dict[str, str] = {}
    for key, value in spark.sparkContext.getConf().getAll():
        if key.startswith("spark.hadoop." + prefix):
            out[key.removeprefix("spark.hadoop.")] = value
    try:
        jconf = spark.sparkContext._jsc.hadoopConfiguration()
        for entry in jconf.iterator():
            key = str(entry.getKey())
            if key.startswith(prefix):
                out[key] = str(entry.getValue())
    except AttributeError:  # Spark Connect: no JVM handle; the Spark conf above is all there is
        pass
    return out
