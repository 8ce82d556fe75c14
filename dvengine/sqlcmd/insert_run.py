"""INSERT INTO / INSERT OVERWRITE on a Delta table: rows from VALUES or a query, written by dvengine's writer.

What Delta's INSERT does before it writes, done here; the write itself is ``dvengine.write``'s
(the same in-process / Spark dispatch), so every check of a write applies: schema and NOT NULL
checks, CHECK constraints, generated values computed or checked, identity values assigned with
their high-water mark, defaults of omitted columns, stats, conflict rules, auto compaction.

- Columns: a column list names the columns given (any order, matched without case as Spark
  does); without one the values fill every column in order. A row of the wrong width raises
  SchemaMismatchError naming the table and both counts (Spark's INSERT_COLUMN_ARITY_MISMATCH,
  Delta's DELTA_INSERT_COLUMN_ARITY_MISMATCH: "not enough data columns").
- Omitted columns are left out of the data, so the writer fills them as Delta does: the DEFAULT
  value, the generated or identity value, else NULL (NOT NULL columns: its typed error).
- The DEFAULT keyword in VALUES: the column's default, NULL for a column without one; for a
  generated or identity column the column is treated as omitted when every row says DEFAULT
  (rows mixing DEFAULT and values there are refused, rather than written in two commits).
- VALUES are evaluated and written in-process (Arrow) when every cell and every generated value
  can be, else by Spark when a session is given (also when the table has a TIMESTAMP column and
  the session's time zone is not UTC: Arrow reads zone-less literals as UTC); a query always by Spark. Values are cast to the column types: in-process by Arrow's
  safe cast (the writer's), on Spark by ``CAST`` (ANSI: overflow is an error).
- ``INSERT OVERWRITE`` replaces every row, or under ``spark.sql.sources.partitionOverwriteMode=dynamic``
  (a partitioned table) only the partitions the rows go to; ``REPLACE WHERE cond`` (Delta's)
  replaces the rows matching ``cond``, and every inserted row must match it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from dvengine.commands.options import no_conf, session_conf
from dvengine.commands.write_options import resolve_write_options
from dvengine.engine.local.auto_compaction import after_commit
from dvengine.engine.local.write_api import write_arrow
from dvengine.errors import (
    EvaluationError,
    InvalidArgumentError,
    InvalidPredicateError,
    NotLocallyEvaluableError,
    SchemaMismatchError,
    UnresolvedColumnError,
    UnsupportedFeatureError,
)
from dvengine.expressions import parse_value_expression, to_pyarrow_value
from dvengine.expressions.arrow_plans import project_table
from dvengine.log import load_snapshot
from dvengine.protocol.schema import StructField, StructType, to_arrow_schema
from dvengine.sqlcmd.statements import InsertStatement
from dvengine.writing.defaults import CURRENT_DEFAULT
from dvengine.writing.generated import GENERATION_EXPRESSION
from dvengine.writing.identity import is_identity

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_NO_COLUMNS = StructType(())


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def target_fields(schema: StructType, stmt: InsertStatement, label: str) -> list[StructField]:
    """The table fields the data gives, in the data's order."""
    if stmt.columns is None:
        return list(schema.fields)
    by_lower = {f.name.lower(): f for f in schema.fields}
    fields: list[StructField] = []
    for name in stmt.columns:
        found = by_lower.get(name.lower())
        if found is None:
            raise UnresolvedColumnError(
                f"INSERT into {label}: column {name!r} does not exist; table columns: {[f.name for f in schema.fields]}"
            )
        if found in fields:
            raise InvalidArgumentError(f"INSERT into {label}: column {found.name!r} is listed twice")
        fields.append(found)
    return fields


def check_arity(width: int, fields: Sequence[StructField], stmt: InsertStatement, label: str, where: str) -> None:
    if width == len(fields):
        return
    reason = "not enough data columns" if width < len(fields) else "too many data columns"
    listed = "the column list" if stmt.columns is not None else "the table"
    raise SchemaMismatchError(
        f"INSERT into {label}: {reason}: {listed} has {len(fields)} column(s) {[f.name for f in fields]}, "
        f"{where} has {width} (Delta's DELTA_INSERT_COLUMN_ARITY_MISMATCH); nothing was written"
    )


def _computed(field: StructField) -> bool:
    return is_identity(field) or GENERATION_EXPRESSION in field.metadata


def resolve_default_keyword(
    fields: list[StructField], rows: Sequence[Sequence[str | None]], label: str
) -> tuple[list[StructField], list[list[str]]]:
    """The DEFAULT keyword replaced (see the module docstring): (fields kept, cell texts)."""
    kept: list[int] = []
    for j, f in enumerate(fields):
        defaulted = [row[j] is None for row in rows]
        if _computed(f) and any(defaulted):
            if not all(defaulted):
                raise UnsupportedFeatureError(
                    f"INSERT into {label}: column {f.name!r} is generated or an identity column; its VALUES must all be "
                    "DEFAULT or all be given (dvengine writes one INSERT in one commit)"
                )
            continue
        kept.append(j)

    def cell(value: str | None, f: StructField) -> str:
        return value if value is not None else str(f.metadata.get(CURRENT_DEFAULT, "NULL"))

    cells = [[cell(row[j], fields[j]) for j in kept] for row in rows]
    return [fields[j] for j in kept], cells


def _is_literal(node: exp.Expr) -> bool:
    while isinstance(node, (exp.Neg, exp.Paren)):
        node = node.this
    return isinstance(node, (exp.Literal, exp.Boolean, exp.Null))


def _cell_expression(text: str, f: StructField, label: str) -> pa.compute.Expression:
    try:
        bound = parse_value_expression(text, _NO_COLUMNS)
    except UnresolvedColumnError as exc:
        raise UnresolvedColumnError(f"INSERT into {label}: VALUES for column {f.name!r} reads a column ({text}): {exc}") from exc
    try:
        return to_pyarrow_value(bound, f.type)
    except InvalidPredicateError as exc:
        if _is_literal(bound.tree):  # a constant the column's type cannot hold: no engine would write it
            raise SchemaMismatchError(
                f"INSERT into {label}: VALUES {text} cannot be written to column {f.name!r} of type "
                f"{f.type.simple_string()} (Spark's INCOMPATIBLE_DATA_FOR_TABLE / CAST_OVERFLOW_IN_TABLE_INSERT); "
                "nothing was written"
            ) from exc
        raise NotLocallyEvaluableError(
            f"INSERT into {label}: VALUES for column {f.name!r} ({text}) cannot be evaluated without Spark ({exc})"
        ) from exc


def _project(expressions: list[pa.compute.Expression], names: list[str]) -> pa.Table:
    return project_table(pa.table({"__row": pa.array([0], pa.int8())}), expressions, names)  # one row: unthreaded


def local_values(fields: list[StructField], cells: list[list[str]], label: str) -> pa.Table:
    """VALUES evaluated in-process: one Arrow projection of every cell over a one-row table."""
    target = to_arrow_schema(StructType(tuple(fields)))
    expressions = [_cell_expression(text, f, label) for row in cells for text, f in zip(row, fields, strict=True)]
    names = [f"c{i}" for i in range(len(expressions))]
    try:
        projected = _project(expressions, names)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError):
        for i, expression in enumerate(expressions):  # find the cell, to name it
            row, j = divmod(i, len(fields))
            try:
                _project([expression], ["c"])
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ArithmeticError) as exc:
                raise EvaluationError(
                    f"INSERT into {label}: VALUES row {row + 1}, column {fields[j].name!r} ({cells[row][j]}) failed: {exc}"
                ) from exc
        raise
    columns = []
    for j, f in enumerate(target):
        chunks = []
        for row in range(len(cells)):
            value = projected.column(row * len(fields) + j)
            try:
                chunks.append(value.cast(f.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"INSERT into {label}: VALUES row {row + 1}, column {f.name!r} ({cells[row][j]}): {value.type} "
                    f"cannot be written as {f.type} ({exc}); nothing was written"
                ) from exc
        columns.append(pa.chunked_array([c for chunk in chunks for c in chunk.chunks], f.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([pa.field(f.name, f.type, True) for f in target]))


def spark_values(spark: SparkSession, fields: list[StructField], cells: list[list[str]]) -> DataFrame:
    """VALUES evaluated by Spark (some cell needs it), each cast to its column's type."""
    selects = [
        "SELECT " + ", ".join(f"CAST(({text}) AS {f.type.simple_string()}) AS {_quote(f.name)}"
                              for text, f in zip(row, fields, strict=True))
        for row in cells
    ]
    return spark.sql(" UNION ALL ".join(selects))


def spark_query(frame: DataFrame, fields: list[StructField], stmt: InsertStatement, label: str) -> DataFrame:
    """The query's columns matched to ``fields`` (by position, or BY NAME) and cast to their types."""
    if stmt.by_name:
        by_lower = {c.lower(): c for c in frame.columns}
        missing = [f.name for f in fields if f.name.lower() not in by_lower]
        extra = sorted(set(by_lower) - {f.name.lower() for f in fields})
        if extra:
            raise SchemaMismatchError(f"INSERT into {label} BY NAME: the query's column(s) {extra} are not in the table")
        fields = [f for f in fields if f.name not in missing]
        frame = frame.select(*[by_lower[f.name.lower()] for f in fields])
    check_arity(len(frame.columns), fields, stmt, label, "the query")
    renamed = frame.toDF(*[f.name for f in fields])
    return renamed.selectExpr(*[f"CAST({_quote(f.name)} AS {f.type.simple_string()}) AS {_quote(f.name)}" for f in fields])


def write_rows(data: pa.Table | DataFrame, root: str, stmt: InsertStatement, spark: SparkSession | None) -> int:
    """``dvengine.write``'s dispatch: Arrow data in-process, a DataFrame through Spark's writer.

    The session's confs (without one: their environment variables) apply to both, among them
    ``spark.sql.sources.partitionOverwriteMode``: as in Delta, ``INSERT OVERWRITE`` of a
    partitioned table under ``dynamic`` replaces only the partitions the rows go to."""
    mode = "overwrite" if stmt.overwrite or stmt.replace_where is not None else "append"
    if isinstance(data, pa.Table):
        options = resolve_write_options(None, None, stmt.replace_where, conf=session_conf(spark))  # the commit reads it
        version = write_arrow(data, root, mode, None, None, options)
        after_commit(no_conf, root, version)
        return version
    assert spark is not None
    from dvengine.engine.spark.write_api import write

    version = write(data, root, mode=mode, spark=spark, replaceWhere=stmt.replace_where)
    session = spark
    after_commit(session_conf(session), root, version)
    return version


def insert(
    spark: SparkSession | None, stmt: InsertStatement, root: str, label: str,
    run_query: Callable[[str], DataFrame] | None,
) -> int:
    """Run the INSERT into the table at ``root``; the committed version."""
    schema = load_snapshot(root).schema
    fields = target_fields(schema, stmt, label)
    if stmt.rows is None:
        if run_query is None or spark is None:
            raise InvalidArgumentError(f"INSERT into {label} ... SELECT needs a SparkSession (dvengine.sql(spark, ...))")
        assert stmt.query is not None
        return write_rows(spark_query(run_query(stmt.query), fields, stmt, label), root, stmt, spark)
    for number, row in enumerate(stmt.rows, 1):
        check_arity(len(row), fields, stmt, label, f"VALUES row {number}")
    fields, cells = resolve_default_keyword(fields, stmt.rows, label)
    if not fields:
        raise UnsupportedFeatureError(f"INSERT into {label}: every given column is DEFAULT; name at least one column")
    if spark is None or not _zone_dependent(spark, schema):
        try:  # in-process first: values, then the write (generated values computed by Arrow)
            return write_rows(local_values(fields, cells, label), root, stmt, spark)
        except NotLocallyEvaluableError:  # raised before anything is written
            if spark is None:
                raise
    return write_rows(spark_values(spark, fields, cells), root, stmt, spark)


def _zone_dependent(spark: SparkSession, schema: StructType) -> bool:
    """Whether Spark would read the VALUES differently: the Arrow evaluator takes zone-less
    TIMESTAMP literals as UTC (dvengine's sessions run in UTC); a session in another zone reads
    them in its own, so a table with a TIMESTAMP column then gets its VALUES from Spark."""
    zone = str(spark.conf.get("spark.sql.session.timeZone", "UTC") or "UTC")
    has_timestamp = any(f.type.simple_string() == "timestamp" for f in schema.fields)
    return has_timestamp and zone.upper() not in ("UTC", "ETC/UTC", "Z", "+00:00", "GMT")
