"""``dvengine.sql(spark, text)``: Delta's SQL statements on dvengine, everything else on Spark."""

from __future__ import annotations

from dvengine.sqlcmd.run import run_sql

__all__ = ["run_sql"]
