"""The contenders: dvengine in its three modes, delta-rs (copy-on-write), and the pyarrow floor.

Each contender turns a workload into a prepared operation (set-up such as building a MERGE
source happens outside the timed region) and knows how to read its table afterwards. The
timed region of the engines includes opening the table (dvengine ``forPath`` + snapshot load,
``deltalake.DeltaTable(path)``), because both must read the log to act.

The floor is not an engine: it reads only the ``id`` column of the files that hold matching
rows (exactly what min/max stats skipping keeps on this layout) and evaluates the predicate in
numpy. No correct engine can find the rows to change with less I/O, so ratios against it show
how much of a contender's time is overhead beyond the unavoidable read.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.bench.data import Layout
from dvengine.bench.verify import FACTS_SQL, TableFacts, facts_from_row
from dvengine.bench.workloads import UPDATE_SET, Workload

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENGINE_DVENGINE = "dvengine"
ENGINE_DELTARS = "delta-rs"
ENGINE_FLOOR = "floor"

CONF_MODE = "dvengine.dml.mode"
CONF_REWRITE_THRESHOLD = "dvengine.dml.rewriteThreshold"


@dataclass
class OpOutcome:
    """What an operation reported: its raw metrics and the rows it says it changed."""

    metrics: dict[str, Any]
    reported_rows: int | None


@dataclass
class Prepared:
    """An operation ready to time, and the untimed clean-up to run after it."""

    run: Callable[[], OpOutcome]
    cleanup: Callable[[], None] = field(default=lambda: None)


@dataclass(frozen=True)
class ReadTiming:
    """One full-table read after the operation: which reader, how long, what it saw."""

    reader: str
    seconds: float
    facts: TableFacts


@dataclass(frozen=True)
class BenchContext:
    """What contenders need besides the workload: the data layout, source files, the session."""

    layout: Layout
    sources: Sequence[str]
    spark: SparkSession | None


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _sum_metrics(metrics: dict[str, Any], keys: Sequence[str]) -> int | None:
    total = 0
    for key in keys:
        value = metrics.get(key)
        if value is None:
            return None
        total += int(value)
    return total


def arrow_facts(table: pa.Table) -> TableFacts:
    """Facts of an Arrow table, computed in Arrow (the same aggregates as ``FACTS_SQL``)."""
    if table.num_rows == 0:
        return TableFacts(0, 0, 0)
    id_sum = pc.sum(table.column("id")).as_py() or 0
    marked = pc.sum(pc.cast(pc.less(table.column("value"), 0.0), pa.int64())).as_py() or 0
    return TableFacts(table.num_rows, int(id_sum), int(marked))


class Contender(ABC):
    """A way of performing the workloads; ``engine`` says which base table it runs on."""

    name: str
    engine: str

    def unavailable(self, workload: Workload) -> str | None:
        """Why this contender cannot run ``workload`` (recorded as "not available"), else None."""
        return None

    @abstractmethod
    def prepare(self, workload: Workload, table: str, ctx: BenchContext) -> Prepared: ...

    @abstractmethod
    def read_after(self, table: str, ctx: BenchContext) -> list[ReadTiming]: ...

    def reported_rows_expected(self, workload: Workload) -> int:
        """Rows the engine's metrics should report: deleted / updated / updated + inserted."""
        return len(workload.matched_ids) + len(workload.new_ids)


class DvengineContender(Contender):
    """dvengine with ``dvengine.dml.mode`` = dv, rewrite or auto (the threshold from the session),
    on the executor ``engine`` picks (``auto``), or forced to ``local`` / ``spark`` (DV mode).

    MERGE sources: the same in-memory Arrow table delta-rs gets, except for the forced-Spark
    contender, which gets it as a cached Spark DataFrame (a Spark DataFrame source under ``auto``
    is collected to Arrow first: ~0.35 s for 100k rows here, see benchmarks/README.md).
    """

    engine = ENGINE_DVENGINE

    def __init__(self, mode: str, executor: str | None = None) -> None:
        self.mode = mode
        self.executor = executor
        self.name = f"dvengine-{executor or mode}"

    def unavailable(self, workload: Workload) -> str | None:
        from dvengine.api.table import DeltaTable

        if workload.kind == "delete":
            return None
        api = "update" if workload.kind == "update" else "merge"
        return None if hasattr(DeltaTable, api) else f"DeltaTable.{api} is not available in this dvengine build"

    def _spark(self, ctx: BenchContext) -> SparkSession:
        if ctx.spark is None:
            raise RuntimeError("dvengine contenders need a SparkSession")
        return ctx.spark

    def prepare(self, workload: Workload, table: str, ctx: BenchContext) -> Prepared:
        from dvengine.api.table import DeltaTable

        spark = self._spark(ctx)
        previous = spark.conf.get(CONF_MODE, None)
        spark.conf.set(CONF_MODE, self.mode)

        def restore() -> None:
            if previous is None:
                spark.conf.unset(CONF_MODE)
            else:
                spark.conf.set(CONF_MODE, previous)

        mode, executor = self.mode, self.executor
        if workload.kind == "delete":
            predicate = workload.predicate

            def run_delete() -> OpOutcome:
                metrics = DeltaTable.forPath(spark, table).deleteMetrics(predicate, mode=mode, engine=executor)
                return OpOutcome(dict(metrics), _int(metrics.get("numDeletedRows")))

            return Prepared(run_delete, restore)
        if workload.kind == "update":
            predicate = workload.predicate

            def run_update() -> OpOutcome:
                dt: Any = DeltaTable.forPath(spark, table)
                metrics = dt.updateMetrics(condition=predicate, set=dict(UPDATE_SET), mode=mode, engine=executor)
                return OpOutcome(dict(metrics or {}), _int((metrics or {}).get("numUpdatedRows")))

            return Prepared(run_update, restore)
        arrow_source = workload.merge_source(ctx.layout)
        source = spark.createDataFrame(arrow_source).cache()
        source.count()  # materialize outside the timed region, as delta-rs gets an in-memory Arrow table

        def run_merge() -> OpOutcome:
            dt: Any = DeltaTable.forPath(spark, table).alias("t")
            if executor == "spark":
                builder = dt.merge(source.alias("s"), "t.id = s.id").withEngine("spark")
            else:  # the same in-memory Arrow table delta-rs gets
                builder = dt.merge(arrow_source, "t.id = s.id", source_alias="s").withEngine(executor or "auto")
            result = builder.whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics()
            metrics = dict(result or {})
            return OpOutcome(metrics, _sum_metrics(metrics, ("numTargetRowsUpdated", "numTargetRowsInserted")))

        def cleanup() -> None:
            source.unpersist()
            restore()

        return Prepared(run_merge, cleanup)

    def read_after(self, table: str, ctx: BenchContext) -> list[ReadTiming]:
        from pyspark.sql import functions as F

        from dvengine.api.table import DeltaTable

        spark = self._spark(ctx)
        started = time.perf_counter()
        df = DeltaTable.forPath(spark, table).toDF()
        row = df.agg(F.count(F.lit(1)), F.sum("id"), F.sum(F.when(F.col("value") < 0, 1).otherwise(0))).collect()[0]
        spark_s = time.perf_counter() - started
        started = time.perf_counter()
        # The columns the Spark read above and delta-rs's SQL touch (Spark prunes the rest itself).
        arrow = DeltaTable.forPath(None, table).toArrow(columns=["id", "value"])
        facts = arrow_facts(arrow)
        arrow_s = time.perf_counter() - started
        return [ReadTiming("spark", spark_s, facts_from_row(tuple(row))), ReadTiming("arrow", arrow_s, facts)]


def threshold_in_effect(spark: SparkSession | None) -> float:
    """The rewrite threshold ``mode=auto`` uses in this session (conf, else the library default)."""
    from dvengine.planning.decisions import DEFAULT_REWRITE_THRESHOLD

    raw = None if spark is None else spark.conf.get(CONF_REWRITE_THRESHOLD, None)
    return float(raw) if raw else DEFAULT_REWRITE_THRESHOLD


class DeltaRsContender(Contender):
    """delta-rs (``deltalake``): copy-on-write, every touched file is rewritten."""

    name = "delta-rs"
    engine = ENGINE_DELTARS

    def prepare(self, workload: Workload, table: str, ctx: BenchContext) -> Prepared:
        from deltalake import DeltaTable

        if workload.kind == "delete":
            predicate = workload.predicate

            def run_delete() -> OpOutcome:
                metrics = DeltaTable(table).delete(predicate)
                return OpOutcome(dict(metrics), _int(metrics.get("num_deleted_rows")))

            return Prepared(run_delete)
        if workload.kind == "update":
            predicate = workload.predicate

            def run_update() -> OpOutcome:
                metrics = DeltaTable(table).update(updates=dict(UPDATE_SET), predicate=predicate)
                return OpOutcome(dict(metrics), _int(metrics.get("num_updated_rows")))

            return Prepared(run_update)
        source = workload.merge_source(ctx.layout)

        def run_merge() -> OpOutcome:
            merger = DeltaTable(table).merge(source=source, predicate="t.id = s.id", source_alias="s", target_alias="t")
            metrics = dict(merger.when_matched_update_all().when_not_matched_insert_all().execute())
            return OpOutcome(metrics, _sum_metrics(metrics, ("num_target_rows_updated", "num_target_rows_inserted")))

        return Prepared(run_merge)

    def read_after(self, table: str, ctx: BenchContext) -> list[ReadTiming]:
        from deltalake import DeltaTable, QueryBuilder

        started = time.perf_counter()
        reader = QueryBuilder().register("t", DeltaTable(table)).execute(FACTS_SQL.format(table="t"))
        result = pa.table(reader.read_all())
        seconds = time.perf_counter() - started
        return [
            ReadTiming("querybuilder", seconds, facts_from_row(tuple(result.column(i)[0].as_py() for i in range(3))))
        ]


class FloorContender(Contender):
    """The unavoidable read: the ``id`` column of the files holding matches, predicate in numpy."""

    name = "floor"
    engine = ENGINE_FLOOR

    def prepare(self, workload: Workload, table: str, ctx: BenchContext) -> Prepared:
        layout = ctx.layout
        blocks = (
            np.unique(layout.block_of(workload.matched_ids)) if len(workload.matched_ids) else np.zeros(0, np.int64)
        )
        files = [ctx.sources[int(b)] for b in blocks]
        if workload.mask is not None:
            mask = workload.mask
        else:
            keys = np.concatenate([workload.matched_ids, workload.new_ids])

            def mask(ids: np.ndarray) -> np.ndarray:
                return np.isin(ids, keys)

        def run_scan() -> OpOutcome:
            found = 0
            for path in files:
                ids = pq.read_table(path, columns=["id"]).column("id").to_numpy()
                found += int(np.count_nonzero(mask(ids)))
            return OpOutcome({"filesScanned": len(files)}, found)

        return Prepared(run_scan)

    def reported_rows_expected(self, workload: Workload) -> int:
        return len(workload.matched_ids)  # the floor finds matches; a merge's new keys match nothing

    def read_after(self, table: str, ctx: BenchContext) -> list[ReadTiming]:
        """Reading the untouched data set with pyarrow: the read cost of a table without DVs."""
        started = time.perf_counter()
        facts = arrow_facts(pq.read_table(list(ctx.sources), columns=["id", "value"]))
        return [ReadTiming("pyarrow", time.perf_counter() - started, facts)]


def make_contenders(names: Sequence[str]) -> list[Contender]:
    factories: dict[str, Callable[[], Contender]] = {
        "dvengine-dv": lambda: DvengineContender("dv"),
        "dvengine-local": lambda: DvengineContender("dv", "local"),
        "dvengine-spark": lambda: DvengineContender("dv", "spark"),
        "dvengine-rewrite": lambda: DvengineContender("rewrite"),
        "dvengine-auto": lambda: DvengineContender("auto"),
        "delta-rs": DeltaRsContender,
        "floor": FloorContender,
    }
    return [factories[n]() for n in names]
