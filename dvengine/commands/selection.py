"""Which executor runs a command: the caller's choice, else Spark conf, else the size rule.

``auto`` runs in-process when the candidate files (after pruning and skipping) hold at most
``dvengine.execution.localMaxBytes`` bytes and the local executor evaluates every expression of
the command exactly; otherwise Spark. Without a SparkSession the local executor is preferred
whatever the size, and Spark is started only for what it alone can evaluate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dvengine.commands.context import DmlContext
from dvengine.commands.executor import ENGINE_AUTO, ENGINE_LOCAL, ENGINE_SPARK, ENGINES, Executor
from dvengine.commands.options import CONF_ENGINE, CONF_LOCAL_MAX_BYTES, ConfLookup
from dvengine.errors import InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import BoundExpression, BoundPredicate
from dvengine.protocol.schema import DataType, StructType

# The measured crossover on this project's machine (benchmarks/README.md, "Choosing the executor"):
# below it the local executor answers faster than Spark's fixed job costs allow.
DEFAULT_LOCAL_MAX_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class EngineChoice:
    """How the caller wants commands executed, and how to build each executor on demand."""

    requested: str
    conf: ConfLookup
    make_local: Callable[[], Executor]
    make_spark: Callable[[], Executor]
    has_session: bool

    @classmethod
    def create(
        cls,
        engine: str | None,
        conf: ConfLookup,
        make_local: Callable[[], Executor],
        make_spark: Callable[[], Executor],
        has_session: bool,
    ) -> EngineChoice:
        if engine is not None and not isinstance(engine, str):
            raise TypeError(f"engine must be a string ('auto', 'local' or 'spark'), got {type(engine).__name__}")
        requested = (engine or conf(CONF_ENGINE) or ENGINE_AUTO).lower()
        if requested not in ENGINES:
            raise InvalidArgumentError(f"engine must be one of {ENGINES}, got {requested!r} (argument or {CONF_ENGINE})")
        return cls(requested, conf, make_local, make_spark, has_session)

    def local_max_bytes(self) -> int:
        raw = self.conf(CONF_LOCAL_MAX_BYTES)
        if raw is None or raw == "":
            return DEFAULT_LOCAL_MAX_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise InvalidArgumentError(f"{CONF_LOCAL_MAX_BYTES} must be an integer number of bytes, got {raw!r}") from None
        if value < 0:
            raise InvalidArgumentError(f"{CONF_LOCAL_MAX_BYTES} must be >= 0, got {value}")
        return value

    def select(
        self,
        schema: StructType,
        predicate: BoundPredicate | None,
        values: Sequence[tuple[str, DataType, BoundExpression]],
        candidate_bytes: int,
        operation: str,
    ) -> Executor:
        """The executor for one command over ``candidate_bytes`` of candidate files."""
        if self.requested == ENGINE_SPARK:
            return self.make_spark()
        local = self.make_local()
        reason = local.unsupported_reason(schema, predicate, values)
        if self.requested == ENGINE_LOCAL:
            if reason is not None:
                local.close()
                raise InvalidPredicateError(
                    f"{operation} cannot run on the local executor: {reason}; use engine='spark' (or 'auto')"
                )
            return local
        if reason is None and (not self.has_session or candidate_bytes <= self.local_max_bytes()):
            return local
        local.close()
        return self.make_spark()


def candidate_bytes(ctx: DmlContext) -> int:
    return sum(add.size for add in ctx.plan.candidates)
