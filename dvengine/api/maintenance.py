"""Argument checks and dispatch for DeltaTable's maintenance methods (clone, protocol changes).

delta-spark checks argument types in Python before calling the JVM and raises ``ValueError``
("... needs to be a string but got ..."); the same checks live here so ``table.py`` stays thin,
and the embedded executor is handed to the commands that rewrite files.
"""

from __future__ import annotations

from typing import Any

from dvengine.commands.options import ConfLookup, session_conf
from dvengine.log import Snapshot


def check_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} needs to be a string but got '{type(value)}'.")
    return value


def check_int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name} needs to be an int but got '{type(value)}'.")
    return value


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} needs to be a boolean but got '{type(value)}'.")
    return value


def clone_table(source: Snapshot, target: Any, is_shallow: Any, replace: Any, properties: Any, spark: Any = None) -> str:
    """Clone ``source`` to ``target``; returns the clone's root. ``spark``: the table's session, whose
    conf the commit reads (None: dvengine's configuration)."""
    from dvengine.maintenance.clone import clone
    from dvengine.storage import normalize_table_path

    check_str(target, "target")
    check_bool(is_shallow, "isShallow")
    check_bool(replace, "replace")
    clone(source, target, is_shallow, replace, properties, session_conf(spark))
    return normalize_table_path(target)


def upgrade_table_protocol(table_root: str, reader_version: Any, writer_version: Any, conf: ConfLookup | None = None) -> None:
    from dvengine.maintenance.protocol_change import upgrade_protocol

    if not isinstance(reader_version, int) or isinstance(reader_version, bool):
        raise ValueError(f"The readerVersion needs to be an integer but got '{type(reader_version)}'.")
    if not isinstance(writer_version, int) or isinstance(writer_version, bool):
        raise ValueError(f"The writerVersion needs to be an integer but got '{type(writer_version)}'.")
    upgrade_protocol(table_root, reader_version, writer_version, conf)


def add_feature_support(table_root: str, feature_name: Any, conf: ConfLookup | None = None) -> None:
    from dvengine.maintenance.protocol_change import add_feature

    add_feature(table_root, check_str(feature_name, "featureName"), conf)


def drop_feature_support(table_root: str, feature_name: Any, truncate_history: Any, conf: ConfLookup | None = None) -> None:
    from dvengine.engine.local.optimize import rewrite_files
    from dvengine.maintenance.protocol_change import drop_feature

    name = check_str(feature_name, "featureName")
    if truncate_history is not None:
        check_bool(truncate_history, "truncateHistory")
    drop_feature(table_root, name, truncate_history, rewrite_files, conf)
