"""Engine-neutral DML commands: DELETE, UPDATE and MERGE written once over an :class:`Executor`.

A command owns the order of work (gates and binding before any byte is written, then retire
rows, then write new rows, then one commit), the metrics under Delta's names, and the clean-up
of every file it wrote when it fails. Executors (``dvengine.engine.local`` in-process on Arrow,
``dvengine.engine.spark`` on a cluster) own only scans, joins and file writes. Nothing here
imports pyspark.
"""
