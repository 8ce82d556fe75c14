"""What a benchmark run measures: table size and shape, workloads, contenders, repetitions.

Two presets exist because the run has two jobs: ``--quick`` is the smoke-sized demonstration
``make run`` performs in a few minutes on 2 cores, the full preset is the 10M-row / 20-file
table of DESIGN.md section 2, where delta-rs timings were first measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FULL_ROWS = 10_000_000
FULL_FILES = 20
FULL_REPEAT = 3
QUICK_ROWS = 1_000_000
QUICK_FILES = 10
QUICK_REPEAT = 1

ALL_CONTENDERS = (
    "dvengine-dv",
    "dvengine-local",
    "dvengine-spark",
    "dvengine-rewrite",
    "dvengine-auto",
    "delta-rs",
    "floor",
)


@dataclass(frozen=True)
class BenchConfig:
    """One run's parameters; ``workloads`` holds workload names (see ``workloads.catalogue``)."""

    rows: int = FULL_ROWS
    files: int = FULL_FILES
    repeat: int = FULL_REPEAT
    partitioned: bool = False
    workloads: tuple[str, ...] = ()
    contenders: tuple[str, ...] = ALL_CONTENDERS
    out_dir: str = "bench-results"
    work_dir: str | None = None
    keep_work: bool = False
    read_after: bool = True
    read_after_reps: int = 1  # full-table reads are timed in the first N repetitions (DuckDB checks every one)
    warmup: bool = True
    seed: int = 20240601
    quick: bool = False
    # Spark SQL confs set in the bench's session before the run (``--spark-conf``), e.g. the
    # Spark executor's DML strategy; recorded in the results so a run says what it measured.
    spark_conf: dict[str, str] = field(default_factory=dict)
    # The kind of session dvengine's contenders run in (engine.spark.session.start_session):
    # dvengine (get_or_create_session), plain (a user's bare builder), connect (local Spark Connect).
    spark_session: str = "dvengine"

    def __post_init__(self) -> None:
        if self.rows < 1 or self.files < 1 or self.rows < self.files:
            raise ValueError(f"need rows >= files >= 1, got rows={self.rows}, files={self.files}")
        if self.repeat < 1:
            raise ValueError(f"repeat must be >= 1, got {self.repeat}")
        unknown = [c for c in self.contenders if c not in ALL_CONTENDERS]
        if unknown:
            raise ValueError(f"unknown contender(s) {unknown}; choose from {ALL_CONTENDERS}")
