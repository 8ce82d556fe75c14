"""DML options from the call, else configuration keys (Spark conf when a session exists), else defaults.

The lookups themselves (:data:`ConfLookup`, :func:`no_conf`, :func:`env_key`, :func:`conf_bool`)
live in :mod:`dvengine.commit.conf`, where the transaction reads a conf too; they are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dvengine.commands.app_txn import app_transaction_from_conf
from dvengine.commit.conf import ConfLookup as ConfLookup
from dvengine.commit.conf import conf_bool as conf_bool
from dvengine.commit.conf import env_key as env_key
from dvengine.commit.conf import no_conf as no_conf
from dvengine.errors import InvalidArgumentError
from dvengine.planning.decisions import (
    DEFAULT_DML_COMMIT_ATTEMPTS,
    DEFAULT_INLINE_MAX_BYTES,
    DEFAULT_MAX_STALENESS_S,
    DEFAULT_MODE,
    DEFAULT_REBASE_INLINE_MAX_BYTES,
    DEFAULT_REWRITE_THRESHOLD,
    DmlOptions,
)

CONF_MODE = "dvengine.dml.mode"
CONF_REWRITE_THRESHOLD = "dvengine.dml.rewriteThreshold"
CONF_INLINE_MAX_BYTES = "dvengine.dv.inlineMaxBytes"
CONF_REBASE_INLINE_MAX_BYTES = "dvengine.dv.rebaseInlineMaxBytes"
CONF_RANDOM_PREFIX_LEN = "dvengine.dv.randomPrefixLength"
CONF_ENGINE = "dvengine.execution.engine"
CONF_LOCAL_MAX_BYTES = "dvengine.execution.localMaxBytes"
# Row-level conflict resolution for DML on tables with DVs (dvengine/commands/concurrency.py).
CONF_ROW_LEVEL = "spark.databricks.delta.rowLevelConcurrency.enabled"
# Delta's name for how many lost commit races a command retries (dvengine's DML default: 1000).
CONF_MAX_COMMIT_ATTEMPTS = "spark.databricks.delta.maxCommitAttempts"
# Blind commits: how old (s) a cached snapshot may be for a DML to plan on it unlisted (0: never).
CONF_MAX_STALENESS = "dvengine.snapshot.maxStalenessSeconds"
# How Spark reads apply DVs: auto | jvm | python (dvengine/engine/spark/dv_format.py).
CONF_DV_READER = "dvengine.read.dvReader"


# Spark keeps only keys that start with "spark." from spark-submit --conf and spark-defaults.conf
# ("Warning: Ignoring non-Spark config property"), so every dvengine.* key is also read under
# this prefix: spark.dvengine.dml.mode reaches a session any way a Spark setting can.
SPARK_PREFIX = "spark."


def spark_alias(key: str) -> str | None:
    """The ``spark.``-prefixed spelling also accepted for a ``dvengine.*`` key (None for others)."""
    return SPARK_PREFIX + key if key.startswith("dvengine.") else None


def session_conf(session: Any) -> ConfLookup:
    """The lookup of a SparkSession's runtime conf (classic or Connect; None when a key is unset),
    or :func:`no_conf` when there is no session. A ``dvengine.*`` key set as written wins over its
    ``spark.dvengine.*`` spelling. Typed loosely: this layer does not import pyspark."""
    if session is None:
        return no_conf

    def lookup(key: str) -> str | None:
        value: str | None = session.conf.get(key, None)
        alias = spark_alias(key)
        if value is None and alias is not None:
            value = session.conf.get(alias, None)
        return value

    return lookup


def conf_number(conf: ConfLookup, key: str, default: float, kind: Callable[[str], float]) -> float:
    """A numeric conf value (``default`` when unset); a non-number raises InvalidArgumentError naming the key."""
    raw = conf(key)
    if raw is None or raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise InvalidArgumentError(f"configuration {key} must be a number, got {raw!r}") from None


def resolve_options(conf: ConfLookup, mode: str | None) -> DmlOptions:
    """DmlOptions for one command; bad values raise InvalidArgumentError naming the key."""
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"mode must be a string ('dv', 'rewrite' or 'auto'), got {type(mode).__name__}")
    app = app_transaction_from_conf(conf)
    return DmlOptions(
        mode=(mode or conf(CONF_MODE) or DEFAULT_MODE).lower(),
        rewrite_threshold=float(conf_number(conf, CONF_REWRITE_THRESHOLD, DEFAULT_REWRITE_THRESHOLD, float)),
        inline_max_bytes=int(conf_number(conf, CONF_INLINE_MAX_BYTES, DEFAULT_INLINE_MAX_BYTES, int)),
        rebase_inline_max_bytes=int(
            conf_number(conf, CONF_REBASE_INLINE_MAX_BYTES, DEFAULT_REBASE_INLINE_MAX_BYTES, int)
        ),
        dv_random_prefix_len=int(conf_number(conf, CONF_RANDOM_PREFIX_LEN, 0, int)),
        row_level_concurrency=conf_bool(conf, CONF_ROW_LEVEL, True),
        max_commit_attempts=int(conf_number(conf, CONF_MAX_COMMIT_ATTEMPTS, DEFAULT_DML_COMMIT_ATTEMPTS, int)),
        app_transaction=None if app is None else (app.app_id, app.version),
        max_staleness_s=float(conf_number(conf, CONF_MAX_STALENESS, DEFAULT_MAX_STALENESS_S, float)),
    )

