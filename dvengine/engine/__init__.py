"""Compute engines. Only ``dvengine.engine.spark`` imports pyspark."""
