"""The measurement loop: one fresh table copy per (workload, repetition, contender).

Order matters on a shared machine: contenders are interleaved within each repetition, so a
burst of load from elsewhere hits all of them rather than one contender's whole series. A
warm-up pass (one untimed operation per workload kind and contender) runs first, so the JVM's
JIT and Python imports are not billed to whoever happens to go first.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from dvengine.bench import tables
from dvengine.bench.config import BenchConfig
from dvengine.bench.contenders import (
    ENGINE_DELTARS,
    ENGINE_DVENGINE,
    ENGINE_FLOOR,
    BenchContext,
    Contender,
    make_contenders,
    threshold_in_effect,
)
from dvengine.bench.data import Layout, generate_source, read_source_ids
from dvengine.bench.results import (
    STATUS_FAILED,
    STATUS_OK,
    STATUS_UNAVAILABLE,
    Measurement,
    load_average,
    machine_facts,
    summarize,
)
from dvengine.bench.spark_jobs import count_spark_jobs
from dvengine.bench.verify import TableFacts, duckdb_facts, duckdb_sql_matches, expected_facts, mismatch
from dvengine.bench.workloads import Workload, build_workload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Log = Callable[[str], None]
JAVA_ERROR = re.compile(r"^(: |Caused by: )?[\w.$]+(Exception|Error)(: .*)?$")


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Runner:
    """Holds the prepared data, base tables and contenders of one run."""

    def __init__(self, config: BenchConfig, spark: SparkSession | None, log: Log) -> None:
        self.config = config
        self.log = log
        self.layout = Layout(config.rows, config.files, config.seed)
        self.work = os.path.abspath(config.work_dir or os.path.join(config.out_dir, ".work"))
        self.copies = os.path.join(self.work, "runs")
        self.contenders = make_contenders(config.contenders)
        self.engines = {c.engine for c in self.contenders}
        self.spark = spark
        self.saved_conf: dict[str, str | None] = {}  # confs --spark-conf replaced, restored by cleanup()
        self.bases: dict[str, str] = {}
        self.sources: list[str] = []
        self.workloads: list[Workload] = []
        self.measurements: list[Measurement] = []
        self.unavailable: dict[tuple[str, str], str] = {}

    # --- set-up ------------------------------------------------------------------------------

    def prepare(self) -> None:
        cfg = self.config
        self.log(
            f"data: {cfg.rows:,} rows in {cfg.files} files{' partitioned by cat' if cfg.partitioned else ''} -> {self.work}"
        )
        self.sources = generate_source(os.path.join(self.work, "source"), self.layout)
        ids = read_source_ids(self.sources)
        self.workloads = [build_workload(name, self.layout, ids) for name in cfg.workloads]
        for w in self.workloads:
            if w.predicate is None:
                continue
            by_sql = duckdb_sql_matches(self.sources, w.predicate)
            if by_sql is not None and by_sql != len(w.matched_ids):
                raise RuntimeError(
                    f"model error: {w.name} predicate {w.predicate!r} matches {by_sql} rows in DuckDB, model says {len(w.matched_ids)}"
                )
        if ENGINE_DVENGINE in self.engines and self.spark is None:
            from dvengine.engine.spark.session import start_session

            self.spark = start_session(cfg.spark_session)
        if self.spark is not None:
            for key, value in cfg.spark_conf.items():
                self.saved_conf[key] = self.spark.conf.get(key, None)
                self.spark.conf.set(key, value)
        shutil.rmtree(os.path.join(self.work, "bases"), ignore_errors=True)
        shutil.rmtree(self.copies, ignore_errors=True)
        if ENGINE_DVENGINE in self.engines:
            assert self.spark is not None
            path = os.path.join(self.work, "bases", "dvengine")
            started = time.perf_counter()
            tables.build_dvengine_base(self.spark, self.sources, path, cfg.partitioned)
            self._check_base("dvengine", path, started)
        if ENGINE_DELTARS in self.engines:
            path = os.path.join(self.work, "bases", "delta-rs")
            started = time.perf_counter()
            tables.build_deltars_base(self.sources, path, cfg.partitioned)
            self._check_base("delta-rs", path, started)

    def _check_base(self, engine: str, path: str, started: float) -> None:
        tables.check_base_layout(path, self.layout)
        self.bases[engine] = path
        size = sum(s for rel, s in tables.folder_state(path).items() if not rel.startswith(tables.LOG_DIR))
        self.log(
            f"base table ({engine}): {self.layout.files} files, {human_bytes(size)}, written in {time.perf_counter() - started:.1f} s"
        )

    def context(self) -> BenchContext:
        return BenchContext(self.layout, self.sources, self.spark)

    # --- one measurement ---------------------------------------------------------------------

    def table_for(self, contender: Contender, label: str) -> str:
        if contender.engine == ENGINE_FLOOR:
            return os.path.dirname(self.sources[0])
        return tables.fresh_copy(self.bases[contender.engine], os.path.join(self.copies, label))

    def measure(self, workload: Workload, contender: Contender, rep: int, timed: bool = True) -> Measurement:
        """Copy, run (timed), verify, read after; the time is kept only if every check passed."""
        label = f"{workload.name}-{contender.name}-{rep}"
        m = Measurement(
            workload.name, workload.kind, contender.name, rep, workload.fraction(self.layout.rows), STATUS_OK
        )
        table = self.table_for(contender, label)
        is_engine = contender.engine != ENGINE_FLOOR
        problems: list[str] = []
        elapsed = 0.0
        phase = "operation"
        try:
            before = tables.folder_state(table) if is_engine else {}
            since = tables.latest_version(table) if is_engine else -1
            prepared = contender.prepare(workload, table, self.context())
            try:
                with count_spark_jobs(self.spark if contender.engine == ENGINE_DVENGINE else None, label) as jobs:
                    started = time.perf_counter()
                    outcome = prepared.run()
                    elapsed = time.perf_counter() - started
                m.spark_jobs = jobs.jobs
            finally:
                prepared.cleanup()
            self._record_outcome(m, outcome.metrics, outcome.reported_rows)
            phase = "verification"
            problems += self._verify(workload, contender, table, m, is_engine, before, since)
            phase = "read after"
            if (self.config.read_after and rep < self.config.read_after_reps) or not self._independently_verified(m):
                problems += self._read_after(workload, contender, table, m, is_engine)
        except Exception as exc:
            problems.append(f"{phase}: {describe_error(exc)}")
        finally:
            if is_engine:
                shutil.rmtree(table, ignore_errors=True)
        if is_engine and not self._independently_verified(m) and not any(v.startswith("read:") for v in m.verified_by):
            problems.append("no reader verified the table")
        if problems:
            m.status, m.error = STATUS_FAILED, "; ".join(problems)
        else:
            m.seconds = elapsed
        if timed:
            self.measurements.append(m)
        return m

    @staticmethod
    def _record_outcome(m: Measurement, metrics: dict[str, Any], reported_rows: int | None) -> None:
        m.metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}
        m.reported_rows = reported_rows
        if "numDeletionVectorsAdded" in m.metrics:
            added = int(m.metrics["numDeletionVectorsAdded"] or 0)
            m.dvs_written = added + int(m.metrics.get("numDeletionVectorsUpdated") or 0)

    @staticmethod
    def _independently_verified(m: Measurement) -> bool:
        return "duckdb" in m.verified_by

    def _verify(
        self,
        workload: Workload,
        contender: Contender,
        table: str,
        m: Measurement,
        is_engine: bool,
        before: dict[str, int],
        since: int,
    ) -> list[str]:
        """Correctness first: the rows the engine reports, then DuckDB's view of the table."""
        problems: list[str] = []
        want_rows = contender.reported_rows_expected(workload)
        if m.reported_rows is not None:
            m.verified_by.append("metrics")
            if m.reported_rows != want_rows:
                problems.append(f"reported {m.reported_rows} rows changed, expected {want_rows}")
        if is_engine:
            fp = tables.footprint(table, before, since)
            for key, value in asdict(fp).items():
                setattr(m, key, value)
            observed = duckdb_facts(table)
            if observed is not None:
                m.verified_by.append("duckdb")
                expected = expected_facts(workload, self.layout)
                if (diff := mismatch(expected, observed, "duckdb delta_scan")) is not None:
                    problems.append(diff)
        return problems

    def _read_after(
        self, workload: Workload, contender: Contender, table: str, m: Measurement, is_engine: bool
    ) -> list[str]:
        """Timed full-table reads, each also checked: a reader that gets DVs wrong fails the contender."""
        problems: list[str] = []
        expected = expected_facts(workload, self.layout) if is_engine else self.base_facts()
        for read in contender.read_after(table, self.context()):
            m.read_after[read.reader] = read.seconds
            m.verified_by.append(f"read:{read.reader}")
            if (diff := mismatch(expected, read.facts, f"{contender.name} {read.reader} read")) is not None:
                problems.append(diff)
        return problems

    def base_facts(self) -> TableFacts:
        rows = self.layout.rows
        return TableFacts(rows, rows * (rows - 1) // 2, 0)

    # --- the loop ----------------------------------------------------------------------------

    def available(self, workload: Workload, contender: Contender) -> bool:
        key = (workload.name, contender.name)
        if key not in self.unavailable:
            reason = contender.unavailable(workload)
            if reason is None:
                return True
            self.unavailable[key] = reason
            self.measurements.append(
                Measurement(
                    workload.name,
                    workload.kind,
                    contender.name,
                    0,
                    workload.fraction(self.layout.rows),
                    STATUS_UNAVAILABLE,
                    error=reason,
                )
            )
            self.log(f"{'':9}{workload.name:<15} {contender.name:<17} not available: {reason}")
        return False

    def warm_up(self) -> None:
        firsts: dict[str, Workload] = {}
        for w in self.workloads:
            firsts.setdefault(w.kind, w)
        for w in firsts.values():
            for c in self.contenders:
                if c.unavailable(w) is None:
                    m = self.measure(w, c, -1, timed=False)
                    self.log(
                        f"warm-up  {w.name:<15} {c.name:<17} {m.status}{'' if m.error is None else ': ' + m.error}"
                    )

    def baseline_reads(self) -> dict[str, dict[str, float]]:
        """Full-table reads of each pristine base: what the read-after times compare to."""
        out: dict[str, dict[str, float]] = {}
        seen: set[str] = set()
        for c in self.contenders:
            if c.engine in seen:
                continue
            seen.add(c.engine)
            table = self.bases.get(c.engine, os.path.dirname(self.sources[0]))
            runs = [c.read_after(table, self.context()) for _ in range(max(1, min(3, self.config.repeat)))]
            out[c.engine] = {
                r.reader: statistics.median([run[i].seconds for run in runs]) for i, r in enumerate(runs[0])
            }
            self.log(
                f"read of the untouched table ({c.engine}): "
                + ", ".join(f"{k} {v:.3f} s" for k, v in out[c.engine].items())
            )
        return out

    def run(self) -> dict[str, Any]:
        started_at = dt.datetime.now(dt.UTC)
        load_start = load_average()
        self.prepare()
        fingerprints = {e: tables.fingerprint(p) for e, p in self.bases.items()}
        if self.config.warmup:
            self.warm_up()
        baseline = self.baseline_reads() if self.config.read_after else {}
        total = sum(self.config.repeat for w in self.workloads for c in self.contenders if self.available(w, c))
        done = 0
        for w in self.workloads:
            for rep in range(self.config.repeat):
                for c in self.contenders:
                    if (w.name, c.name) in self.unavailable:
                        continue
                    done += 1
                    m = self.measure(w, c, rep)
                    self.log(progress_line(done, total, m, self.config.repeat))
        pristine = all(tables.fingerprint(self.bases[e]) == fp for e, fp in fingerprints.items())
        finished_at = dt.datetime.now(dt.UTC)
        return {
            "config": asdict(self.config),
            "machine": machine_facts(self.spark),
            "load_average": {"start": load_start, "end": load_average()},
            "started_at": started_at.isoformat(),
            "finished_at": finished_at.isoformat(),
            "duration_s": (finished_at - started_at).total_seconds(),
            "layout": asdict(self.layout),
            "base_tables": {e: base_summary(p) for e, p in self.bases.items()},
            "bases_pristine_after_run": pristine,
            "rewrite_threshold_in_effect": threshold_in_effect(self.spark) if ENGINE_DVENGINE in self.engines else None,
            "baseline_read_s": baseline,
            "workloads": [workload_info(w, self.layout) for w in self.workloads],
            "measurements": [asdict(m) for m in self.measurements],
            "summaries": [asdict(s) for s in summarize(self.measurements)],
        }

    def cleanup(self) -> None:
        if self.spark is not None:  # the session may outlive the run (a caller's, the tests')
            for key, previous in self.saved_conf.items():
                if previous is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, previous)
        if self.config.keep_work:
            return
        if self.config.work_dir is None:
            shutil.rmtree(self.work, ignore_errors=True)
        else:  # a user-chosen work dir keeps the generated source for the next run
            shutil.rmtree(self.copies, ignore_errors=True)
            shutil.rmtree(os.path.join(self.work, "bases"), ignore_errors=True)


def describe_error(exc: BaseException) -> str:
    """One line for an engine error; for a Java error, the deepest ``Caused by`` (the real reason)."""
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    causes = [line for line in lines if JAVA_ERROR.match(line)]
    if causes:
        head += f" [{causes[-1].removeprefix('Caused by: ').removeprefix(': ')}]"
    return head[:600]


def base_summary(path: str) -> dict[str, Any]:
    state = tables.folder_state(path)
    data = {rel: s for rel, s in state.items() if not rel.startswith(tables.LOG_DIR)}
    return {"files": len(data), "bytes": sum(data.values()), "version": tables.latest_version(path)}


def workload_info(w: Workload, layout: Layout) -> dict[str, Any]:
    return {
        "name": w.name,
        "kind": w.kind,
        "shape": w.shape,
        "predicate": w.predicate,
        "merge_condition": "t.id = s.id" if w.kind == "merge" else None,
        "fraction": w.fraction(layout.rows),
        "matched_rows": len(w.matched_ids),
        "new_rows": len(w.new_ids),
        "files_holding_matches": layout.files_holding(w.matched_ids),
        "expected": expected_facts(w, layout).as_dict(),
    }


def progress_line(done: int, total: int, m: Measurement, repeat: int) -> str:
    head = f"[{done:>3}/{total}] {m.workload:<15} {m.contender:<17} rep {m.repetition + 1}/{repeat}"
    if m.status != STATUS_OK or m.seconds is None:
        return f"{head}  FAILED: {m.error}"
    parts = [f"{m.seconds:7.3f} s"]
    if m.spark_jobs is not None:
        parts.append(f"{m.spark_jobs} Spark jobs")
    if m.files_removed is not None:
        parts.append(
            f"touched {m.files_removed} files, wrote {m.data_files_written} data + {m.dv_files_written} DV files"
            f" ({human_bytes(m.bytes_written)})" + ("" if m.dvs_written is None else f", {m.dvs_written} DVs")
        )
    elif "filesScanned" in m.metrics:
        parts.append(f"scanned {m.metrics['filesScanned']} files")
    if m.read_after:
        parts.append("read after: " + ", ".join(f"{k} {v:.3f} s" for k, v in m.read_after.items()))
    return f"{head}  " + "  ".join(parts) + f"  ok ({'+'.join(m.verified_by)})"


def run_benchmark(config: BenchConfig, spark: SparkSession | None = None, log: Log = print) -> dict[str, Any]:
    """Run the benchmark and return the results payload (outputs are written by ``outputs``)."""
    runner = Runner(config, spark, log)
    try:
        return runner.run()
    finally:
        runner.cleanup()
