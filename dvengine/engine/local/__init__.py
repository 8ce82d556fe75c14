"""The embedded executor: DML in-process on Arrow, no JVM (see ``executor``)."""

from dvengine.engine.local.executor import LocalExecutor

__all__ = ["LocalExecutor"]
