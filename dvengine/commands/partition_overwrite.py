"""Dynamic partition overwrite: whether an overwrite replaces only the partitions it writes, and which files those are.

Delta 2.0+ (``DeltaOptions.isDynamicPartitionOverwriteMode``, ``WriteIntoDelta``): the write option
``partitionOverwriteMode`` wins over the session conf ``spark.sql.sources.partitionOverwriteMode``
(Spark's default ``STATIC``); ``static`` / ``dynamic`` in any case are accepted. Delta decides
lazily, and these functions keep its order, because the order decides which writes fail:

- an unpartitioned table (after the write's own metadata change) never evaluates the mode, so a
  bad value is ignored there and the overwrite replaces everything;
- with ``replaceWhere``, a ``dynamic`` *option* is refused (DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE),
  a ``dynamic`` *conf* yields to ``replaceWhere``;
- otherwise a bad value is refused (DELTA_ILLEGAL_OPTION), ``dynamic`` with ``overwriteSchema`` on
  an overwrite is refused (DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE), and
  ``spark.databricks.delta.dynamicPartitionOverwrite.enabled=false`` refuses ``dynamic``
  (DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED) and ignores any other value.

This is evaluated for appends too (an append with a bad value on a partitioned table fails in
Delta), though only an overwrite acts on it. The commit logs ``isDynamicPartitionOverwrite: true``
whenever the mode resolves to dynamic without an error (``Try(...).getOrElse(false)`` in
``WriteIntoDelta.run``), whatever the save mode or partitioning: :func:`logged_flag`.

Without a SparkSession the confs are read from their environment variables
(``SPARK_SQL_SOURCES_PARTITIONOVERWRITEMODE``, ``SPARK_DATABRICKS_DELTA_DYNAMICPARTITIONOVERWRITE_ENABLED``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from dvengine.commit.conf import ConfLookup, conf_bool
from dvengine.errors import InvalidArgumentError
from dvengine.log import Snapshot
from dvengine.protocol.actions import AddFile

OPTION = "partitionOverwriteMode"
CONF_PARTITION_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"
CONF_DYNAMIC_ENABLED = "spark.databricks.delta.dynamicPartitionOverwrite.enabled"
_MODES = ("STATIC", "DYNAMIC")  # DeltaOptions.PARTITION_OVERWRITE_MODE_VALUES, in its message's order


def check_option_type(value: object) -> str | None:
    """The option as given (None: not given); anything but a string is refused naming the option."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidArgumentError(f"option {OPTION} must be 'static' or 'dynamic' (a string), got {value!r}")


def is_dynamic_mode(option: str | None, conf: ConfLookup) -> bool:
    """Delta's ``isDynamicPartitionOverwriteMode``: the option, else the session conf; typed errors as Delta's."""
    if option is not None:
        mode, source = option, f"option '{OPTION}'"
    else:
        mode, source = conf(CONF_PARTITION_OVERWRITE_MODE) or "STATIC", f"configuration {CONF_PARTITION_OVERWRITE_MODE}"
    dynamic = mode.upper() == "DYNAMIC"  # Java's equalsIgnoreCase
    if not conf_bool(conf, CONF_DYNAMIC_ENABLED, True):
        if dynamic:
            raise InvalidArgumentError(
                "Dynamic partition overwrite mode is specified by session config or write options, but it is disabled "
                f"by `{CONF_DYNAMIC_ENABLED}=false` (DELTA_DYNAMIC_PARTITION_OVERWRITE_DISABLED); nothing was written"
            )
        return False
    if mode.upper() not in _MODES:
        raise InvalidArgumentError(
            f"Invalid value '{mode}' for {source}, must be 'STATIC' or 'DYNAMIC' (DELTA_ILLEGAL_OPTION); nothing was written"
        )
    return dynamic


def logged_flag(option: str | None, conf: ConfLookup) -> bool:
    """Whether the WRITE commit logs ``isDynamicPartitionOverwrite: true``: the mode resolves to dynamic
    (a value Delta would refuse counts as not dynamic, as its ``Try`` makes it)."""
    try:
        return is_dynamic_mode(option, conf)
    except InvalidArgumentError:
        return False


def use_dynamic_overwrite(
    partition_columns: Sequence[str], option: str | None, conf: ConfLookup, replace_where: str | None,
    can_overwrite_schema: bool,
) -> bool:
    """Delta's ``useDynamicPartitionOverwriteMode`` for a write whose metadata is partitioned by
    ``partition_columns``, with its refusals. ``can_overwrite_schema``: overwriteSchema on an
    overwrite without replaceWhere (Delta's ``canOverwriteSchema``)."""
    if not partition_columns:
        return False  # "We ignore dynamic partition overwrite mode for non-partitioned tables"
    if replace_where is not None:
        if option is not None and is_dynamic_mode(option, conf):
            raise InvalidArgumentError(
                "A 'replaceWhere' expression and 'partitionOverwriteMode'='dynamic' cannot both be set in the "
                "DataFrameWriter options (DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE); nothing was written"
            )
        return False  # a dynamic session conf yields to the write's own replaceWhere
    dynamic = is_dynamic_mode(option, conf)
    if dynamic and can_overwrite_schema:
        raise InvalidArgumentError(
            "'overwriteSchema' cannot be used in dynamic partition overwrite mode "
            "(DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE); nothing was written"
        )
    return dynamic


PartitionKey = tuple[object, ...]


def partition_key(snapshot: Snapshot, add: AddFile) -> PartitionKey:
    """A file's partition values, typed (Delta's ``dynamicPartitionOverwrite.parsePartitionValues``,
    on by default: ``1`` and ``01``, or two spellings of one timestamp, are one partition). NULL
    matches NULL (Delta's null-tolerant equality); NaN matches NaN, as Java's ``Double.equals``."""
    values = snapshot.partition_values_logical(add)  # in the table's partition column order
    return tuple(("NaN",) if isinstance(v, float) and math.isnan(v) else v for v in values.values())


def files_to_replace(snapshot: Snapshot, written: Iterable[AddFile]) -> tuple[list[AddFile], set[PartitionKey]]:
    """The table's files in the partitions ``written`` holds (whole files: their DVs go with them),
    and those partitions' keys (the read predicate a concurrent append is judged by)."""
    keys = {partition_key(snapshot, a) for a in written}
    if not keys:
        return [], keys
    return [f for f in snapshot.files if partition_key(snapshot, f) in keys], keys
