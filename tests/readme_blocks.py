"""README.md's Python examples, run as written: found by their first line, executed statement by
statement in one namespace (as a user pastes them into a script), with the folders they name
(``/data/events`` ...) mapped to a test's own temporary folders.

A statement the test names in ``refusals`` must raise the given error (an example may show a call
that is refused in the state it leaves, as Delta refuses it); every other statement must run.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dvengine.errors import DvengineError

README = Path(__file__).resolve().parents[1] / "README.md"
_FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the README the code starts on
    code: str

    @property
    def first_line(self) -> str:
        return self.code.splitlines()[0]


def python_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [Block(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _FENCE.finditer(text)]


def block(first_line_start: str) -> Block:
    """The one README block whose first line starts with ``first_line_start``."""
    found = [b for b in python_blocks() if b.first_line.startswith(first_line_start)]
    assert len(found) == 1, f"README.md has {len(found)} Python blocks starting with {first_line_start!r}"
    return found[0]


def run_block(
    example: Block, namespace: dict[str, Any], replacements: Mapping[str, str] | None = None,
    refusals: Mapping[str, type[DvengineError]] | None = None,
) -> None:
    """Execute ``example`` in ``namespace``, one top-level statement at a time, after replacing
    each key of ``replacements`` by its value (folders, endpoints). A statement containing a key of
    ``refusals`` must raise that error; any other exception fails the test naming the README line.
    The value of the last expression statement run is left in ``namespace["_"]``."""
    code = example.code
    for old, new in (replacements or {}).items():
        code = code.replace(old, new)
    lines = code.splitlines()
    for statement in ast.parse(code).body:
        text = "\n".join(lines[statement.lineno - 1 : statement.end_lineno])
        readme_line = example.line + statement.lineno - 1
        if isinstance(statement, ast.Expr):  # its value is kept in ``_``, as the interactive interpreter does
            statement = ast.copy_location(
                ast.Assign(targets=[ast.copy_location(ast.Name("_", ast.Store()), statement)], value=statement.value),
                statement)
        compiled = compile(ast.Module(body=[statement], type_ignores=[]), f"README.md:{readme_line}", "exec")
        refused = [error for part, error in (refusals or {}).items() if part in text]
        if refused:
            with pytest.raises(refused[0]):
                exec(compiled, namespace)
            continue
        try:
            exec(compiled, namespace)
        except Exception as exc:
            raise AssertionError(f"README.md line {readme_line} failed: {text.strip()}\n{type(exc).__name__}: {exc}") from exc
