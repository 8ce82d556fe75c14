"""``write()``: create, append to, or overwrite a Delta table from a DataFrame or an Arrow table.

The order of work is what keeps failures clean: every check that can reject the write (mode,
schema, partitioning, table features, NOT NULL) runs before any file is written; data files are
then written and only a successful commit makes them part of the table. If the commit fails
(a conflict, a concurrent create) the new files are deleted again and the error propagates.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from dvengine.commit.transaction import Transaction
from dvengine.engine.spark.session import get_or_create_session
from dvengine.engine.spark.writer import delete_written_files, write_parquet_files
from dvengine.errors import (
    InvalidArgumentError,
    SchemaError,
    SchemaMismatchError,
    SchemaViolationError,
    TableAlreadyExistsError,
)
from dvengine.log import Snapshot, load_snapshot, table_exists
from dvengine.protocol.actions import AddFile, Metadata
from dvengine.protocol.features import check_writable
from dvengine.protocol.schema import StructType, from_arrow_schema
from dvengine.protocol.stats import FileStats
from dvengine.storage.logstore import normalize_table_path
from dvengine.writing.properties import validate_table_properties
from dvengine.writing.schema_checks import (
    DEFAULT_NEW_TABLE_CONFIGURATION,
    check_distinct_column_names,
    check_new_table_configuration,
    check_no_constraints,
    match_columns,
    new_table_protocol,
    not_null_paths,
    resolve_partition_columns,
)

MODES = ("error", "errorifexists", "append", "overwrite")
_DELTA_MODE_NAMES = {"error": "ErrorIfExists", "errorifexists": "ErrorIfExists", "append": "Append", "overwrite": "Overwrite"}


def dataframe_schema(df: DataFrame) -> StructType:
    """The Delta schema of a DataFrame, via Arrow (the one conversion path the project trusts)."""
    return from_arrow_schema(to_arrow_schema(df.schema, timezone="UTC"))


def _field_column(path: tuple[str, ...]) -> Column:
    return F.col(".".join(f"`{p}`" for p in path))


def check_not_null(df: DataFrame, schema: StructType) -> None:
    """Fail before writing if a NOT NULL field would receive a null (one Spark scan, only if needed)."""
    paths = not_null_paths(schema)
    if not paths:
        return
    conditions = []
    for path in paths:
        cond = _field_column(path).isNull()
        for depth in range(1, len(path)):  # a null parent struct makes its fields null legitimately
            cond = cond & _field_column(path[:depth]).isNotNull()
        conditions.append(F.when(cond, 1).otherwise(0).alias(".".join(path)))
    counts = df.select(*conditions).agg(*[F.sum(F.col(f"`{'.'.join(p)}`")).alias(str(i)) for i, p in enumerate(paths)])
    row = counts.collect()[0]
    bad = [".".join(p) for i, p in enumerate(paths) if (row[str(i)] or 0) > 0]
    if bad:
        raise SchemaViolationError(f"NOT NULL column(s) {bad} would receive null values; nothing was written")


def _operation_metrics(adds: Sequence[AddFile]) -> dict[str, Any]:
    rows = 0
    for add in adds:
        stats = FileStats.parse(add.stats)
        rows += 0 if stats is None or stats.num_records is None else stats.num_records
    return {"numFiles": len(adds), "numOutputRows": rows, "numOutputBytes": sum(a.size for a in adds)}


def _num_indexed_cols(configuration: Mapping[str, str]) -> int:
    raw = configuration.get("delta.dataSkippingNumIndexedCols", "32")
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgumentError(f"delta.dataSkippingNumIndexedCols must be an integer, got {raw!r}") from None


def _prepare_existing(df: DataFrame, snapshot: Snapshot, mode: str, partition_by: Sequence[str] | None) -> DataFrame:
    check_writable(snapshot.protocol, snapshot.metadata)
    schema = snapshot.schema
    check_no_constraints(snapshot.metadata, schema)
    if mode == "overwrite" and snapshot.configuration.get("delta.appendOnly", "false").lower() == "true":
        raise InvalidArgumentError(f"table {snapshot.table_root} is append-only (delta.appendOnly=true); overwrite is refused")
    if partition_by is not None:
        wanted = [p.lower() for p in partition_by]
        if wanted != [p.lower() for p in snapshot.partition_columns]:
            raise SchemaMismatchError(
                f"partitionBy {list(partition_by)} differs from the table's partitioning {list(snapshot.partition_columns)}"
            )
    pairs = match_columns(schema, dataframe_schema(df))
    aligned = df.select(*[F.col(f"`{data}`").alias(table) for data, table in pairs])
    check_not_null(aligned, schema)
    return aligned


ACCEPTED_DATA = "a Spark DataFrame, a pyarrow Table or a pandas DataFrame"


def to_writable(data: object) -> DataFrame | pa.Table:
    """``data`` as a Spark DataFrame or pyarrow Table; TypeError naming the accepted types otherwise.

    pandas frames go through Arrow (no index), the same conversion Spark would do. Checked before
    anything else so that a list or dict fails with a clear message instead of an AttributeError
    deep inside Spark.
    """
    if isinstance(data, (DataFrame, pa.Table)):
        return data
    pandas = sys.modules.get("pandas")  # only a loaded pandas can have made a pandas DataFrame
    if pandas is not None and isinstance(data, pandas.DataFrame):
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise SchemaError(f"cannot convert the pandas DataFrame to Arrow: {exc}") from exc
    raise TypeError(f"write() needs {ACCEPTED_DATA} as data, got {type(data).__module__}.{type(data).__qualname__}")


def write(
    data: DataFrame | pa.Table | Any,
    path: str,
    mode: str = "error",
    partitionBy: Sequence[str] | None = None,  # PySpark's spelling, on purpose
    configuration: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
) -> int:
    """Write ``data`` to the Delta table at ``path``; return the committed version.

    Modes: ``error`` (fail if a table exists), ``append`` (schema must match), ``overwrite``
    (replace all rows in one commit, keeping the table's identity). A missing table is created.
    ``configuration`` applies to new tables only and is merged over
    ``{"delta.enableDeletionVectors": "true"}``; its values are validated on every write.
    ``data`` may also be a pandas DataFrame; anything else raises TypeError.
    """
    if not isinstance(mode, str) or mode.lower() not in MODES:
        raise InvalidArgumentError(f"mode must be one of 'error', 'append', 'overwrite', got {mode!r}")
    mode = "error" if mode.lower() == "errorifexists" else mode.lower()
    if isinstance(partitionBy, str):
        partitionBy = [partitionBy]
    data = to_writable(data)
    if configuration is not None:
        validate_table_properties(configuration)
    root = normalize_table_path(path)
    if isinstance(data, pa.Table):
        check_distinct_column_names(from_arrow_schema(data.schema))
    session = spark or get_or_create_session()
    df = session.createDataFrame(data) if isinstance(data, pa.Table) else data
    if not isinstance(data, pa.Table):
        check_distinct_column_names(dataframe_schema(df))

    snapshot: Snapshot | None = None
    if table_exists(root):
        if mode == "error":
            raise TableAlreadyExistsError(f"a Delta table already exists at {root}; use mode='append' or 'overwrite'")
        snapshot = load_snapshot(root)

    params: dict[str, Any] = {"mode": _DELTA_MODE_NAMES[mode]}
    if snapshot is None:
        config = {**DEFAULT_NEW_TABLE_CONFIGURATION, **dict(configuration or {})}
        check_new_table_configuration(config)
        schema = dataframe_schema(df)
        partition_columns = resolve_partition_columns(schema, partitionBy or ())
        metadata = Metadata(
            id=str(uuid.uuid4()),
            schema_string=schema.to_json_string(),
            partition_columns=partition_columns,
            configuration=config,
            created_time=int(time.time() * 1000),
        )
        protocol = new_table_protocol(schema, config)
        check_writable(protocol, metadata)
        params["partitionBy"] = list(partition_columns)
        txn = Transaction(root, None, "WRITE", params)
        txn.update_protocol(protocol)
        txn.update_metadata(metadata)
    else:
        df = _prepare_existing(df, snapshot, mode, partitionBy)
        schema = snapshot.schema
        partition_columns = snapshot.partition_columns
        config = dict(snapshot.configuration)
        params["partitionBy"] = list(partition_columns)
        txn = Transaction(root, snapshot, "WRITE", params)
        if mode == "overwrite":
            txn.record_read(snapshot.files, None)
            now = int(time.time() * 1000)
            txn.add_actions(f.to_remove(now) for f in snapshot.files)

    adds = write_parquet_files(df, root, schema, partition_columns, num_indexed_cols=_num_indexed_cols(config))
    txn.add_actions(adds)
    try:
        return txn.commit(_operation_metrics(adds))
    except BaseException:
        delete_written_files(root, adds)
        raise


__all__ = ["ACCEPTED_DATA", "MODES", "dataframe_schema", "to_writable", "write"]
