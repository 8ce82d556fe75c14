"""Configuration lookups: what a conf key is set to, from a SparkSession's conf or, without one,
from the environment.

A lookup is a plain function (key -> value, None when unset), so no layer that reads a conf
imports pyspark: the layers above build one from a session
(:func:`dvengine.commands.options.session_conf`, which also reads a ``dvengine.*`` key under its
``spark.dvengine.*`` spelling) and hand it down. Without a session a key reads
its environment variable (:func:`env_key`). These live in the commit layer because it is the
lowest one that reads a conf (the transaction's check of NOT NULL nested in arrays and maps,
``spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled``);
:mod:`dvengine.commands.options` re-exports them for everything above.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from dvengine.errors import InvalidArgumentError

ConfLookup = Callable[[str], "str | None"]


def env_key(key: str) -> str:
    """The environment variable standing for a conf key without a SparkSession:
    ``dvengine.dv.inlineMaxBytes`` -> ``DVENGINE_DV_INLINEMAXBYTES``."""
    return key.replace(".", "_").upper()


def no_conf(key: str) -> str | None:
    """The lookup used without a SparkSession: the key's environment variable, else the default."""
    return os.environ.get(env_key(key))


def conf_bool(conf: ConfLookup, key: str, default: bool) -> bool:
    """A boolean conf value ("true"/"false", any case); anything else raises InvalidArgumentError naming the key."""
    raw = conf(key)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InvalidArgumentError(f"configuration {key} must be 'true' or 'false', got {raw!r}")
    return value == "true"
