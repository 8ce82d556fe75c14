"""``INSERT {INTO | OVERWRITE} [TABLE] t [(cols)] [BY NAME] [REPLACE WHERE cond] {VALUES ... | query}``
from sqlglot's Spark AST.

Delta's grammar for INSERT is Spark's, plus ``REPLACE WHERE`` (Delta's replaceWhere: an atomic
"delete the rows matching cond, insert these"). VALUES cells become Spark SQL text (the DEFAULT
keyword None), the query its Spark SQL text; the runner decides who evaluates them. Forms Delta
acts on that dvengine does not build (a PARTITION spec, IF NOT EXISTS) raise
UnsupportedFeatureError naming them; ``INSERT OVERWRITE DIRECTORY`` and other non-table targets
are not Delta's and go to Spark unchanged (``None`` here).
"""

from __future__ import annotations

from sqlglot import exp

from dvengine.errors import SqlParseError, UnsupportedFeatureError
from dvengine.sqlcmd.dml_parse import DIALECT, table_ref
from dvengine.sqlcmd.statements import InsertStatement


def _cell(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Var) and node.name.upper() == "DEFAULT":
        return None
    if isinstance(node, exp.Column) and not node.table and node.name.upper() == "DEFAULT" and not node.this.quoted:
        return None
    return node.sql(dialect=DIALECT)


def _rows(values: exp.Values) -> tuple[tuple[str | None, ...], ...]:
    rows = []
    for row in values.expressions:
        cells = row.expressions if isinstance(row, exp.Tuple) else [row]
        rows.append(tuple(_cell(c) for c in cells))
    return tuple(rows)


def parse_insert(node: exp.Insert, text: str) -> InsertStatement | None:
    """The statement, or None when its target is not a table (Spark runs it unchanged)."""
    target = node.this
    columns: tuple[str, ...] | None = None
    if isinstance(target, exp.Schema):
        columns = tuple(c.name for c in target.expressions)
        target = target.this
    if not isinstance(target, exp.Table):
        return None
    if target.args.get("partition"):  # sqlglot hangs the PARTITION spec on the table
        raise UnsupportedFeatureError(f"INSERT: PARTITION (...) is not supported by dvengine; list the columns "
                                      f"instead (INSERT INTO t (cols) VALUES ...): {text!r}")
    for key, what in (("partition", "PARTITION (...)"), ("exists", "IF NOT EXISTS"), ("ignore", "IGNORE"),
                      ("alternative", "OR ..."), ("conflict", "ON CONFLICT"), ("returning", "RETURNING")):
        if node.args.get(key):
            raise UnsupportedFeatureError(f"INSERT: {what} is not supported by dvengine: {text!r}")
    source = node.args.get("expression")
    if source is None:
        raise SqlParseError(f"INSERT: VALUES or a query is missing in {text!r}")
    where = node.args.get("where")
    if isinstance(where, exp.Where):
        where = where.this
    rows = _rows(source) if isinstance(source, exp.Values) else None
    if rows is not None and source.args.get("alias"):
        rows = None  # VALUES ... AS v(a, b): a query for Spark
    return InsertStatement(
        table=table_ref(target, "INSERT"),
        overwrite=bool(node.args.get("overwrite")),
        columns=columns,
        rows=rows,
        query=None if rows is not None else source.sql(dialect=DIALECT),
        replace_where=None if where is None else where.sql(dialect=DIALECT),
        by_name=bool(node.args.get("by_name")),
        text=text,
    )
