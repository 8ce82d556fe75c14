"""Table maintenance without Spark: history, VACUUM, and fault-injection points for crash tests.

Nothing here imports pyspark; PURGE, which rewrites data, lives in ``dvengine.engine.spark.purge``.
"""

from dvengine.faults import FAULT_ENV, STAGES, fault_point
from dvengine.maintenance.history import history
from dvengine.maintenance.vacuum import plan_vacuum, vacuum

__all__ = ["FAULT_ENV", "STAGES", "fault_point", "history", "plan_vacuum", "vacuum"]
