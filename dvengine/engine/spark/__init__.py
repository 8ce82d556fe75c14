"""The Spark engine: the only layer of dvengine that imports pyspark."""
