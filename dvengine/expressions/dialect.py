"""The Spark SQL dialect dvengine parses with: sqlglot's Spark, keeping ``date_trunc`` / ``trunc``
and the datetime patterns of ``date_format`` / ``to_date`` / ``to_timestamp`` exactly as written.

sqlglot rewrites a unit to its unabbreviated name (``date_trunc('Q', ts)`` becomes
``DATE_TRUNC('QUARTER', ts)``) and turns a column unit into a constant (``date_trunc(u, ts)``
becomes ``DATE_TRUNC('U', ts)``). Spark accepts only YEAR/YYYY/YY, QUARTER, MONTH/MM/MON, WEEK,
DAY/DD, HOUR ... MICROSECOND and gives NULL for any other unit ('Q', 'WK', 'D' ...), and reads a
column unit row by row; both rewrites therefore change results, on the Spark executor too (it runs
the regenerated text). Parsed as plain calls, both functions are regenerated verbatim, and the Arrow
evaluator reads the unit itself (``arrow_calls``).

Datetime patterns go through sqlglot's own time format and back, which is not faithful either:
``'y'`` comes back as ``'yyyy'`` (a different parser in Spark) and a quoted ``'%Y'`` as ``'%yyyy'``.
``date_format`` and the two-argument ``to_date`` / ``to_timestamp`` are therefore kept as written too,
and so is ``log10(x)``, which sqlglot turns into ``LOG(10, x)``: Spark computes that as
``log(x) / log(10)``, not ``StrictMath.log10(x)``, and the two differ in the last place.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser


def _verbatim(name: str) -> Any:
    return lambda args: exp.Anonymous(this=name, expressions=args)


def _verbatim_with_pattern(name: str) -> Any:
    """``name(x)`` as sqlglot builds it, ``name(x, pattern)`` as written."""
    one_argument = SparkParser.FUNCTIONS[name]

    def build(args: list[Any], dialect: Any) -> Any:
        if len(args) == 1:
            return one_argument(args, dialect)
        return exp.Anonymous(this=name, expressions=args)

    return build


class _Parser(SparkParser):
    FUNCTIONS = {
        **SparkParser.FUNCTIONS,
        "DATE_TRUNC": _verbatim("DATE_TRUNC"),
        "TRUNC": _verbatim("TRUNC"),
        "DATE_FORMAT": _verbatim("DATE_FORMAT"),
        "TO_DATE": _verbatim_with_pattern("TO_DATE"),
        "TO_TIMESTAMP": _verbatim_with_pattern("TO_TIMESTAMP"),
        "LOG10": _verbatim("LOG10"),
    }


class DvSpark(Spark):
    """Spark, with ``date_trunc`` and ``trunc`` kept as written (registered as ``dvspark``)."""

    Parser = _Parser
