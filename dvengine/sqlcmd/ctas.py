"""``CREATE [OR REPLACE] TABLE ... USING delta AS query`` (and ``REPLACE TABLE ... AS query``).

Spark runs the query (``delta.`path``` in it read by dvengine, as in every pass-through query) and
dvengine's write path stores its rows, so the writer's checks, stats and commit rules apply:
- CREATE: one commit creates the table with the query's schema (every column nullable, as Delta's
  CTAS), ``PARTITIONED BY`` and ``TBLPROPERTIES`` (``delta.feature.*`` into the protocol); an
  existing table is an error, or with IF NOT EXISTS left untouched (the query does not run).
- CREATE OR REPLACE / REPLACE on an existing table: one commit replaces schema, partitioning and
  rows (an overwrite with ``overwriteSchema``: the table id, protocol and properties are kept).
  Delta replaces the properties with the statement's; dvengine refuses TBLPROPERTIES there rather
  than keep the old ones silently. REPLACE without a table is an error, as Delta's.
A name is resolved as the builders resolve it (registered location, else LOCATION, else the
warehouse default) and registered after the write.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from dvengine.api.table_support import warehouse_of
from dvengine.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError, UnsupportedFeatureError
from dvengine.log import table_exists
from dvengine.sqlcmd.statements import CreateTableAsSelectStatement
from dvengine.storage import catalog, normalize_table_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _target(spark: SparkSession, stmt: CreateTableAsSelectStatement) -> tuple[str, bool]:
    """(table root, whether the name must be registered after the write)."""
    if stmt.table.path is not None:
        if stmt.location is not None and os.path.abspath(stmt.location) != os.path.abspath(stmt.table.path):
            raise InvalidArgumentError(f"CREATE TABLE {stmt.table.describe()} ... LOCATION {stmt.location!r}: two locations")
        return normalize_table_path(stmt.table.path), False
    assert stmt.table.name is not None
    warehouse = warehouse_of(spark)
    registered = catalog.lookup_table(stmt.table.name, warehouse)
    if registered is not None:
        if stmt.location is not None and os.path.abspath(registered) != os.path.abspath(stmt.location):
            raise InvalidArgumentError(
                f"table {stmt.table.name} is registered at {registered}, not at the given location {stmt.location}"
            )
        return normalize_table_path(registered), False
    where = stmt.location if stmt.location is not None else catalog.default_location(stmt.table.name, warehouse)
    return normalize_table_path(where), True


def create_table_as_select(
    spark: SparkSession, stmt: CreateTableAsSelectStatement, run_query: Callable[[str], DataFrame]
) -> int | None:
    """The committed version; None when IF NOT EXISTS found the table (nothing runs)."""
    from dvengine.engine.spark.write_api import write

    root, register = _target(spark, stmt)
    label = stmt.table.describe()
    exists = table_exists(root)
    replacing = stmt.or_replace or stmt.replace_only
    if exists and stmt.if_not_exists:
        return None
    if exists and not replacing:
        raise TableAlreadyExistsError(f"CREATE TABLE ... AS SELECT: table {label} already exists at {root}")
    if not exists and stmt.replace_only:
        raise TableNotFoundError(f"REPLACE TABLE ... AS SELECT: table {label} does not exist (use CREATE OR REPLACE)")
    if exists and stmt.properties:
        raise UnsupportedFeatureError(
            f"CREATE OR REPLACE TABLE {label} ... TBLPROPERTIES ... AS SELECT on an existing table is not supported by "
            "dvengine (Delta replaces the properties; dvengine's overwrite keeps them); set them with ALTER TABLE "
            "... SET TBLPROPERTIES instead. Nothing was changed"
        )
    from dvengine.engine.spark.nullable import as_nullable

    frame = as_nullable(run_query(stmt.query))  # Delta's CTAS stores schema.asNullable
    version = write(
        frame, root, mode="overwrite" if exists else "error", partitionBy=list(stmt.partitioned_by) or None,
        configuration=stmt.properties or None, spark=spark, overwriteSchema=True if exists else None,
    )
    if register:
        assert stmt.table.name is not None
        catalog.register_table(stmt.table.name, root, warehouse_of(spark))
    return version
