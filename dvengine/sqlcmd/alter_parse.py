"""``ALTER TABLE t SET TBLPROPERTIES (...)`` / ``UNSET TBLPROPERTIES [IF EXISTS] (...)``,
``ADD CONSTRAINT name CHECK (expr)`` / ``DROP CONSTRAINT [IF EXISTS] name`` and
``{ALTER|CHANGE} [COLUMN] c TYPE type`` (type widening), token by token.

sqlglot parses ``ALTER TABLE ... SET TBLPROPERTIES`` only loosely (keys and values as opaque
properties), and Delta scripts need it to turn on features such as the change data feed, so the
few forms Delta documents are read from the tokens here. Keys are dotted names or quoted
strings; values quoted strings, numbers or ``true``/``false``, all stored as strings (the log
keeps ``Map[String, String]``). Any other ALTER TABLE goes to Spark unchanged.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.statements import (
    AlterColumnTypeStatement,
    AlterConstraintStatement,
    AlterPropertiesStatement,
    TableRef,
)
from dvengine.sqlcmd.tokens import TokenCursor, tokenize

PART = "ALTER TABLE ... TBLPROPERTIES"


def is_alter_properties(text: str) -> bool:
    words = [t.text.upper() for t in tokenize(text)[:12] if t.token_type != TokenType.STRING]
    return len(words) >= 2 and words[:2] == ["ALTER", "TABLE"] and "TBLPROPERTIES" in words


def is_alter_constraint(text: str) -> bool:
    words = [t.text.upper() for t in tokenize(text)[:12] if t.token_type != TokenType.STRING]
    return len(words) >= 2 and words[:2] == ["ALTER", "TABLE"] and "CONSTRAINT" in words


def is_alter_column_type(text: str) -> bool:
    words = [t.text.upper() for t in tokenize(text) if t.token_type != TokenType.STRING]
    return len(words) >= 4 and words[:2] == ["ALTER", "TABLE"] and ("ALTER" in words[3:] or "CHANGE" in words[3:]) and (
        "TYPE" in words
    )


def alter_table_opening(text: str, part: str) -> tuple[TokenCursor, TableRef] | None:
    """A cursor just after ``ALTER TABLE <table>``, and the table; None when the text is not such a
    statement (how the ALTER forms that share that opening tell whether a text is theirs)."""
    cur = TokenCursor(text, tokenize(text), text)
    if not cur.accept("ALTER", "TABLE"):
        return None
    try:
        table = cur.table(part)
    except SqlParseError:
        return None
    return cur, table


def after_alter_table(text: str, part: str) -> TokenCursor | None:
    """:func:`alter_table_opening`'s cursor alone."""
    opening = alter_table_opening(text, part)
    return None if opening is None else opening[0]


def open_alter_column(text: str, part: str) -> tuple[TokenCursor, TableRef]:
    """The cursor past ``ALTER TABLE t {ALTER|CHANGE} [COLUMN]``, and ``t``: the opening every
    single-column ALTER statement shares (type, default, nullability)."""
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=part)
    table = cur.table(part)
    if not (cur.accept("ALTER") or cur.accept("CHANGE")):
        raise SqlParseError(f"{part}: expected ALTER COLUMN or CHANGE COLUMN in {text!r}")
    cur.accept("COLUMN")
    return cur, table


def parse_alter_column_type(text: str) -> AlterColumnTypeStatement:
    """``ALTER TABLE t ALTER|CHANGE [COLUMN] a.b TYPE <type>``; the type is the rest of the text."""
    part = "ALTER TABLE ... ALTER COLUMN ... TYPE"
    cur, table = open_alter_column(text, part)
    names: list[str] = []
    while (token := cur.peek()) is not None and token.text.upper() != "TYPE":
        if token.token_type != TokenType.DOT:
            names.append(token.text)
        cur.pos += 1
    if token is None or not names:
        raise SqlParseError(f"{part}: expected a column name and TYPE <type> in {text!r}")
    type_text = text[token.end + 1 :].strip()
    if not type_text:
        raise SqlParseError(f"{part}: expected a type after TYPE in {text!r}")
    return AlterColumnTypeStatement(table, ".".join(names), type_text)


def parse_alter_constraint(text: str) -> AlterConstraintStatement:
    """The CHECK expression is kept as written (the text between CHECK's parentheses): Delta stores it so."""
    part = "ALTER TABLE ... CONSTRAINT"
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=part)
    table = cur.table(part)
    if cur.accept("DROP", "CONSTRAINT"):
        if_exists = cur.accept("IF", "EXISTS")
        name = cur.peek()
        if name is None or name.token_type == TokenType.STRING:
            raise SqlParseError(f"{part}: expected a constraint name after DROP CONSTRAINT in {text!r}")
        cur.pos += 1
        cur.end(part)
        return AlterConstraintStatement(table, name.text, None, if_exists)
    cur.expect("ADD", "CONSTRAINT", part=part)
    name = cur.peek()
    if name is None or name.token_type == TokenType.STRING:
        raise SqlParseError(f"{part}: expected a constraint name after ADD CONSTRAINT in {text!r}")
    cur.pos += 1
    cur.expect("CHECK", part=part)
    opening = cur.peek()
    if opening is None or opening.token_type != TokenType.L_PAREN:
        raise SqlParseError(f"{part}: expected '(' after CHECK in {text!r}")
    depth = 0
    for index in range(cur.pos, len(cur.tokens)):
        token = cur.tokens[index]
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth == 0:
            expression = text[opening.end + 1 : token.start].strip()
            cur.pos = index + 1
            break
    else:
        raise SqlParseError(f"{part}: unbalanced parentheses after CHECK in {text!r}")
    cur.end(part)
    if not expression:
        raise SqlParseError(f"{part}: CHECK () has no expression in {text!r}")
    return AlterConstraintStatement(table, name.text, expression)


def _key(cur: TokenCursor) -> str:
    token = cur.peek()
    if token is None:
        raise SqlParseError(f"{PART}: expected a property name at the end of {cur.text!r}")
    if token.token_type == TokenType.STRING:
        cur.pos += 1
        return token.text
    parts = []
    while True:
        token = cur.peek()
        if token is None or token.token_type in (TokenType.EQ, TokenType.COMMA, TokenType.R_PAREN, TokenType.STRING):
            break
        if token.token_type != TokenType.DOT:
            parts.append(token.text)
        cur.pos += 1
    if not parts:
        raise SqlParseError(f"{PART}: expected a property name in {cur.text!r}")
    return ".".join(parts)


def _value(cur: TokenCursor) -> str:
    token = cur.peek()
    if token is None or token.token_type in (TokenType.COMMA, TokenType.R_PAREN):
        raise SqlParseError(f"{PART}: expected a property value in {cur.text!r}")
    cur.pos += 1
    if token.token_type == TokenType.STRING:
        return token.text
    if token.token_type == TokenType.DASH:  # a negative number
        return "-" + _value(cur)
    return token.text.lower() if token.text.upper() in ("TRUE", "FALSE") else token.text


def _list(cur: TokenCursor, with_values: bool) -> list[tuple[str, str | None]]:
    token = cur.peek()
    if token is None or token.token_type != TokenType.L_PAREN:
        raise SqlParseError(f"{PART}: expected '(' in {cur.text!r}")
    cur.pos += 1
    items: list[tuple[str, str | None]] = []
    while True:
        key = _key(cur)
        value = None
        if with_values:
            token = cur.peek()
            if token is not None and token.token_type == TokenType.EQ:
                cur.pos += 1
            value = _value(cur)
        items.append((key, value))
        token = cur.peek()
        if token is not None and token.token_type == TokenType.COMMA:
            cur.pos += 1
            continue
        if token is not None and token.token_type == TokenType.R_PAREN:
            cur.pos += 1
            return items
        raise SqlParseError(f"{PART}: expected ',' or ')' in {cur.text!r}")


def parse_alter_properties(text: str) -> AlterPropertiesStatement:
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=PART)
    table = cur.table(PART)
    if cur.accept("SET", "TBLPROPERTIES"):
        items = _list(cur, with_values=True)
        cur.end(PART)
        return AlterPropertiesStatement(table, {k: str(v) for k, v in items})
    if cur.accept("UNSET", "TBLPROPERTIES"):
        if_exists = cur.accept("IF", "EXISTS")
        keys = tuple(k for k, _ in _list(cur, with_values=False))
        cur.end(PART)
        return AlterPropertiesStatement(table, None, keys, if_exists)
    raise SqlParseError(f"{PART}: expected SET TBLPROPERTIES or UNSET TBLPROPERTIES in {text!r}")
