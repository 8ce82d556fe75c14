"""``CREATE [OR REPLACE] TABLE ... USING delta AS query`` (and ``REPLACE TABLE ... AS query``).

Spark runs the query (``delta.`path``` in it read by dvengine, as in every pass-through query);
the table definition is the one CREATE / REPLACE TABLE without AS commits
(:func:`dvengine.commands.create_table.prepare_create`, the query's schema with every column
nullable, as Delta's CTAS) and the query's rows are written into that same transaction, so one
commit holds protocol, metaData, domains, the removes of a replaced table and the new adds, under
Delta's operation (``CREATE TABLE AS SELECT``, ``REPLACE TABLE AS SELECT``, ``CREATE OR REPLACE
TABLE AS SELECT``) and parameters (``isManaged``, ``description``, ``partitionBy``,
``clusterBy``, ``properties``):
- ``PARTITIONED BY``, ``CLUSTER BY`` (the ``delta.clustering`` domain, the ``clustering`` and
  ``domainMetadata`` features, the columns checked as at CREATE TABLE), ``COMMENT`` (the
  ``description``) and ``TBLPROPERTIES`` (``delta.feature.*`` into the protocol);
- CREATE on an existing table is an error, or with IF NOT EXISTS left untouched (the query does
  not run); REPLACE without a table is an error, as Delta's;
- CREATE OR REPLACE / REPLACE on an existing table keeps the table id and never downgrades the
  protocol; schema, partitioning, clustering, description and properties become the statement's
  (Delta's ``replaceMetadataIfNecessary``: the old properties are not kept). Replacing the rows
  of an append-only table is refused, as Delta refuses it.
A name is resolved as the builders resolve it (registered location, else LOCATION, else the
warehouse default) and registered after the write.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from dvengine.api.table_support import warehouse_of
from dvengine.commands.create_table import CREATE, CREATE_IF_NOT_EXISTS, CREATE_OR_REPLACE, REPLACE, TableDefinition
from dvengine.commands.options import session_conf
from dvengine.commands.written import WrittenFiles, commit_or_clean_up
from dvengine.errors import InvalidArgumentError, TableAlreadyExistsError, TableNotFoundError
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


def _mode(stmt: CreateTableAsSelectStatement) -> str:
    if stmt.replace_only:
        return REPLACE
    if stmt.or_replace:
        return CREATE_OR_REPLACE
    return CREATE_IF_NOT_EXISTS if stmt.if_not_exists else CREATE


def create_table_as_select(
    spark: SparkSession, stmt: CreateTableAsSelectStatement, run_query: Callable[[str], DataFrame]
) -> int | None:
    """The committed version; None when IF NOT EXISTS found the table (nothing runs)."""
    from dvengine.commands.create_table import prepare_create
    from dvengine.engine.spark.nullable import as_nullable
    from dvengine.engine.spark.write_api import dataframe_schema
    from dvengine.engine.spark.writer import write_parquet_files
    from dvengine.writing.stats import num_indexed_cols

    root, register = _target(spark, stmt)
    label = stmt.table.describe()
    exists = table_exists(root)
    replacing = stmt.or_replace or stmt.replace_only
    # the statement's own refusals come before the query runs
    if exists and stmt.if_not_exists:
        return None
    if exists and not replacing:
        raise TableAlreadyExistsError(f"CREATE TABLE ... AS SELECT: table {label} already exists at {root}")
    if not exists and stmt.replace_only:
        raise TableNotFoundError(f"REPLACE TABLE ... AS SELECT: table {label} does not exist (use CREATE OR REPLACE)")
    frame = as_nullable(run_query(stmt.query))  # Delta's CTAS stores schema.asNullable
    definition = TableDefinition(
        location=root, label=label, schema=dataframe_schema(frame), partition_columns=stmt.partitioned_by,
        properties=stmt.properties, description=stmt.comment, managed=register and stmt.location is None,
        clustering_columns=stmt.cluster_by,
    )
    prepared = prepare_create(definition, _mode(stmt), as_select=True, conf=session_conf(spark))  # every check; nothing written yet
    if prepared is None:
        return None  # IF NOT EXISTS: created meanwhile by someone else
    txn = prepared.transaction
    adds = write_parquet_files(
        frame, root, prepared.schema, prepared.partition_columns, num_indexed_cols(prepared.configuration)
    )
    written = WrittenFiles(root)
    written.add_data_files(adds)
    txn.add_actions(adds)
    metrics = {
        "numFiles": len(adds),
        "numOutputRows": sum(a.num_records or 0 for a in adds),
        "numOutputBytes": sum(a.size for a in adds),
        **prepared.metrics,
    }
    version = commit_or_clean_up(txn, metrics, written)
    if register:
        assert stmt.table.name is not None
        catalog.register_table(stmt.table.name, root, warehouse_of(spark))
    return version
