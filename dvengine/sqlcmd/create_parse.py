"""``CREATE TABLE [IF NOT EXISTS] t (cols) USING delta ...`` from sqlglot's Spark AST.

Only what the create builder can express is accepted: columns (type, NOT NULL, COMMENT),
PARTITIONED BY, CLUSTER BY, LOCATION, TBLPROPERTIES and the table COMMENT. Anything else Delta would act on
(CREATE ... AS SELECT, generated columns, OR REPLACE) is refused with
UnsupportedFeatureError naming it, rather than creating a table that lacks it.
"""

from __future__ import annotations

from sqlglot import exp

from dvengine.errors import SqlParseError, UnsupportedFeatureError
from dvengine.sqlcmd.dml_parse import DIALECT, table_ref
from dvengine.sqlcmd.statements import ColumnDefinition, CreateTableStatement


def is_delta_create(node: exp.Create) -> bool:
    """A CREATE TABLE ... USING delta (other CREATEs go to Spark unchanged)."""
    if str(node.args.get("kind") or "").upper() != "TABLE":
        return False
    props = node.args.get("properties")
    formats = [p for p in (props.expressions if props else []) if isinstance(p, exp.FileFormatProperty)]
    return any(f.name.lower() == "delta" for f in formats)


def _column(col: exp.ColumnDef) -> ColumnDefinition:
    kind = col.args.get("kind")
    if kind is None:
        raise SqlParseError(f"CREATE TABLE: column {col.name!r} has no type")
    nullable = True
    comment = None
    for constraint in col.args.get("constraints") or []:
        what = constraint.args.get("kind")
        if isinstance(what, exp.NotNullColumnConstraint) and not what.args.get("allow_null"):
            nullable = False
        elif isinstance(what, exp.CommentColumnConstraint):
            comment = what.name
        else:
            raise UnsupportedFeatureError(
                f"CREATE TABLE: column {col.name!r}: {constraint.sql(dialect=DIALECT)} is not supported by dvengine"
            )
    return ColumnDefinition(col.name, kind.sql(dialect=DIALECT), nullable, comment)


def parse_create(node: exp.Create) -> CreateTableStatement:
    if node.args.get("replace"):
        raise UnsupportedFeatureError("CREATE OR REPLACE TABLE ... USING delta is not supported by dvengine")
    if node.args.get("expression") is not None:
        raise UnsupportedFeatureError("CREATE TABLE ... USING delta AS SELECT is not supported by dvengine; "
                                      "create the table, then write the query's DataFrame with format('delta')")
    schema = node.this
    if not isinstance(schema, exp.Schema):
        raise SqlParseError("CREATE TABLE ... USING delta: the column list (name type, ...) is missing")
    table = table_ref(schema.this, "CREATE TABLE")
    columns = []
    for item in schema.expressions:
        if isinstance(item, (exp.Identifier, exp.Column)):
            raise SqlParseError(f"CREATE TABLE: column {item.name!r} has no type")
        if not isinstance(item, exp.ColumnDef):
            raise UnsupportedFeatureError(f"CREATE TABLE: {item.sql(dialect=DIALECT)} is not supported by dvengine")
        columns.append(_column(item))
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
            clustered = tuple(n.name for n in prop.expressions)
        elif isinstance(prop, exp.LocationProperty):
            location = prop.this.name
        elif isinstance(prop, exp.SchemaCommentProperty):
            comment = prop.this.name
        elif isinstance(prop, exp.Property):
            properties[prop.name] = prop.args["value"].name
        else:
            raise UnsupportedFeatureError(f"CREATE TABLE: {prop.sql(dialect=DIALECT)} is not supported by dvengine")
    return CreateTableStatement(
        table, bool(node.args.get("exists")), tuple(columns), partitioned, location, properties, comment, clustered
    )
