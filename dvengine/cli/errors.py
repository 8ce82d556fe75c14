"""How the command line reports failures: one line on stderr, and an exit code that says whose fault.

``dvengine: error: <message>`` is the whole report. Exit code 2 means the command line itself is
wrong (argparse's convention: unknown option, bad value, malformed ``--set``); 1 means a valid
command failed (no table, bad predicate, unreadable file, a Spark job error). Tracebacks, and
Spark's Java stacks, are shown only with ``--debug``: a user of the CLI needs the reason, not
the call chain, and Spark errors arrive wrapped in pages of JVM frames whose first line (with
Spark's error class) is the part that says what went wrong.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import NoReturn, TextIO

from dvengine.errors import DvengineError

PROG = "dvengine"
EXIT_FAILURE = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """The command line cannot be run as given (exit code 2)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but an error raises :class:`UsageError` instead of printing usage and exiting.

    Subparsers are created with the parent's class, so every subcommand reports the same way;
    ``--help`` still prints and exits normally.
    """

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(PROG).strip()  # "show" for "dvengine show"
        raise UsageError(f"{command}: {message}" if command else message)


def non_negative_int(text: str) -> int:
    """argparse type for counts such as ``--limit``: a negative number is a usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def one_line(text: str) -> str:
    """Fold a multi-line message (sqlglot's syntax errors, Spark's SQL context) into one line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0].strip() if stripped else ""


def _spark_error_class(exc: BaseException) -> str | None:
    for getter in ("getCondition", "getErrorClass"):
        method = getattr(exc, getter, None)
        if callable(method):
            try:
                value = method()
            except Exception:
                value = None
            if value:
                return str(value)
    return None


def _java_summary(exc: BaseException) -> str | None:
    """``java.class: first line`` of a Py4JJavaError, without its stack; None if not one."""
    java_exception = getattr(exc, "java_exception", None)
    if java_exception is None:
        return None
    try:
        name = str(java_exception.getClass().getName())
        message = str(java_exception.getMessage() or "")
    except Exception:
        return None
    return f"{name}: {_first_line(message)}" if message else name


def describe(exc: BaseException) -> str:
    """The one-line message for an exception reaching the CLI boundary."""
    if isinstance(exc, UsageError):
        return one_line(str(exc))
    name = type(exc).__name__
    module = type(exc).__module__
    if module.startswith(("pyspark.", "py4j.")):
        error_class = _spark_error_class(exc)
        java = _java_summary(exc)
        first = java if java is not None else _first_line(str(exc))
        if error_class and first.startswith(f"[{error_class}]"):
            first = first[len(error_class) + 2 :].strip()
        label = f"Spark {name} [{error_class}]" if error_class else f"Spark {name}"
        return one_line(f"{label}: {first}")
    message = one_line(str(exc))
    if isinstance(exc, (DvengineError, TypeError, ValueError, OSError)):
        return f"{name}: {message}" if message else name
    return f"unexpected {name}: {message} (run with --debug for the traceback)"


def report(exc: BaseException, code: int, debug: bool, stream: TextIO | None = None) -> int:
    """Print the one-line report (after the traceback, with ``--debug``) and return ``code``."""
    out = stream if stream is not None else sys.stderr
    if debug:
        traceback.print_exception(exc, file=out)
    out.write(f"{PROG}: error: {describe(exc)}\n")
    out.flush()
    return code


def exit_code(exc: BaseException) -> int:
    return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILURE


__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "ArgumentParser", "UsageError", "describe", "exit_code", "non_negative_int", "one_line", "report"]
