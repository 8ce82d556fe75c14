"""DELETE, UPDATE and MERGE INTO from sqlglot's Spark AST into statement data.

sqlglot finds the clauses; each expression is handed on as Spark SQL text (``.sql(dialect=
"spark")``), to be bound by the same code that binds the DataFrame API's strings. The one change
made to an expression is dropping a DELETE/UPDATE target alias from column references
(``UPDATE t AS x SET v = 1 WHERE x.id = 2``): ``DeltaTable.update`` binds unqualified names.
Anything sqlglot parsed that Delta's grammar does not have (RETURNING, UPDATE ... FROM, LIMIT)
raises UnsupportedFeatureError naming the clause, so it is never dropped silently.
"""

from __future__ import annotations

from sqlglot import exp

from dvengine.errors import SqlParseError, UnsupportedFeatureError
from dvengine.expressions.dialect import DvSpark
from dvengine.sqlcmd.statements import (
    DeleteStatement,
    MergeSource,
    MergeStatement,
    MergeWhen,
    TableRef,
    UpdateStatement,
)

DIALECT = DvSpark  # Spark, with date_trunc / trunc kept as written (see expressions.dialect)


def table_ref(table: exp.Expr, part: str) -> TableRef:
    """``delta.`/path``` or a catalog name from a sqlglot Table."""
    if not isinstance(table, exp.Table):
        raise SqlParseError(f"{part}: expected a table, got {table.sql(dialect=DIALECT)!r}")
    this = table.args.get("this")
    db = table.args.get("db")
    if (
        isinstance(this, exp.Identifier) and this.quoted and isinstance(db, exp.Identifier)
        and db.name.lower() == "delta" and table.args.get("catalog") is None
    ):
        return TableRef(path=this.name)
    parts = [p.name for p in table.parts]
    return TableRef(name=".".join(parts))


def _alias(node: exp.Expr) -> str | None:
    alias = node.args.get("alias")
    return alias.name if alias is not None and alias.name else None


def _unqualify(node: exp.Expr, alias: str | None) -> exp.Expr:
    if alias is None:
        return node

    def strip(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table.lower() == alias.lower() and not n.args.get("db"):
            return exp.column(n.args["this"].copy())
        return n

    return node.copy().transform(strip)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)


def _refuse(node: exp.Expr, keys: tuple[str, ...], statement: str) -> None:
    for key in keys:
        if node.args.get(key):
            raise UnsupportedFeatureError(
                f"{statement}: the {key.upper()} clause is not supported ({_sql(node.args[key]) if isinstance(node.args[key], exp.Expr) else key})"
            )


def _where(node: exp.Expr, alias: str | None) -> str | None:
    where = node.args.get("where")
    return None if where is None else _sql(_unqualify(where.this, alias))


def _assignment_key(target: exp.Expr, aliases: set[str], part: str) -> str:
    if not isinstance(target, exp.Column):
        raise SqlParseError(f"{part}: the left side of an assignment must be a column, got {_sql(target)!r}")
    names = [p.name for p in target.parts]
    if len(names) > 1 and names[0].lower() in aliases:
        names = names[1:]
    return ".".join(names)


def _assignments(items: list[exp.Expr], aliases: set[str], part: str, strip_alias: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if not isinstance(item, exp.EQ):
            raise SqlParseError(f"{part}: expected column = expression, got {_sql(item)!r}")
        key = _assignment_key(item.this, aliases, part)
        if key in out:
            raise SqlParseError(f"{part}: column {key!r} is assigned twice")
        out[key] = _sql(_unqualify(item.expression, strip_alias))
    return out


def parse_delete(node: exp.Delete) -> DeleteStatement:
    _refuse(node, ("using", "returning", "limit", "order", "cluster"), "DELETE")
    table = node.this
    alias = _alias(table)
    return DeleteStatement(table_ref(table, "DELETE FROM"), _where(node, alias))


def parse_update(node: exp.Update) -> UpdateStatement:
    _refuse(node, ("from_", "from", "returning", "limit", "order", "with_"), "UPDATE")
    table = node.this
    alias = _alias(table)
    aliases = {alias.lower()} if alias else set()
    set_items = list(node.expressions)
    if not set_items:
        raise SqlParseError("UPDATE: SET needs at least one column = expression")
    assignments = _assignments(set_items, aliases, "UPDATE ... SET", alias)
    return UpdateStatement(table_ref(table, "UPDATE"), assignments, _where(node, alias))


def _merge_source(using: exp.Expr) -> MergeSource:
    alias = _alias(using)
    if isinstance(using, exp.Subquery):
        if alias is None:
            raise SqlParseError("MERGE ... USING (subquery): the subquery needs an alias")
        return MergeSource(alias=alias, query=_sql(using.this))
    if isinstance(using, exp.Table):
        ref = table_ref(using, "MERGE ... USING")
        name = alias or (using.name if ref.name is not None else None)
        if name is None:
            raise SqlParseError("MERGE ... USING delta.`path`: the source needs an alias")
        plain = exp.Table(this=using.this, db=using.args.get("db"), catalog=using.args.get("catalog"))
        return MergeSource(alias=name, table=table_ref(plain, "MERGE ... USING"))
    raise SqlParseError(f"MERGE ... USING: expected a table, view or (subquery), got {_sql(using)!r}")


def _when(when: exp.When, target_alias: str, source_alias: str) -> MergeWhen:
    matched = bool(when.args.get("matched"))
    by_source = bool(when.args.get("source"))
    kind = "matched" if matched else ("not_matched_by_source" if by_source else "not_matched")
    cond_node = when.args.get("condition")
    condition = None if cond_node is None else _sql(cond_node)
    then = when.args.get("then")
    part = f"WHEN {kind.replace('_', ' ').upper()}"
    aliases = {target_alias.lower()}
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return MergeWhen(kind, "delete", condition, None)
    if isinstance(then, exp.Update):
        items = list(then.expressions)
        if kind == "not_matched":
            raise SqlParseError(f"{part} THEN UPDATE: a row not matched by the target can only be inserted")
        if len(items) == 1 and isinstance(items[0], exp.Star):
            if kind == "not_matched_by_source":
                raise SqlParseError(f"{part} THEN UPDATE SET *: not allowed for rows only the target has")
            return MergeWhen(kind, "update", condition, None)
        return MergeWhen(kind, "update", condition, _assignments(items, aliases, f"{part} THEN UPDATE SET", None))
    if isinstance(then, exp.Insert):
        if kind != "not_matched":
            raise SqlParseError(f"{part} THEN INSERT: only rows not matched by the target can be inserted")
        if isinstance(then.this, exp.Star):
            return MergeWhen(kind, "insert", condition, None)
        columns = then.this.expressions if isinstance(then.this, exp.Tuple) else None
        values = then.expression.expressions if isinstance(then.expression, exp.Tuple) else None
        if columns is None or values is None or len(columns) != len(values):
            raise SqlParseError(f"{part} THEN INSERT: expected (columns) VALUES (values) of equal length, or *")
        inserted = {_assignment_key(c, aliases, f"{part} THEN INSERT"): _sql(v) for c, v in zip(columns, values, strict=True)}
        return MergeWhen(kind, "insert", condition, inserted)
    raise SqlParseError(f"{part}: unsupported action {_sql(then) if isinstance(then, exp.Expr) else then!r}")


def parse_merge(node: exp.Merge) -> MergeStatement:
    _refuse(node, ("returning", "using_cond"), "MERGE")
    target = node.this
    ref = table_ref(target, "MERGE INTO")
    alias = _alias(target)
    target_alias = alias or (target.name if ref.name is not None else None)
    source = _merge_source(node.args["using"])
    on = node.args.get("on")
    if on is None:
        raise SqlParseError("MERGE: the ON condition is missing")
    whens = node.args.get("whens")
    clauses = tuple(_when(w, target_alias or "", source.alias) for w in (whens.expressions if whens else []))
    if not clauses:
        raise SqlParseError("MERGE: at least one WHEN clause is needed")
    return MergeStatement(ref, target_alias, source, _sql(on), clauses)
