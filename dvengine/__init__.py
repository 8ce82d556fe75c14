"""dvengine: row-level DELETE, UPDATE and MERGE on Delta Lake tables with deletion vectors, on Spark."""

from dvengine.table import DeltaTable

__version__ = "0.1.0"

__all__ = ["DeltaTable", "__version__"]
