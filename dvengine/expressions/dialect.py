"""The Spark SQL dialect dvengine parses with: sqlglot's Spark, keeping ``date_trunc`` / ``trunc``
exactly as written.

sqlglot rewrites a unit to its unabbreviated name (``date_trunc('Q', ts)`` becomes
``DATE_TRUNC('QUARTER', ts)``) and turns a column unit into a constant (``date_trunc(u, ts)``
becomes ``DATE_TRUNC('U', ts)``). Spark accepts only YEAR/YYYY/YY, QUARTER, MONTH/MM/MON, WEEK,
DAY/DD, HOUR ... MICROSECOND and gives NULL for any other unit ('Q', 'WK', 'D' ...), and reads a
column unit row by row; both rewrites therefore change results, on the Spark executor too (it runs
the regenerated text). Parsed as plain calls, both functions are regenerated verbatim, and the Arrow
evaluator reads the unit itself (``arrow_calls``).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser


def _verbatim(name: str) -> Any:
    return lambda args: exp.Anonymous(this=name, expressions=args)


class _Parser(SparkParser):
    FUNCTIONS = {**SparkParser.FUNCTIONS, "DATE_TRUNC": _verbatim("DATE_TRUNC"), "TRUNC": _verbatim("TRUNC")}


class DvSpark(Spark):
    """Spark, with ``date_trunc`` and ``trunc`` kept as written (registered as ``dvspark``)."""

    Parser = _Parser
