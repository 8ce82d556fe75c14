"""``FROM delta.`/path` [VERSION|TIMESTAMP AS OF ...]`` inside queries that Spark runs.

Spark without the Delta jar cannot read ``delta.`/path``` (UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY,
even with a Python data source named delta), so a SELECT or a MERGE source subquery naming one
would fail. These references are found by token (only right after FROM or JOIN, where Delta reads
them as tables, so a column ``delta.`x``` of an alias "delta" is left alone) and the runner swaps
each for a temporary view of dvengine's DV-applying read; the rest of the text is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.tokens import tokenize


@dataclass(frozen=True)
class PathTable:
    """A ``delta.`path``` table reference: text span [start, end) and optional time travel."""

    start: int
    end: int
    path: str
    version: int | None = None
    timestamp: str | None = None


def _time_travel(tokens: list[Token], i: int, text: str) -> tuple[int, int | None, str | None, int]:
    """(tokens consumed, version, timestamp, end offset) of ``[FOR] VERSION|TIMESTAMP AS OF x`` at ``i``."""
    words = [t.text.upper() for t in tokens[i:i + 5]]
    skip = 1 if words[:1] == ["FOR"] else 0
    kind = words[skip] if len(words) > skip else ""
    if kind not in ("VERSION", "TIMESTAMP", "SYSTEM_VERSION", "SYSTEM_TIME") or words[skip + 1:skip + 3] != ["AS", "OF"]:
        return 0, None, None, 0
    index = i + skip + 3
    if index >= len(tokens):
        raise SqlParseError(f"{kind} AS OF: a value is missing in {text!r}")
    value = tokens[index]
    if kind in ("VERSION", "SYSTEM_VERSION"):
        try:
            return skip + 4, int(value.text), None, value.end + 1
        except ValueError:
            raise SqlParseError(f"VERSION AS OF: {value.text!r} is not a version number in {text!r}") from None
    if value.token_type != TokenType.STRING:
        raise SqlParseError(f"TIMESTAMP AS OF: expected a quoted timestamp, got {value.text!r} in {text!r}")
    return skip + 4, None, value.text, value.end + 1


def find_path_tables(text: str) -> list[PathTable]:
    tokens = tokenize(text)
    found: list[PathTable] = []
    i = 0
    while i + 2 < len(tokens):
        prev, name, dot, ident = (tokens[i - 1] if i else None), tokens[i], tokens[i + 1], tokens[i + 2]
        if (
            prev is not None and prev.token_type in (TokenType.FROM, TokenType.JOIN)
            and name.text.lower() == "delta" and name.token_type != TokenType.IDENTIFIER
            and dot.token_type == TokenType.DOT and ident.token_type == TokenType.IDENTIFIER
        ):
            used, version, timestamp, end = _time_travel(tokens, i + 3, text)
            found.append(PathTable(name.start, end or ident.end + 1, ident.text, version, timestamp))
            i += 3 + used
            continue
        i += 1
    return found


def substitute(text: str, tables: list[PathTable], names: list[str]) -> str:
    """``text`` with each table's span replaced by the matching name."""
    out: list[str] = []
    last = 0
    for table, name in zip(tables, names, strict=True):
        out.append(text[last:table.start])
        out.append(name)
        last = table.end
    out.append(text[last:])
    return "".join(out)
