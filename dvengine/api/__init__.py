"""The user-facing API: ``DeltaTable`` with delta-spark's names, its builders and DML entry points.

Floors inside this package, bottom to top: ``dml`` / ``maintenance`` / ``table_support`` (what the
calls do), the builders (``merge_builder``, ``optimize_builder``, ``table_builder``), and ``table``
(``DeltaTable``, which hands out the builders). Nothing here imports ``table`` except under
``TYPE_CHECKING``: a builder that must return a ``DeltaTable`` is given the class by the caller.
"""
