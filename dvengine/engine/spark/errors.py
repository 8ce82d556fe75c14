"""Spark's exceptions translated into dvengine's typed errors at the executor boundary.

Users see one error vocabulary whichever executor ran: a condition that fails on some row
(overflow, division by zero, a string that is no number) is an ``EvaluationError``; a value that
does not fit its column is a ``SchemaViolationError``; a failure of dvengine's own code inside a
Python worker comes back as the typed error it raised there; a data file Spark cannot read is a
``LogCorruptedError`` naming it. The original exception is always kept as ``__cause__``.
"""

from __future__ import annotations

import re

from dvengine import errors

# Error classes raised while rows are evaluated.
EVALUATION_ERROR_CLASSES = (
    "CAST_INVALID_INPUT",
    "CAST_OVERFLOW",
    "NUMERIC_VALUE_OUT_OF_RANGE",
    "ARITHMETIC_OVERFLOW",
    "DIVIDE_BY_ZERO",
    "INVALID_ARRAY_INDEX",
    "DATATYPE_MISMATCH",
    "INCOMPATIBLE_DATA",
    "BINARY_ARITHMETIC_OVERFLOW",
    "DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION",
)
_FILE_ERROR_CLASSES = ("FAILED_READ_FILE", "PATH_NOT_FOUND", "FILE_NOT_EXIST")
_PYTHON_ERROR = re.compile(r"dvengine\.errors\.(\w+): (.*)")


# Spark's query context under an evaluation error: the expression text, then carets under the part that failed.
_QUERY_CONTEXT = re.compile(r"== SQL(?: of [^\n]*)? \(line \d+, position \d+\) ==\n([^\n]*)\n( *)(\^+)")
_QUOTED_NAME = re.compile(r"`((?:[^`]|``)+)`")
_ERROR_CLASS_IN_TEXT = re.compile(r"\[([A-Z][A-Z_]+(?:\.[A-Z_]+)?)\]")
_FILE_IN_TEXT = re.compile(r"while reading file (\S+?)\.?\s")


def spark_error_class(exc: BaseException) -> str | None:
    """Spark's error class of a failed job (e.g. CAST_INVALID_INPUT), or None.

    PySpark's exceptions carry it; a raw Py4JJavaError (what a failed ``collect`` can raise)
    only has it in its text, as ``[CLASS]`` on its first lines.
    """
    getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    value = None
    if getter is not None:
        try:
            value = getter()
        except Exception:
            value = None  # a Py4J error without a condition: look in its text
    if value is not None:
        return str(value)
    match = _ERROR_CLASS_IN_TEXT.search(str(exc)[:4000])
    return None if match is None else match.group(1)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def failing_part(exc: BaseException) -> str:
    """Where an evaluation failed, from Spark's query context: `` in `expr`: part `p` (column(s) 'c')``.

    Spark marks the failing part of the expression it was given with carets; the back-quoted names
    in that part are the columns whose values failed. Empty when the text carries no context.
    """
    match = _QUERY_CONTEXT.search(str(exc)[:8000])
    if match is None:
        return ""
    line, start, width = match.group(1), len(match.group(2)), len(match.group(3))
    part = line[start : start + width].strip() or line.strip()
    columns = list(dict.fromkeys(n.replace("``", "`") for n in _QUOTED_NAME.findall(part)))
    where = f" in {line.strip()!r}"
    if part != line.strip():
        where += f": part {part!r}"
    if columns:
        where += f" (column{'s' if len(columns) > 1 else ''} {', '.join(repr(c) for c in columns)})"
    return where


def typed_from_python_worker(exc: BaseException) -> errors.DvengineError | None:
    """The dvengine error a Python worker raised (its traceback text travels inside the exception)."""
    match = _PYTHON_ERROR.search(str(exc))
    if match is None:
        return None
    cls = getattr(errors, match.group(1), None)
    if not isinstance(cls, type) or not issubclass(cls, errors.DvengineError):
        return None
    return cls(match.group(2).strip())


def translate(exc: BaseException, what: str, value_error: bool = False) -> BaseException:
    """The typed error for a Spark failure during ``what`` (or ``exc`` itself if none applies).

    ``value_error``: the failing job evaluated values being stored into columns (UPDATE/MERGE),
    so evaluation failures mean "does not fit its column".
    """
    typed = typed_from_python_worker(exc)
    if typed is not None:
        return typed
    error_class = spark_error_class(exc) or ""
    text = first_line(exc)
    if error_class.startswith(EVALUATION_ERROR_CLASSES) or "ArithmeticException" in text:
        where = failing_part(exc)
        if value_error:
            return errors.SchemaViolationError(f"{what}: a value does not fit its column{where} ({error_class}): {text}")
        return errors.EvaluationError(f"{what} failed while evaluating rows{where} ({error_class}): {text}")
    if error_class.startswith(_FILE_ERROR_CLASSES) or "FileNotFoundException" in str(exc)[:2000]:
        found = _FILE_IN_TEXT.search(str(exc)[:4000])
        where = f" {found.group(1)}" if found else ""
        if "FileNotFoundException" in str(exc)[:4000] or error_class.startswith(("PATH_NOT_FOUND", "FILE_NOT_EXIST")):
            return errors.LogCorruptedError(f"{what}: data file{where} of the table is missing ({error_class}): {text}")
        return errors.DataFileError(f"{what}: data file{where} of the table cannot be read as Parquet ({error_class}): {text}")
    return exc
