"""The executor interface: what a DML command asks of an engine, and nothing more.

Commands decide the order of work, validate, build metrics and commit; an executor scans files,
evaluates bound expressions, builds deletion vectors and writes data files. Two implement it:
``dvengine.engine.local.LocalExecutor`` (in-process, pyarrow + pyroaring, no JVM) and
``dvengine.engine.spark.SparkExecutor`` (any Spark master, bitmaps built on executors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from dvengine.commands.context import DmlContext
from dvengine.commands.retirement import RowRetirement
from dvengine.commands.written import WrittenRows
from dvengine.expressions import BoundExpression, BoundPredicate
from dvengine.protocol.actions import AddFile
from dvengine.protocol.schema import DataType, StructType

ENGINE_LOCAL = "local"
ENGINE_SPARK = "spark"
ENGINE_AUTO = "auto"
ENGINES = (ENGINE_AUTO, ENGINE_LOCAL, ENGINE_SPARK)


class Executor(Protocol):
    """One engine's side of a DML command; an instance serves one command and is then closed.

    Every file an executor writes (DV files, data files) it records in ``ctx.written`` as soon as
    it exists, so the command can remove them all if it does not commit.
    """

    name: str

    def unsupported_reason(
        self, schema: StructType, predicate: BoundPredicate | None, values: Sequence[tuple[str, DataType, BoundExpression]]
    ) -> str | None:
        """Why this executor cannot evaluate the condition, or a value stored into the named column
        of the given type, exactly as Spark SQL would (None: it can)."""
        ...

    def check_assignments(self, ctx: DmlContext, assignments: Mapping[str, BoundExpression]) -> None:
        """Static checks that each value can be stored in its column (before any data is read)."""
        ...

    def retire_rows(self, ctx: DmlContext, files: Sequence[AddFile], predicate: BoundPredicate | None) -> RowRetirement:
        """Rows of ``files`` where ``predicate`` is TRUE (all live rows when None) disappear: DVs are
        built and written, per-file DV / rewrite / remove decided. DV files written are listed."""
        ...

    def write_survivors(self, ctx: DmlContext, files: Sequence[AddFile], predicate: BoundPredicate) -> WrittenRows:
        """Rewrite ``files`` keeping the live rows where ``predicate`` is not TRUE (DELETE's copy-on-write)."""
        ...

    def check_new_values(
        self, ctx: DmlContext, predicate: BoundPredicate | None, assignments: Mapping[str, BoundExpression]
    ) -> None:
        """Evaluate every assigned value of every matched row once, before anything is written:
        values that do not fit their column and NULLs into NOT NULL columns raise SchemaViolationError."""
        ...

    def write_updated_rows(
        self,
        ctx: DmlContext,
        predicate: BoundPredicate | None,
        assignments: Mapping[str, BoundExpression],
        rewrite_files: Sequence[AddFile],
    ) -> WrittenRows:
        """Updated copies of matched rows outside ``rewrite_files``, plus ``rewrite_files`` rewritten
        whole with the assignments applied where the predicate holds."""
        ...

    def write_change_data(
        self, ctx: DmlContext, predicate: BoundPredicate | None, assignments: Mapping[str, BoundExpression] | None
    ) -> list[AddFile]:
        """Change data of the rows this DELETE (``assignments`` None: ``delete`` rows) or UPDATE
        (``update_preimage`` + ``update_postimage`` rows) changes in ``ctx.plan.candidates``, written
        under ``_change_data`` with ``commands.change_data.change_file_schema``; returns the files
        (paths relative to ``_change_data``) for ``register_change_files``."""
        ...

    def write_inserted_change_data(self, ctx: DmlContext, adds: Sequence[AddFile]) -> list[AddFile]:
        """The rows of ``adds`` (data files this command wrote, without DVs) as ``insert`` change
        rows under ``_change_data``, for ``register_change_files``. A replaceWhere write whose
        delete wrote change files needs them: readers then take the version's changes from its
        change files alone, so its new rows must be there too (Delta's WriteIntoDelta does the same)."""
        ...

    def close(self) -> None:
        """Release what the command cached (persisted frames, open files)."""
        ...
