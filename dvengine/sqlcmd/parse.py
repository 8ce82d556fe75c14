"""Split SQL text into statements and decide, for each, who runs it: dvengine or Spark.

Splitting uses sqlglot's Spark tokenizer, so a ``;`` inside a string or a backquoted name does
not split. A statement is dvengine's when it is one of Delta's DML or utility statements on a
Delta table; everything else (SELECT, INSERT, CREATE VIEW, SET ...) is passed to ``spark.sql``
exactly as written.
"""

from __future__ import annotations

import dataclasses
import itertools

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.alter_cluster_parse import is_alter_cluster_by, parse_alter_cluster_by
from dvengine.sqlcmd.alter_columns_parse import column_statement_kind, parse_alter_columns
from dvengine.sqlcmd.alter_parse import (
    alter_table_opening,
    is_alter_column_type,
    is_alter_constraint,
    is_alter_properties,
    parse_alter_column_type,
    parse_alter_constraint,
    parse_alter_properties,
)
from dvengine.sqlcmd.alter_replace_parse import is_replace_columns, parse_replace_columns
from dvengine.sqlcmd.column_text import identity_options_in_order
from dvengine.sqlcmd.create_parse import is_delta_create, parse_create
from dvengine.sqlcmd.dml_parse import DIALECT, parse_delete, parse_merge, parse_update
from dvengine.sqlcmd.insert_parse import parse_insert
from dvengine.sqlcmd.statements import OtherAlterTable, PassThrough, Statement
from dvengine.sqlcmd.tokens import (
    parse_detail,
    parse_history,
    parse_optimize,
    parse_restore,
    parse_vacuum,
    tokenize,
)


def split_statements(text: str) -> list[str]:
    """The statements of ``text``, each from its first token (leading comments dropped) to before
    its terminating ``;``; empty statements are dropped."""
    if not isinstance(text, str):
        raise TypeError(f"SQL text must be a str, got {type(text).__name__}")
    out: list[str] = []
    start: int | None = None
    for token in tokenize(text):
        if token.token_type == TokenType.SEMICOLON:
            if start is not None:
                out.append(text[start:token.start])
            start = None
        elif start is None:
            start = token.start
    if start is not None:
        out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def _parse_one(text: str, what: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse_one(text, dialect=DIALECT)
    except ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SqlParseError(f"{what}: cannot parse {text!r}: {first}") from exc
    return parsed


def parse_statement(text: str) -> Statement:
    """One statement as dvengine's statement data, or PassThrough for Spark."""
    words = text.split(None, 2)
    first = words[0].upper() if words else ""
    second = words[1].upper() if len(words) > 1 else ""
    if first in ("DESCRIBE", "DESC") and second == "HISTORY":
        return parse_history(text)
    if first in ("DESCRIBE", "DESC") and second == "DETAIL":
        return parse_detail(text)
    if first == "RESTORE":
        return parse_restore(text)
    if first == "OPTIMIZE":
        return parse_optimize(text)
    if first == "VACUUM":
        return parse_vacuum(text)
    if first == "DELETE":
        node = _parse_one(text, "DELETE")
        if not isinstance(node, exp.Delete):
            raise SqlParseError(f"DELETE: cannot parse {text!r}")
        return parse_delete(node)
    if first == "UPDATE":
        node = _parse_one(text, "UPDATE")
        if not isinstance(node, exp.Update):
            raise SqlParseError(f"UPDATE: cannot parse {text!r}")
        return parse_update(node)
    if first == "MERGE":
        node = _parse_one(text, "MERGE")
        if not isinstance(node, exp.Merge):
            raise SqlParseError(f"MERGE: cannot parse {text!r}")
        return parse_merge(node)
    if first == "INSERT":
        return _insert(text)
    if first == "ALTER" and is_replace_columns(text):
        return parse_replace_columns(text)
    if first == "ALTER" and (kind := column_statement_kind(text)) is not None:
        return parse_alter_columns(text, kind)
    if first == "ALTER" and is_alter_properties(text):
        return parse_alter_properties(text)
    if first == "ALTER" and is_alter_constraint(text):
        return parse_alter_constraint(text)
    if first == "ALTER" and is_alter_column_type(text):
        return parse_alter_column_type(text)
    if first == "ALTER" and is_alter_cluster_by(text):
        return parse_alter_cluster_by(text)
    if first == "CREATE" and _uses_delta(text):
        text = identity_options_in_order(text)
        node = _parse_one(text, "CREATE TABLE ... USING delta")
        if isinstance(node, exp.Create) and is_delta_create(node):
            return parse_create(node, text)
    if first == "REPLACE" and second == "TABLE" and _uses_delta(text):
        # sqlglot has no REPLACE TABLE; it is CREATE OR REPLACE's grammar for a table that must exist
        as_create = identity_options_in_order("CREATE OR " + text)
        node = _parse_one(as_create, "REPLACE TABLE ... USING delta")
        if isinstance(node, exp.Create) and is_delta_create(node):
            return dataclasses.replace(parse_create(node, as_create), or_replace=False, replace_only=True)
    if first == "ALTER" and (other := _other_alter_table(text)) is not None:
        return other
    return PassThrough(text)


# The openings of the ALTER TABLE forms dvengine runs: a statement that starts like one of them but
# none of their parsers took is malformed, and goes to Spark for Spark's syntax error, not refused.
_DVENGINE_ALTER_FORMS = ("ALTER", "CHANGE", "CLUSTER", "ADD COLUMN", "ADD COLUMNS", "ADD CONSTRAINT", "DROP COLUMN",
                         "DROP COLUMNS", "DROP CONSTRAINT", "RENAME COLUMN", "SET TBLPROPERTIES", "UNSET TBLPROPERTIES")


def _other_alter_table(text: str) -> OtherAlterTable | None:
    """An ``ALTER TABLE t <form>`` of a form dvengine does not run (None for ALTER VIEW and the like,
    and for a malformed statement of one of dvengine's forms)."""
    opening = alter_table_opening(text, "ALTER TABLE")
    if opening is None:
        return None
    cur, table = opening
    first, two = cur.word(0), f"{cur.word(0)} {cur.word(1)}"
    if first in _DVENGINE_ALTER_FORMS or two in _DVENGINE_ALTER_FORMS:
        return None
    return OtherAlterTable(table, two.strip(), text)


def _insert(text: str) -> Statement:
    """An INSERT into a table is dvengine's (the runner hands names it does not know to Spark); one
    sqlglot cannot parse is Spark's, unless it names ``delta.`path```, which only dvengine reads."""
    if _names_delta_path(text):
        node = _parse_one(text, "INSERT")
    else:
        try:
            node = sqlglot.parse_one(text, dialect=DIALECT)
        except ParseError:
            return PassThrough(text)
    parsed = parse_insert(node, text) if isinstance(node, exp.Insert) else None
    return PassThrough(text) if parsed is None else parsed


def _names_delta_path(text: str) -> bool:
    tokens = tokenize(text)
    return any(
        a.text.lower() == "delta" and b.token_type == TokenType.DOT and c.token_type == TokenType.IDENTIFIER
        for a, b, c in zip(tokens, tokens[1:], tokens[2:], strict=False)
    )


def _uses_delta(text: str) -> bool:
    """``USING delta`` among the tokens: only then is a CREATE dvengine's (and a statement sqlglot
    cannot parse an error); any other CREATE goes to Spark untouched, parsed or not."""
    words = [t.text.upper() for t in tokenize(text) if t.token_type != TokenType.STRING]
    return any(a == "USING" and b == "DELTA" for a, b in itertools.pairwise(words))


def parse_sql(text: str) -> list[Statement]:
    """Every statement of ``text``, parsed before any runs (a later syntax error runs nothing)."""
    statements = [parse_statement(s) for s in split_statements(text)]
    if not statements:
        raise SqlParseError("no SQL statement given")
    return statements
