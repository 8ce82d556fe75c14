"""Result records, their summaries, and the machine facts stored with them in results.json.

A measurement that failed its correctness check keeps ``seconds = None``: its time never enters
a median, a ratio or a plot, and its reason is kept so the report can say why it failed.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_UNAVAILABLE = "not available"


@dataclass
class Measurement:
    """One (workload, contender, repetition): the operation's time and everything it wrote."""

    workload: str
    kind: str
    contender: str
    repetition: int
    fraction: float
    status: str
    seconds: float | None = None
    error: str | None = None
    reported_rows: int | None = None
    bytes_written: int | None = None
    log_bytes_written: int | None = None
    data_files_written: int | None = None
    dv_files_written: int | None = None
    dvs_written: int | None = None  # dvengine: DVs added or updated (inline ones live in the log, not in files)
    files_removed: int | None = None
    files_added: int | None = None
    spark_jobs: int | None = None  # Spark jobs the operation started (status tracker); None: no Spark session
    read_after: dict[str, float] = field(default_factory=dict)
    verified_by: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Summary:
    """Median and spread of the successful repetitions of one (workload, contender)."""

    workload: str
    kind: str
    contender: str
    fraction: float
    status: str
    runs: int
    median_s: float | None
    min_s: float | None
    max_s: float | None
    bytes_written: float | None
    log_bytes_written: float | None
    files_removed: float | None
    data_files_written: float | None
    dv_files_written: float | None
    dvs_written: float | None
    read_after_s: dict[str, float]
    spark_jobs: float | None = None
    error: str | None = None
    failed_runs: int = 0  # a failed summary may still hold the medians of its verified runs


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(measurements: list[Measurement]) -> list[Summary]:
    """One summary per (workload, contender), in first-seen order; any failure marks it failed."""
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for m in measurements:
        groups.setdefault((m.workload, m.contender), []).append(m)
    out: list[Summary] = []
    for (workload, contender), ms in groups.items():
        ok = [m for m in ms if m.status == STATUS_OK and m.seconds is not None]
        bad = [m for m in ms if m.status != STATUS_OK]
        status = bad[0].status if bad else STATUS_OK
        times = [m.seconds for m in ok if m.seconds is not None]
        readers = sorted({r for m in ok for r in m.read_after})

        def med(attr: str, ok: list[Measurement] = ok) -> float | None:
            return _median([float(getattr(m, attr)) for m in ok if getattr(m, attr) is not None])

        read_after = {r: statistics.median([m.read_after[r] for m in ok if r in m.read_after]) for r in readers}
        out.append(
            Summary(
                workload=workload,
                kind=ms[0].kind,
                contender=contender,
                fraction=ms[0].fraction,
                status=status,
                runs=len(ok),
                median_s=_median(times),
                min_s=min(times) if times else None,
                max_s=max(times) if times else None,
                bytes_written=med("bytes_written"),
                log_bytes_written=med("log_bytes_written"),
                files_removed=med("files_removed"),
                data_files_written=med("data_files_written"),
                dv_files_written=med("dv_files_written"),
                dvs_written=med("dvs_written"),
                read_after_s=read_after,
                spark_jobs=med("spark_jobs"),
                error=bad[0].error if bad else None,
                failed_runs=sum(1 for m in bad if m.status == STATUS_FAILED),
            )
        )
    return out


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _jvm_java_version(spark: SparkSession) -> str | None:
    try:
        jvm = spark.sparkContext._jvm
        return str(jvm.java.lang.System.getProperty("java.version"))  # type: ignore[union-attr]
    except Exception:
        return None


def _java_version(spark: SparkSession | None) -> str | None:
    found = None if spark is None else _jvm_java_version(spark)
    if found is not None:
        return found
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (done.stderr or done.stdout).splitlines()
    return first[0] if first else None


def _git_commit() -> str | None:
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        done = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def load_average() -> list[float] | None:
    """1/5/15-minute load: on a shared machine it says how much the timings may be disturbed."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def machine_facts(spark: SparkSession | None) -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": _version("pyspark"),
        "pyarrow": _version("pyarrow"),
        "deltalake": _version("deltalake"),
        "duckdb": _version("duckdb"),
        "numpy": _version("numpy"),
        "java": _java_version(spark),
        "dvengine_commit": _git_commit(),
    }


def write_json(path: str, payload: dict[str, Any]) -> None:
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=2, default=_json_default)
        fh.write("\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
