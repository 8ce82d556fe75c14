"""``ALTER TABLE t REPLACE COLUMNS (col type [COMMENT 'text'], ...)``, token by token, as Spark's
parser reads it (``visitHiveReplaceColumns``).

Spark's grammar shares the column list with ADD COLUMNS, but its AST builder refuses everything
REPLACE COLUMNS cannot carry, before the table is even looked up: a dotted name ("Replacing with a
nested column"), ``NOT NULL`` and ``FIRST`` / ``AFTER`` (_LEGACY_ERROR_TEMP_0034: "... is not
supported in Hive-style REPLACE COLUMNS"), ``DEFAULT`` (UNSUPPORTED_DEFAULT_VALUE) and a second
``COMMENT`` (ALTER_TABLE_COLUMN_DESCRIPTOR_DUPLICATE); an empty list, a missing parenthesis or a
trailing comma is a syntax error. Each is a :class:`~dvengine.errors.SqlParseError` here, so no
statement of the text runs. Every column it takes is nullable (a nested field's own ``NOT NULL``
inside a STRUCT type is part of the type and stays).
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.alter_columns_parse import column_type_text, comment_text
from dvengine.sqlcmd.alter_parse import alter_table_opening
from dvengine.sqlcmd.statements import AddColumnDefinition, ReplaceColumnsStatement
from dvengine.sqlcmd.tokens import TokenCursor

PART = "ALTER TABLE ... REPLACE COLUMNS"
_NOT_A_NAME = (TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA,
               TokenType.DOT, TokenType.LT, TokenType.GT)


def is_replace_columns(text: str) -> bool:
    """``ALTER TABLE t REPLACE COLUMNS ...`` (or the misspelt ``REPLACE COLUMN``, a syntax error)."""
    opening = alter_table_opening(text, PART)
    return opening is not None and opening[0].word() == "REPLACE" and opening[0].word(1) in ("COLUMNS", "COLUMN")


def _unsupported(what: str, text: str) -> SqlParseError:
    return SqlParseError(
        f"{PART}: {what} is not supported in Hive-style REPLACE COLUMNS (Spark's _LEGACY_ERROR_TEMP_0034) in {text!r}"
    )


def _column(cur: TokenCursor, text: str) -> AddColumnDefinition:
    token = cur.peek()
    if token is None or token.token_type in _NOT_A_NAME:
        raise SqlParseError(f"{PART}: expected a column name in {text!r}")
    cur.pos += 1
    name = token.text
    if (dot := cur.peek()) is not None and dot.token_type == TokenType.DOT:
        raise _unsupported("Replacing with a nested column", text)
    type_text = column_type_text(cur, PART)
    comment: str | None = None
    while (token := cur.peek()) is not None and token.token_type not in (TokenType.COMMA, TokenType.R_PAREN):
        if cur.accept("NOT", "NULL"):
            raise _unsupported("NOT NULL", text)
        if cur.word() in ("FIRST", "AFTER"):
            raise _unsupported("Column position", text)
        if cur.word() == "DEFAULT":
            raise SqlParseError(
                f"{PART}: DEFAULT column values is not supported (Spark's UNSUPPORTED_DEFAULT_VALUE) for column "
                f"{name!r} in {text!r}"
            )
        if not cur.accept("COMMENT"):
            raise SqlParseError(f"{PART}: unexpected {token.text!r} after column {name!r} in {text!r}")
        if comment is not None:
            raise SqlParseError(
                f"{PART}: ALTER TABLE REPLACE column {name} specifies descriptor \"COMMENT\" more than once, which is "
                f"invalid (Spark's ALTER_TABLE_COLUMN_DESCRIPTOR_DUPLICATE) in {text!r}"
            )
        comment = comment_text(cur, PART)
    return AddColumnDefinition((name,), type_text, True, comment)


def parse_replace_columns(text: str) -> ReplaceColumnsStatement:
    opening = alter_table_opening(text, PART)
    if opening is None:
        raise SqlParseError(f"{PART}: cannot parse {text!r}")
    cur, table = opening
    cur.expect("REPLACE", "COLUMNS", part=PART)
    bracket = cur.peek()
    if bracket is None or bracket.token_type != TokenType.L_PAREN:
        raise SqlParseError(f"{PART}: expected '(' and the column list after REPLACE COLUMNS in {text!r}")
    cur.pos += 1
    columns = [_column(cur, text)]
    while (token := cur.peek()) is not None and token.token_type == TokenType.COMMA:
        cur.pos += 1
        columns.append(_column(cur, text))
    closing = cur.peek()
    if closing is None or closing.token_type != TokenType.R_PAREN:
        raise SqlParseError(f"{PART}: expected ',' or ')' in {text!r}")
    cur.pos += 1
    cur.end(PART)
    return ReplaceColumnsStatement(table, tuple(columns), text)
