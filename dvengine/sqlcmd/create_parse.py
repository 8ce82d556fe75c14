"""``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t (cols) USING delta ...`` (and ``REPLACE TABLE``) from
sqlglot's Spark AST.

Only what the create builder can express is accepted: columns (type, NOT NULL, COMMENT,
``GENERATED ALWAYS AS (expr)``, ``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(START WITH n
INCREMENT BY m)]``, ``DEFAULT expr``), PARTITIONED BY, CLUSTER BY, LOCATION, TBLPROPERTIES and the
table COMMENT. Generation and default expressions are kept as written (:mod:`dvengine.sqlcmd.column_text`),
as Delta stores them. ``CREATE ... AS query`` becomes a
:class:`CreateTableAsSelectStatement` (the query's text as written). Anything else Delta would act
on (a column CHECK, PRIMARY KEY) is refused with UnsupportedFeatureError naming it, rather than creating a table that
lacks it.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from dvengine.errors import InvalidArgumentError, SqlParseError, UnsupportedFeatureError
from dvengine.sqlcmd.column_text import ColumnTexts, column_texts
from dvengine.sqlcmd.dml_parse import DIALECT, table_ref
from dvengine.sqlcmd.statements import (
    ColumnDefinition,
    CreateTableAsSelectStatement,
    CreateTableStatement,
    IdentityDefinition,
)
from dvengine.sqlcmd.tokens import tokenize


def is_delta_create(node: exp.Create) -> bool:
    """A CREATE TABLE ... USING delta (other CREATEs go to Spark unchanged)."""
    if str(node.args.get("kind") or "").upper() != "TABLE":
        return False
    props = node.args.get("properties")
    formats = [p for p in (props.expressions if props else []) if isinstance(p, exp.FileFormatProperty)]
    return any(f.name.lower() == "delta" for f in formats)


def _integer(node: exp.Expr | None, column: str, what: str, fallback: int) -> int:
    if node is None:
        return fallback
    try:
        return int(node.sql(dialect=DIALECT).replace(" ", ""))
    except ValueError:
        raise SqlParseError(f"CREATE TABLE: column {column!r}: IDENTITY {what} must be an integer, "
                            f"got {node.sql(dialect=DIALECT)!r}") from None


def _identity(what: exp.GeneratedAsIdentityColumnConstraint, column: str) -> IdentityDefinition:
    for key in ("minvalue", "maxvalue", "cycle", "on_null", "expression"):
        if what.args.get(key):
            raise UnsupportedFeatureError(
                f"CREATE TABLE: column {column!r}: IDENTITY option {key.upper()} is not part of Delta's identity columns"
            )
    step = _integer(what.args.get("increment"), column, "INCREMENT BY", 1)
    if step == 0:
        raise InvalidArgumentError(
            f"CREATE TABLE: column {column!r}: IDENTITY INCREMENT BY must be non-zero (Delta's "
            "DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP)"
        )
    return IdentityDefinition(bool(what.args.get("this")), _integer(what.args.get("start"), column, "START WITH", 1), step)


def _column(col: exp.ColumnDef, texts: ColumnTexts | None) -> ColumnDefinition:
    kind = col.args.get("kind")
    if kind is None:
        raise SqlParseError(f"CREATE TABLE: column {col.name!r} has no type")
    nullable = True
    comment = generated = default = None
    identity = None
    for constraint in col.args.get("constraints") or []:
        what = constraint.args.get("kind")
        if isinstance(what, exp.NotNullColumnConstraint) and not what.args.get("allow_null"):
            nullable = False
        elif isinstance(what, exp.CommentColumnConstraint):
            comment = what.name
        elif isinstance(what, exp.GeneratedAsIdentityColumnConstraint) and what.args.get("this") is not None:
            identity = _identity(what, col.name)
        elif isinstance(what, exp.ComputedColumnConstraint) and texts is not None and texts.generated_as:
            generated = texts.generated_as
        elif isinstance(what, exp.DefaultColumnConstraint) and texts is not None and texts.default:
            default = texts.default
        else:
            raise UnsupportedFeatureError(
                f"CREATE TABLE: column {col.name!r}: {constraint.sql(dialect=DIALECT)} is not supported by dvengine"
            )
    if sum(x is not None for x in (generated, identity, default)) > 1:
        raise SqlParseError(
            f"CREATE TABLE: column {col.name!r} may have only one of GENERATED ALWAYS AS, IDENTITY and DEFAULT"
        )
    return ColumnDefinition(col.name, kind.sql(dialect=DIALECT), nullable, comment, generated, identity, default)


def _query_text(text: str) -> str:
    """The query of ``CREATE ... AS query`` as written: from the first top-level ``AS`` followed by
    SELECT / VALUES / WITH / FROM / '(' to the end (sqlglot's re-print could change spellings)."""
    tokens = tokenize(text)
    depth = 0
    starts = ("SELECT", "VALUES", "WITH", "FROM", "TABLE")
    for i, token in enumerate(tokens[:-1]):
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        after = tokens[i + 1]
        if depth == 0 and token.token_type == TokenType.ALIAS and (
            after.token_type == TokenType.L_PAREN or (after.token_type != TokenType.STRING and after.text.upper() in starts)
        ):
            return text[after.start:].strip()
    raise SqlParseError(f"CREATE TABLE ... AS: cannot find the query in {text!r}")


def _comment_text(node: exp.Expr) -> str:
    """A table COMMENT's text: one string literal, or adjacent ones, which Spark concatenates
    (``'it''s'`` is ``its`` in Spark SQL, not ``it's``)."""
    parts = node.expressions if isinstance(node, exp.Concat) else [node]
    if not all(isinstance(p, exp.Literal) and p.is_string for p in parts):
        raise SqlParseError(f"CREATE TABLE ... COMMENT: expected a string literal, got {node.sql(dialect=DIALECT)!r}")
    return "".join(p.name for p in parts)


def _table_options(node: exp.Create) -> tuple[tuple[str, ...], tuple[str, ...], str | None, str | None, dict[str, str]]:
    """(partitioned by, cluster by, location, comment, properties) of a CREATE's property list."""
    partitioned: tuple[str, ...] = ()
    clustered: tuple[str, ...] = ()
    location = None
    comment = None
    properties: dict[str, str] = {}
    for prop in node.args["properties"].expressions:
        if isinstance(prop, exp.FileFormatProperty):
            continue
        if isinstance(prop, exp.PartitionedByProperty):
            part_schema = prop.this
            names = part_schema.expressions if isinstance(part_schema, exp.Schema) else [part_schema]
            for n in names:
                if not isinstance(n, (exp.Identifier, exp.Column)):
                    raise UnsupportedFeatureError(f"CREATE TABLE ... PARTITIONED BY: {n.sql(dialect=DIALECT)} is not a column")
            partitioned = tuple(n.name for n in names)
        elif isinstance(prop, exp.ClusterProperty):
            for n in prop.expressions:
                if not isinstance(n, (exp.Identifier, exp.Column)):
                    raise UnsupportedFeatureError(f"CREATE TABLE ... CLUSTER BY: {n.sql(dialect=DIALECT)} is not a column")
                if isinstance(n, exp.Column) and len(n.parts) > 1:  # a nested field: Delta allows it, dvengine not
                    raise UnsupportedFeatureError(
                        f"CREATE TABLE ... CLUSTER BY: clustering by the nested field {n.sql(dialect=DIALECT)} is not "
                        "supported by dvengine (top-level columns only)"
                    )
            clustered = tuple(n.name for n in prop.expressions)
        elif isinstance(prop, exp.LocationProperty):
            location = prop.this.name
        elif isinstance(prop, exp.SchemaCommentProperty):
            comment = _comment_text(prop.this)
        elif isinstance(prop, exp.Property):
            properties[prop.name] = prop.args["value"].name
        else:
            raise UnsupportedFeatureError(f"CREATE TABLE: {prop.sql(dialect=DIALECT)} is not supported by dvengine")
    return partitioned, clustered, location, comment, properties


def parse_create_as_select(node: exp.Create, text: str) -> CreateTableAsSelectStatement:
    """``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t USING delta ... AS query``."""
    if isinstance(node.this, exp.Schema):
        raise SqlParseError("CREATE TABLE ... AS SELECT: a column list may not be given; the query's columns are the "
                            "table's (Spark's 'Schema may not be specified in a Create Table As Select')")
    table = table_ref(node.this, "CREATE TABLE ... AS SELECT")
    partitioned, clustered, location, comment, properties = _table_options(node)
    return CreateTableAsSelectStatement(
        table, _query_text(text), bool(node.args.get("exists")), bool(node.args.get("replace")), False, partitioned,
        location, properties, comment, clustered,
    )


def parse_create(node: exp.Create, text: str) -> CreateTableStatement | CreateTableAsSelectStatement:
    """``text`` is the statement as written: generation and default expressions are cut from it."""
    replace = bool(node.args.get("replace"))
    if replace and node.args.get("exists"):
        raise SqlParseError("CREATE OR REPLACE TABLE and IF NOT EXISTS cannot be used together (Spark refuses it)")
    if node.args.get("expression") is not None:
        return parse_create_as_select(node, text)
    schema = node.this
    if not isinstance(schema, exp.Schema):
        raise SqlParseError("CREATE TABLE ... USING delta: the column list (name type, ...) is missing")
    table = table_ref(schema.this, "CREATE TABLE")
    columns = []
    texts = column_texts(text)
    for index, item in enumerate(schema.expressions):
        if isinstance(item, (exp.Identifier, exp.Column)):
            raise SqlParseError(f"CREATE TABLE: column {item.name!r} has no type")
        if not isinstance(item, exp.ColumnDef):
            raise UnsupportedFeatureError(f"CREATE TABLE: {item.sql(dialect=DIALECT)} is not supported by dvengine")
        found = texts[index] if index < len(texts) and texts[index].name == item.name else None
        columns.append(_column(item, found))
    partitioned, clustered, location, comment, properties = _table_options(node)
    return CreateTableStatement(
        table, bool(node.args.get("exists")), tuple(columns), partitioned, location, properties, comment, clustered,
        replace,
    )
