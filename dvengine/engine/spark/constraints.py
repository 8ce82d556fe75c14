"""CHECK constraints on a Spark DataFrame about to be appended (``dvengine.write`` / ``format("delta")``).

The frame may be any Spark plan, so the constraints are evaluated by Spark SQL itself (every
function Spark knows, exactly its semantics): one job that looks for the first row where some
constraint is FALSE or NULL (Delta's rule), as ``check_not_null`` does for NOT NULL columns.
DML on Spark checks its new rows in the writer tasks instead (``rows_job``), on Arrow.
ALTER TABLE ADD CONSTRAINT checks existing rows here when Arrow cannot evaluate the constraint.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dvengine.engine.spark.executor import spark_job
from dvengine.engine.spark.identifiers import quote
from dvengine.engine.spark.reader import scan_logical
from dvengine.errors import ConstraintViolationError, NotLocallyEvaluableError
from dvengine.expressions import to_spark_sql
from dvengine.log import Snapshot
from dvengine.maintenance.constraints import ViolationCounter, count_violations_arrow
from dvengine.writing.constraints import CheckConstraint


def check_frame_constraints(df: DataFrame, constraints: Sequence[CheckConstraint], what: str) -> None:
    """ConstraintViolationError naming the first constraint a row of ``df`` breaks (nothing written yet)."""
    if not constraints:
        return
    holds = [F.coalesce(F.expr(to_spark_sql(c.predicate)), F.lit(False)) for c in constraints]
    flags = [h.alias(f"__dvengine_check_{i}") for i, h in enumerate(holds)]
    columns = sorted({name for c in constraints for name in c.predicate.columns})
    broken = F.lit(False)
    for h in holds:
        broken = broken | ~h
    found = spark_job(what, lambda: df.where(broken).select(*flags, *[F.col(quote(n)) for n in columns]).limit(1).collect())
    if not found:
        return
    row = found[0]
    for i, c in enumerate(constraints):
        if not row[f"__dvengine_check_{i}"]:
            raise ConstraintViolationError(c.violation({n: row[n] for n in sorted(c.predicate.columns)}))


def violation_counter(spark: SparkSession) -> ViolationCounter:
    """ADD CONSTRAINT's check of existing rows: in-process when Arrow evaluates the constraint exactly,
    else one Spark count over the snapshot (DVs applied) with Spark SQL's own semantics."""

    def count(snapshot: Snapshot, constraint: CheckConstraint) -> int:
        try:
            return count_violations_arrow(snapshot, constraint)
        except NotLocallyEvaluableError:
            rows = scan_logical(spark, snapshot, snapshot.files, columns=sorted(constraint.predicate.columns))
            holds = F.coalesce(F.expr(to_spark_sql(constraint.predicate)), F.lit(False))
            return int(spark_job("ADD CONSTRAINT", lambda: rows.where(~holds).count()))

    return count
