"""Helpers behind DeltaTable's delta-spark entry points: names, options and retention settings.

Kept out of table.py so that the class stays a thin dispatcher (and so the files colleagues
edit in parallel change little): resolving ``forName`` through the catalog, checking
``forPath``'s ``hadoopConf`` as delta-spark does, and reading the retention-check switch from
Spark conf or, without a session, from the environment (``dvengine.commands.options.env_key``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dvengine.commands.options import ConfLookup, conf_bool, session_conf
from dvengine.errors import InvalidArgumentError, TableNotFoundError
from dvengine.log import table_exists
from dvengine.maintenance.vacuum import VACUUM_FULL, VACUUM_LITE
from dvengine.maintenance.vacuum_rules import check_vacuum_type
from dvengine.storage import catalog, is_object_uri, normalize_table_path
from dvengine.storage.settings import normalize_options, options_from_hadoop

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
# Delta's DeltaSQLConf.LITE_VACUUM_ENABLED: VACUUM without LITE/FULL runs LITE when true (default false).
LITE_VACUUM_CONF = "spark.databricks.delta.vacuum.lite.enabled"
_PATH_IDENTIFIER = re.compile(r"^\s*delta\s*\.\s*`(.+)`\s*$", re.IGNORECASE | re.DOTALL)


def check_hadoop_conf(conf: object) -> None:
    """delta-spark accepts only ``fs.``/``dfs.`` options in ``forPath(..., hadoopConf)``."""
    if conf is None:
        return
    if not isinstance(conf, Mapping):
        raise TypeError(f"hadoopConf must be a dict of str to str, got {type(conf).__name__}")
    for key, value in conf.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"hadoopConf must map str to str, got {key!r}: {value!r}")
        if not key.startswith(("fs.", "dfs.")):
            raise InvalidArgumentError(
                f"hadoopConf option {key!r} is not allowed: only options starting with 'fs.' or 'dfs.' are"
            )


def object_store_options(
    spark: SparkSession | None, path: object, hadoop_conf: Mapping[str, str] | None, options: Mapping[str, str] | None
) -> dict[str, str] | None:
    """Settings for an object-store table: the session's ``fs.s3a.*``, then ``hadoopConf``, then
    ``storage_options`` (later ones win). None for local paths (nothing to configure)."""
    if not isinstance(path, str) or not is_object_uri(path):
        return None
    merged: dict[str, str] = {}
    if spark is not None:
        from dvengine.engine.spark.session import hadoop_settings

        merged.update(options_from_hadoop(hadoop_settings(spark, "fs.s3a.")))
    merged.update(options_from_hadoop(dict(hadoop_conf or {})))
    merged.update(normalize_options(options))
    return merged


def active_session() -> SparkSession | None:
    """The active SparkSession when pyspark is already in use (never imports it, never starts one)."""
    if "pyspark.sql" not in sys.modules:
        return None
    from dvengine.engine.spark.session import active_session as spark_active_session

    return spark_active_session()


def warehouse_of(spark: SparkSession | None) -> str | None:
    """The warehouse dir names resolve in: ``spark``'s, else the active session's (as delta-spark's
    builders take the active session when given none), ``dvengine.catalog.warehouseDir`` first;
    None without any session (then :func:`dvengine.storage.catalog.warehouse_dir` reads the
    environment). The one resolver of ``forName``, the builders and ``dvengine.sql``'s names, so a
    name one of them registers is found by the others, with or without a session."""
    session = spark if spark is not None else active_session()
    if session is None:
        return None
    value = session_conf(session)(catalog.WAREHOUSE_OVERRIDE_CONF) or session.conf.get(catalog.WAREHOUSE_CONF, None)
    return None if value is None else str(value)


def resolve_table_name(spark: SparkSession | None, name: str) -> tuple[str, str | None]:
    """(table root, catalog name or None) for ``forName``; TableNotFoundError naming the name."""
    if not isinstance(name, str):
        raise TypeError(f"tableOrViewName must be a str, got {type(name).__name__}")
    match = _PATH_IDENTIFIER.match(name)
    if match is not None:
        root = normalize_table_path(match.group(1).replace("``", "`"))
        if not table_exists(root):
            raise TableNotFoundError(f"{name} is not a Delta table: {root} has no _delta_log with commit files")
        return root, None
    location = catalog.lookup_table(name, warehouse_of(spark))
    if location is None:
        db, table = catalog.split_name(name)
        raise TableNotFoundError(
            f"The table or view `{db}`.`{table}` cannot be found in dvengine's catalog "
            f"({catalog.warehouse_dir(warehouse_of(spark))}/{catalog.CATALOG_FILE})"
        )
    root = normalize_table_path(location)
    if not table_exists(root):
        raise TableNotFoundError(f"{name} is registered at {root}, but no Delta table is there")
    return root, name


def retention_check_enabled(conf: ConfLookup) -> bool:
    """``spark.databricks.delta.retentionDurationCheck.enabled`` (default true); bad values are refused."""
    return conf_bool(conf, RETENTION_CHECK_CONF, True)


def vacuum_type(conf: ConfLookup, requested: str | None) -> str:
    """The VACUUM type asked for (``"LITE"``/``"FULL"``, any case), else as Delta's ``VacuumCommand.gc``
    picks it: LITE when ``spark.databricks.delta.vacuum.lite.enabled`` is true, else FULL."""
    if requested is not None:
        return check_vacuum_type(requested)
    return VACUUM_LITE if conf_bool(conf, LITE_VACUUM_CONF, False) else VACUUM_FULL
