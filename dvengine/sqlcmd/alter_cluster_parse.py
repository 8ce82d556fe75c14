"""``ALTER TABLE t CLUSTER BY (c1, c2, ...)`` and ``ALTER TABLE t CLUSTER BY NONE``, token by token.

Delta's grammar (``DeltaSqlBase.g4`` ``alterTableClusterBy``): a table, ``CLUSTER BY``, then
either ``NONE`` or a parenthesized, non-empty list of (possibly dotted, back-quoted) column
references. Each column is kept as its name parts, as Delta's parser does.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.alter_parse import after_alter_table
from dvengine.sqlcmd.statements import AlterClusterByStatement
from dvengine.sqlcmd.tokens import TokenCursor, tokenize

PART = "ALTER TABLE ... CLUSTER BY"


def is_alter_cluster_by(text: str) -> bool:
    """``ALTER TABLE <table> CLUSTER BY ...``."""
    cur = after_alter_table(text, PART)
    return cur is not None and _at_cluster_by(cur)


def _at_cluster_by(cur: TokenCursor) -> bool:
    # sqlglot reads ``CLUSTER BY`` as one token (its text as written); split words otherwise
    return " ".join(cur.word().split()) == "CLUSTER BY" or (cur.word() == "CLUSTER" and cur.word(1) == "BY")


def _expect_cluster_by(cur: TokenCursor) -> None:
    if not _at_cluster_by(cur):
        raise SqlParseError(f"{PART}: expected CLUSTER BY in {cur.text!r}")
    cur.pos += 1 if cur.word() != "CLUSTER" else 2


def _column(cur: TokenCursor) -> tuple[str, ...]:
    parts: list[str] = []
    while True:
        token = cur.peek()
        if token is None or token.token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.COMMA,
                                                 TokenType.L_PAREN, TokenType.R_PAREN, TokenType.DOT):
            where = "at the end" if token is None else f"at {token.text!r}"
            raise SqlParseError(f"{PART}: expected a column name {where} in {cur.text!r}")
        parts.append(token.text)
        cur.pos += 1
        dot = cur.peek()
        if dot is None or dot.token_type != TokenType.DOT:
            return tuple(parts)
        cur.pos += 1


def parse_alter_cluster_by(text: str) -> AlterClusterByStatement:
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=PART)
    table = cur.table(PART)
    _expect_cluster_by(cur)
    if cur.accept("NONE"):
        cur.end(PART)
        return AlterClusterByStatement(table, ())
    opening = cur.peek()
    if opening is None or opening.token_type != TokenType.L_PAREN:
        raise SqlParseError(f"{PART}: expected NONE or '(' after CLUSTER BY in {text!r}")
    cur.pos += 1
    columns = [_column(cur)]
    while (token := cur.peek()) is not None and token.token_type == TokenType.COMMA:
        cur.pos += 1
        columns.append(_column(cur))
    closing = cur.peek()
    if closing is None or closing.token_type != TokenType.R_PAREN:
        raise SqlParseError(f"{PART}: expected ',' or ')' in the column list of {text!r}")
    cur.pos += 1
    cur.end(PART)
    return AlterClusterByStatement(table, tuple(columns))
