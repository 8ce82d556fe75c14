"""``ALTER TABLE`` column statements: ``ADD COLUMN[S]``, ``RENAME COLUMN``, ``DROP COLUMN[S]``,
``ALTER [COLUMN] c SET DEFAULT expr`` / ``DROP DEFAULT``, ``ALTER [COLUMN] c {SET | DROP} NOT NULL``,
``ALTER [COLUMN] c {COMMENT 'text' | FIRST | AFTER x}`` and Hive-style ``CHANGE [COLUMN] c c type
[COMMENT 'text'] [FIRST | AFTER x]`` (Spark 3.5's grammar, which Delta uses).

The statement kind and the column paths are read token by token (as :mod:`dvengine.sqlcmd.alter_parse`
does for the other ALTER forms), so a DEFAULT expression is kept exactly as written: Delta stores
its text in ``CURRENT_DEFAULT``. ADD COLUMNS' column list goes through sqlglot's Spark parser, which
knows Spark's types (nested ``STRUCT<...>`` included) and the ``FIRST`` / ``AFTER`` positions.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import TokenType

from dvengine.errors import SchemaError, SqlParseError
from dvengine.protocol.ddl import parse_ddl_type
from dvengine.sqlcmd.alter_parse import after_alter_table, open_alter_column
from dvengine.sqlcmd.dml_parse import DIALECT
from dvengine.sqlcmd.statements import (
    AddColumnDefinition,
    AddColumnsStatement,
    AlterColumnChangeStatement,
    AlterColumnDefaultStatement,
    AlterColumnNullabilityStatement,
    AlterColumnSyncIdentityStatement,
    DropColumnsStatement,
    RenameColumnStatement,
    Statement,
)
from dvengine.sqlcmd.tokens import TokenCursor, tokenize

PART = "ALTER TABLE"


def column_statement_kind(text: str) -> str | None:
    """``add``, ``rename``, ``drop``, ``default``, ``nullability``, ``sync`` (SYNC IDENTITY) or
    ``change`` for the column statements this module parses, else None."""
    cur = after_alter_table(text, PART)
    if cur is None:
        return None
    if cur.word() == "ADD" and cur.word(1) in ("COLUMN", "COLUMNS"):
        return "add"
    if cur.word() == "RENAME" and cur.word(1) == "COLUMN":
        return "rename"
    if cur.word() == "DROP" and cur.word(1) in ("COLUMN", "COLUMNS"):
        return "drop"
    if cur.word() in ("ALTER", "CHANGE"):
        words = [cur.word(i) for i in range(len(cur.tokens) - cur.pos)]
        if any(words[i : i + 2] == ["SYNC", "IDENTITY"] for i in range(1, len(words) - 1)):
            return "sync"
        for i in range(1, len(words) - 1):
            if words[i] in ("SET", "DROP") and words[i + 1] == "DEFAULT":
                return "default"
            if words[i] in ("SET", "DROP") and words[i + 1 : i + 3] == ["NOT", "NULL"]:
                return "nullability"
        return "change" if _is_change(cur) else None
    return None


# The words an ALTER COLUMN action starts with (Spark 3.5's alterColumnAction).
_ACTIONS = ("TYPE", "SET", "DROP", "COMMENT", "FIRST", "AFTER")


def _is_change(cur: TokenCursor) -> bool:
    """After ``ALTER TABLE t``: whether the statement is ``{ALTER|CHANGE} [COLUMN] c`` followed by
    COMMENT / FIRST / AFTER, by nothing (an error Spark's parser raises too), or, after CHANGE, by
    a new name (Hive-style). TYPE goes to ALTER COLUMN TYPE's parser."""
    hive = cur.word() == "CHANGE"
    cur.pos += 1
    cur.accept("COLUMN")
    try:
        _path(cur, _ACTIONS, PART, dotted=True)
    except SqlParseError:
        return False
    if cur.word() in ("TYPE", "SET", "DROP"):
        return False
    return cur.word() in ("COMMENT", "FIRST", "AFTER") or cur.peek() is None or hive


def _path(cur: TokenCursor, stop: tuple[str, ...], part: str, dotted: bool = False) -> tuple[str, ...]:
    """A dotted column path (backquotes allowed) up to a word in ``stop``, a comma, ')' or the end
    (with ``dotted``, also up to a name that does not follow a dot)."""
    names: list[str] = []
    while (token := cur.peek()) is not None:
        if token.token_type in (TokenType.COMMA, TokenType.R_PAREN) or (
            token.token_type != TokenType.IDENTIFIER and token.text.upper() in stop
        ):
            break
        if dotted and names and token.token_type != TokenType.DOT and cur.tokens[cur.pos - 1].token_type != TokenType.DOT:
            break
        if token.token_type == TokenType.DOT:
            cur.pos += 1
            continue
        if token.token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN):
            raise SqlParseError(f"{part}: expected a column name at {token.text!r} in {cur.text!r}")
        names.append(token.text)
        cur.pos += 1
    if not names:
        raise SqlParseError(f"{part}: expected a column name in {cur.text!r}")
    return tuple(names)


def parse_rename_column(text: str) -> RenameColumnStatement:
    part = "ALTER TABLE ... RENAME COLUMN"
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=part)
    table = cur.table(part)
    cur.expect("RENAME", "COLUMN", part=part)
    column = _path(cur, ("TO",), part)
    cur.expect("TO", part=part)
    new = _path(cur, (), part)
    cur.end(part)
    if len(new) != 1:
        raise SqlParseError(f"{part}: the new name must be a single name, got {'.'.join(new)!r} (Spark's grammar)")
    return RenameColumnStatement(table, column, new[0])


def parse_drop_columns(text: str) -> DropColumnsStatement:
    part = "ALTER TABLE ... DROP COLUMNS"
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=part)
    table = cur.table(part)
    cur.expect("DROP", part=part)
    if not (cur.accept("COLUMNS") or cur.accept("COLUMN")):
        raise SqlParseError(f"{part}: expected COLUMN or COLUMNS in {text!r}")
    if_exists = cur.accept("IF", "EXISTS")
    opening = cur.peek()
    parenthesized = opening is not None and opening.token_type == TokenType.L_PAREN
    if parenthesized:
        cur.pos += 1
    columns = [_path(cur, (), part)]
    while (token := cur.peek()) is not None and token.token_type == TokenType.COMMA:
        cur.pos += 1
        columns.append(_path(cur, (), part))
    if parenthesized:
        closing = cur.peek()
        if closing is None or closing.token_type != TokenType.R_PAREN:
            raise SqlParseError(f"{part}: expected ')' in {text!r}")
        cur.pos += 1
    cur.end(part)
    return DropColumnsStatement(table, tuple(columns), if_exists)


def parse_column_default(text: str) -> AlterColumnDefaultStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {SET DEFAULT expr | DROP DEFAULT}``; the expression
    is the rest of the text, as written."""
    part = "ALTER TABLE ... ALTER COLUMN ... DEFAULT"
    cur, table = open_alter_column(text, part)
    column = _path(cur, ("SET", "DROP"), part)
    if cur.accept("DROP", "DEFAULT"):
        cur.end(part)
        return AlterColumnDefaultStatement(table, column, None)
    cur.expect("SET", "DEFAULT", part=part)
    token = cur.peek()
    if token is None:
        raise SqlParseError(f"{part}: SET DEFAULT needs an expression in {text!r}")
    default = text[token.start:].strip()
    return AlterColumnDefaultStatement(table, column, default)


def parse_column_nullability(text: str) -> AlterColumnNullabilityStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {SET | DROP} NOT NULL`` (``c`` may be ``s.x``,
    ``m.key``, ``a.element.x``, as Spark's grammar allows)."""
    part = "ALTER TABLE ... ALTER COLUMN ... NOT NULL"
    cur, table = open_alter_column(text, part)
    column = _path(cur, ("SET", "DROP"), part)
    if cur.accept("DROP", "NOT", "NULL"):
        nullable = True
    else:
        cur.expect("SET", "NOT", "NULL", part=part)
        nullable = False
    cur.end(part)
    return AlterColumnNullabilityStatement(table, column, nullable)


def comment_text(cur: TokenCursor, part: str) -> str:
    token = cur.peek()
    if token is None or token.token_type != TokenType.STRING:
        raise SqlParseError(f"{part}: expected a string after COMMENT in {cur.text!r}")
    cur.pos += 1
    return token.text


def _column_position(cur: TokenCursor, part: str) -> str | None:
    """``FIRST`` or ``AFTER name`` (one name, as Spark's colPosition), or None if neither comes next."""
    if cur.accept("FIRST"):
        return "FIRST"
    if not cur.accept("AFTER"):
        return None
    token = cur.peek()
    if token is None or token.token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.DOT, TokenType.L_PAREN):
        raise SqlParseError(f"{part}: expected a column name after AFTER in {cur.text!r}")
    cur.pos += 1
    return f"AFTER {token.text}"


# The words that end a column's type in Hive-style CHANGE COLUMN and REPLACE COLUMNS (Spark's
# colDefinitionDescriptorWithPosition: NOT NULL, DEFAULT, COMMENT, FIRST / AFTER).
_TYPE_END_WORDS = ("COMMENT", "FIRST", "AFTER", "NOT", "DEFAULT")


def column_type_text(cur: TokenCursor, part: str) -> str:
    """A column's type as written (Hive-style CHANGE COLUMN, REPLACE COLUMNS): the tokens up to
    COMMENT, FIRST, AFTER, NOT or DEFAULT outside its brackets, a ',' or ')' closing the column
    (in a column list), or the end; checked by the type parser CREATE TABLE uses."""
    first = last = cur.peek()
    depth = 0
    while (token := cur.peek()) is not None:
        if depth == 0 and (
            token.token_type in (TokenType.COMMA, TokenType.R_PAREN)
            or (token.token_type != TokenType.IDENTIFIER and token.text.upper() in _TYPE_END_WORDS)
        ):
            break
        depth += {TokenType.LT: 1, TokenType.L_PAREN: 1, TokenType.GT: -1, TokenType.R_PAREN: -1}.get(
            token.token_type, 0)
        last = token
        cur.pos += 1
    if first is None or last is None or first is cur.peek():
        raise SqlParseError(f"{part}: expected the column's type after its name in {cur.text!r}")
    type_text = cur.text[first.start : last.end + 1]
    try:
        parse_ddl_type(type_text)
    except SchemaError as exc:
        raise SqlParseError(f"{part}: {exc} in {cur.text!r}") from exc
    return type_text


def parse_column_change(text: str) -> AlterColumnChangeStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c {COMMENT 'text' | FIRST | AFTER x}`` (one action,
    as Spark 3.5's alterColumnAction) or Hive-style ``CHANGE [COLUMN] c c type [COMMENT 'text']
    [FIRST | AFTER x]``, whose new name must be the column's own: Spark's parser refuses a rename
    there (_LEGACY_ERROR_TEMP_0034), and so does this one, before any statement of the text runs."""
    part = "ALTER TABLE ... ALTER COLUMN"
    opening = after_alter_table(text, PART)
    hive = opening is not None and opening.word() == "CHANGE"
    cur, table = open_alter_column(text, part)
    column = _path(cur, _ACTIONS, part, dotted=True)
    if cur.accept("COMMENT"):
        comment = comment_text(cur, part)
        cur.end(part)
        return AlterColumnChangeStatement(table, column, comment=comment)
    position = _column_position(cur, part)
    if position is not None:
        cur.end(part)
        return AlterColumnChangeStatement(table, column, position=position)
    token = cur.peek()
    if token is None:
        raise SqlParseError(
            f"{part}: ALTER TABLE table ALTER COLUMN requires a TYPE, a SET/DROP, a COMMENT, or a FIRST/AFTER "
            f"(Spark's grammar) in {text!r}"
        )
    if not hive or token.token_type in (TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN):
        raise SqlParseError(f"{part}: unexpected {token.text!r} in {text!r}")
    cur.pos += 1
    new_name = token.text
    if cur.peek() is not None and cur.peek().token_type == TokenType.DOT:  # type: ignore[union-attr]
        raise SqlParseError(f"{part}: the column's new name in Hive-style CHANGE COLUMN is one name, in {text!r}")
    if new_name.lower() != column[-1].lower():
        raise SqlParseError(
            f"{part}: Renaming column is not supported in Hive-style ALTER COLUMN, please run RENAME COLUMN instead "
            f"(Spark's _LEGACY_ERROR_TEMP_0034: {'.'.join(column)!r} -> {new_name!r}) in {text!r}"
        )
    data_type = column_type_text(cur, part)
    if cur.accept("NOT", "NULL"):
        raise SqlParseError(
            f"{part}: NOT NULL is not supported in Hive-style ALTER COLUMN, please run ALTER COLUMN ... SET/DROP NOT "
            f"NULL instead (Spark's _LEGACY_ERROR_TEMP_0034) in {text!r}"
        )
    note = comment_text(cur, part) if cur.accept("COMMENT") else None
    moved = _column_position(cur, part)
    cur.end(part)
    return AlterColumnChangeStatement(table, column, note, moved, data_type)


def parse_sync_identity(text: str) -> AlterColumnSyncIdentityStatement:
    """``ALTER TABLE t {ALTER|CHANGE} [COLUMN] c SYNC IDENTITY`` (Delta's ``alterTableSyncIdentity``:
    a qualified name, then the two words, nothing else)."""
    part = "ALTER TABLE ... ALTER COLUMN ... SYNC IDENTITY"
    cur, table = open_alter_column(text, part)
    column = _path(cur, ("SYNC",), part, dotted=True)
    cur.expect("SYNC", "IDENTITY", part=part)
    cur.end(part)
    return AlterColumnSyncIdentityStatement(table, column)


def _column_path(node: exp.Expr) -> tuple[str, ...]:
    if isinstance(node, exp.Dot):
        return (*_column_path(node.this), node.expression.name)
    if isinstance(node, exp.Column):
        return tuple(p.name for p in node.parts)
    return (node.name,)


def _definition(col: exp.ColumnDef, text: str) -> AddColumnDefinition:
    kind = col.args.get("kind")
    path = _column_path(col.this)
    if kind is None:
        raise SqlParseError(f"ALTER TABLE ... ADD COLUMNS: column {'.'.join(path)!r} has no type in {text!r}")
    nullable = True
    comment = default = None
    for constraint in col.args.get("constraints") or []:
        what = constraint.args.get("kind")
        if isinstance(what, exp.NotNullColumnConstraint) and not what.args.get("allow_null"):
            nullable = False
        elif isinstance(what, exp.CommentColumnConstraint):
            comment = what.name
        elif isinstance(what, exp.DefaultColumnConstraint):
            default = what.this.sql(dialect=DIALECT)
        else:
            raise SqlParseError(
                f"ALTER TABLE ... ADD COLUMNS: column {'.'.join(path)!r}: {constraint.sql(dialect=DIALECT)} is not a "
                "clause Delta takes here"
            )
    position = None
    where = col.args.get("position")
    if isinstance(where, exp.ColumnPosition):
        kind_text = str(where.args.get("position") or "").upper()
        position = "FIRST" if kind_text == "FIRST" else f"AFTER {where.this.name}"
    return AddColumnDefinition(path, kind.sql(dialect=DIALECT), nullable, comment, default, position)


def parse_add_columns(text: str) -> AddColumnsStatement:
    part = "ALTER TABLE ... ADD COLUMNS"
    cur = TokenCursor(text, tokenize(text), text)
    cur.expect("ALTER", "TABLE", part=part)
    table = cur.table(part)
    try:
        node = sqlglot.parse_one(text, dialect=DIALECT)
    except ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SqlParseError(f"{part}: cannot parse {text!r}: {first}") from exc
    if not isinstance(node, exp.Alter):
        raise SqlParseError(f"{part}: cannot parse {text!r}")
    defs: list[exp.ColumnDef] = []
    for action in node.args.get("actions") or []:
        items = action.expressions if isinstance(action, exp.Schema) else [action]
        for item in items:
            if not isinstance(item, exp.ColumnDef):
                raise SqlParseError(f"{part}: {item.sql(dialect=DIALECT)!r} is not a column definition in {text!r}")
            defs.append(item)
    if not defs:
        raise SqlParseError(f"{part}: no column given in {text!r}")
    return AddColumnsStatement(table, tuple(_definition(d, text) for d in defs))


def parse_alter_columns(text: str, kind: str) -> Statement:
    if kind == "add":
        return parse_add_columns(text)
    if kind == "rename":
        return parse_rename_column(text)
    if kind == "drop":
        return parse_drop_columns(text)
    if kind == "nullability":
        return parse_column_nullability(text)
    if kind == "change":
        return parse_column_change(text)
    if kind == "sync":
        return parse_sync_identity(text)
    return parse_column_default(text)
