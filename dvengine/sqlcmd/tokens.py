"""Delta's utility statements (DESCRIBE HISTORY/DETAIL, RESTORE, OPTIMIZE, VACUUM) from sqlglot tokens.

sqlglot has no grammar for these Delta extensions (it parses OPTIMIZE and VACUUM as opaque
commands and fails on the rest), but its Spark tokenizer knows Spark's quoting rules. So these
statements are matched token by token against Delta's grammar (DeltaSqlBase.g4), and the one
free-form part, OPTIMIZE's WHERE (up to a trailing ``ZORDER BY``), is cut from the original text so it
reaches the API unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from dvengine.errors import SqlParseError, UnsupportedFeatureError
from dvengine.sqlcmd.statements import (
    DetailStatement,
    HistoryStatement,
    OptimizeStatement,
    RestoreStatement,
    TableRef,
    VacuumStatement,
)

_NOT_NAMES = {TokenType.DOT, TokenType.STRING, TokenType.NUMBER, TokenType.SEMICOLON, TokenType.L_PAREN,
              TokenType.R_PAREN, TokenType.COMMA, TokenType.EQ}


def tokenize(text: str) -> list[Token]:
    try:
        return list(Dialect.get_or_raise("spark").tokenize(text))
    except TokenError as exc:
        raise SqlParseError(f"cannot tokenize SQL {text!r}: {exc}") from exc


@dataclass
class TokenCursor:
    """A position in one statement's tokens, with the statement text for error messages."""

    text: str
    tokens: list[Token]
    body: str = ""  # the text the tokens were read from (token positions index it)
    pos: int = 0

    def peek(self, offset: int = 0) -> Token | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def word(self, offset: int = 0) -> str:
        token = self.peek(offset)
        return token.text.upper() if token is not None and token.token_type != TokenType.STRING else ""

    def accept(self, *words: str) -> bool:
        """Consume ``words`` if the next tokens are exactly those keywords."""
        if all(self.word(i) == w for i, w in enumerate(words)):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str, part: str) -> None:
        if not self.accept(*words):
            raise SqlParseError(f"{part}: expected {' '.join(words)} {self._where()} in {self.text!r}")

    def _where(self) -> str:
        token = self.peek()
        return "at the end" if token is None else f"at {token.text!r}"

    def table(self, part: str, allow_string_path: bool = False) -> TableRef:
        """``delta.`/path```, ``'/path'`` (when allowed) or a dotted catalog name."""
        token = self.peek()
        if token is None:
            raise SqlParseError(f"{part}: expected a table name at the end of {self.text!r}")
        if token.token_type == TokenType.STRING:
            if not allow_string_path:
                raise SqlParseError(f"{part}: expected a table name, got the string {token.text!r}; write delta.`{token.text}`")
            self.pos += 1
            return TableRef(path=token.text)
        parts: list[Token] = []
        while True:
            token = self.peek()
            if token is None or token.token_type in _NOT_NAMES:
                raise SqlParseError(f"{part}: expected a table name {self._where()} in {self.text!r}")
            parts.append(token)
            self.pos += 1
            dot = self.peek()
            if dot is None or dot.token_type != TokenType.DOT:
                break
            self.pos += 1
        if len(parts) == 2 and parts[0].text.lower() == "delta" and parts[1].token_type == TokenType.IDENTIFIER:
            return TableRef(path=parts[1].text)
        return TableRef(name=".".join(p.text for p in parts))

    def number(self, part: str) -> str:
        token = self.peek()
        if token is None or token.token_type != TokenType.NUMBER:
            raise SqlParseError(f"{part}: expected a number {self._where()} in {self.text!r}")
        self.pos += 1
        return token.text

    def string(self, part: str) -> str:
        token = self.peek()
        if token is None or token.token_type != TokenType.STRING:
            raise SqlParseError(f"{part}: expected a quoted string {self._where()} in {self.text!r}")
        self.pos += 1
        return token.text

    def end(self, part: str) -> None:
        token = self.peek()
        if token is not None:
            raise SqlParseError(f"{part}: unexpected {token.text!r} in {self.text!r}")


def _cursor(text: str, keyword_count: int) -> TokenCursor:
    """Tokens of ``text`` after its first ``keyword_count`` words (re-tokenized: sqlglot swallows the
    rest of an OPTIMIZE or VACUUM command as one opaque token)."""
    rest = text.strip()
    for _ in range(keyword_count):
        rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else ""
    return TokenCursor(text, tokenize(rest), rest)


def parse_history(text: str) -> HistoryStatement:
    cur = _cursor(text, 2)
    table = cur.table("DESCRIBE HISTORY")
    limit = None
    if cur.accept("LIMIT"):
        limit = int(cur.number("DESCRIBE HISTORY ... LIMIT"))
    cur.end("DESCRIBE HISTORY")
    return HistoryStatement(table, limit)


def parse_detail(text: str) -> DetailStatement:
    cur = _cursor(text, 2)
    table = cur.table("DESCRIBE DETAIL", allow_string_path=True)
    cur.end("DESCRIBE DETAIL")
    return DetailStatement(table)


def parse_restore(text: str) -> RestoreStatement:
    """``RESTORE [TABLE] t [TO] [FOR] {VERSION|SYSTEM_VERSION} AS OF n | {TIMESTAMP|SYSTEM_TIME} AS OF 'ts'``."""
    cur = _cursor(text, 1)
    cur.accept("TABLE")
    table = cur.table("RESTORE")
    cur.accept("TO")
    cur.accept("FOR")
    if cur.accept("VERSION") or cur.accept("SYSTEM_VERSION"):
        cur.expect("AS", "OF", part="RESTORE ... VERSION")
        token = cur.peek()
        raw = cur.string("RESTORE ... VERSION AS OF") if token is not None and token.token_type == TokenType.STRING \
            else cur.number("RESTORE ... VERSION AS OF")
        try:
            version = int(raw)
        except ValueError:
            raise SqlParseError(f"RESTORE ... VERSION AS OF: {raw!r} is not a version number") from None
        cur.end("RESTORE")
        return RestoreStatement(table, version, None)
    if cur.accept("TIMESTAMP") or cur.accept("SYSTEM_TIME"):
        cur.expect("AS", "OF", part="RESTORE ... TIMESTAMP")
        timestamp = cur.string("RESTORE ... TIMESTAMP AS OF")
        cur.end("RESTORE")
        return RestoreStatement(table, None, timestamp)
    raise SqlParseError(f"RESTORE: expected TO VERSION AS OF n or TO TIMESTAMP AS OF '...' in {text!r}")


def _zorder_columns(cur: TokenCursor) -> tuple[str, ...]:
    """``ZORDER BY (a, b)`` or ``ZORDER BY a, b`` (DeltaSqlBase.g4 ``zorderSpec``); dotted names kept whole."""
    cur.expect("ZORDER", "BY", part="OPTIMIZE ... ZORDER BY")
    parens = cur.peek() is not None and cur.peek().token_type == TokenType.L_PAREN  # type: ignore[union-attr]
    if parens:
        cur.pos += 1
    names: list[str] = []
    while True:
        parts: list[str] = []
        while True:
            token = cur.peek()
            if token is None or token.token_type in _NOT_NAMES:
                raise SqlParseError(f"OPTIMIZE ... ZORDER BY: expected a column name {cur._where()} in {cur.text!r}")
            parts.append(token.text)
            cur.pos += 1
            dot = cur.peek()
            if dot is None or dot.token_type != TokenType.DOT:
                break
            cur.pos += 1
        names.append(".".join(parts))
        comma = cur.peek()
        if comma is None or comma.token_type != TokenType.COMMA:
            break
        cur.pos += 1
    if parens:
        closing = cur.peek()
        if closing is None or closing.token_type != TokenType.R_PAREN:
            raise SqlParseError(f"OPTIMIZE ... ZORDER BY: expected ')' {cur._where()} in {cur.text!r}")
        cur.pos += 1
    cur.end("OPTIMIZE ... ZORDER BY")
    return tuple(names)


def parse_optimize(text: str) -> OptimizeStatement:
    """``OPTIMIZE t|'path' [FULL] [WHERE partition condition] [ZORDER BY (col, ...)]`` (Delta's
    ``optimizeTable`` rule: FULL right after the table)."""
    cur = _cursor(text, 1)
    table = cur.table("OPTIMIZE", allow_string_path=True)
    full = cur.word() == "FULL"
    if full:
        cur.pos += 1
    condition = None
    if cur.word() == "WHERE":
        where = cur.tokens[cur.pos]
        rest = cur.tokens[cur.pos:]
        zorder = [i for i, t in enumerate(rest[:-1]) if t.text.upper() == "ZORDER" and rest[i + 1].text.upper() == "BY"]
        stop = rest[zorder[-1]].start if zorder else len(cur.body)
        condition = cur.body[where.end + 1: stop].strip()
        if not condition:
            raise SqlParseError(f"OPTIMIZE ... WHERE: the condition is empty in {text!r}")
        if not zorder:
            return OptimizeStatement(table, condition, full=full)
        cur.pos += zorder[-1]
    if cur.word() == "ZORDER":
        return OptimizeStatement(table, condition, _zorder_columns(cur), full)
    cur.end("OPTIMIZE")
    return OptimizeStatement(table, condition, full=full)


def parse_vacuum(text: str) -> VacuumStatement:
    """``VACUUM t [LITE | FULL] [RETAIN n HOURS] [DRY RUN]``, the modifiers in any order, each at most
    once (Delta's ``vacuumModifiers`` and ``checkDuplicateClauses``); ``USING INVENTORY`` is refused."""
    cur = _cursor(text, 1)
    table = cur.table("VACUUM", allow_string_path=True)
    hours: float | None = None
    dry_run = False
    vacuum_type: str | None = None
    seen: set[str] = set()

    def once(clause: str) -> None:
        if clause in seen:
            raise SqlParseError(f"VACUUM: Found duplicate clauses: {clause} in {text!r}")
        seen.add(clause)

    while cur.peek() is not None:
        word = cur.word()
        if word in ("LITE", "FULL"):
            once("LITE/FULL")
            cur.pos += 1
            vacuum_type = word
        elif cur.accept("RETAIN"):
            once("RETAIN")
            hours = float(cur.number("VACUUM ... RETAIN"))
            cur.expect("HOURS", part="VACUUM ... RETAIN n")
        elif cur.accept("DRY"):
            once("DRY RUN")
            cur.expect("RUN", part="VACUUM ... DRY")
            dry_run = True
        elif word == "USING":
            raise UnsupportedFeatureError(f"VACUUM ... USING INVENTORY is not supported by dvengine: {text!r}")
        else:
            cur.end("VACUUM")
    return VacuumStatement(table, hours, dry_run, vacuum_type)
