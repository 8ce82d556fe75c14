"""Validation of the Delta table properties dvengine honours, before a table is created.

A bad value must fail the write that sets it, naming the key and the value: stored in the
log, ``delta.checkpointInterval=abc`` would otherwise only surface later, in whatever commit
first reads it (every commit after the one that failed to checkpoint), long after the
mistake. Keys dvengine does not know are passed through untouched, as Delta does for
user-defined properties.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from dvengine.errors import InvalidArgumentError
from dvengine.log.intervals import parse_interval_ms


def _integer(key: str, value: str, minimum: int, meaning: str) -> None:
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidArgumentError(f"table property {key}={value!r} is not an integer; expected {meaning}") from None
    if number < minimum:
        raise InvalidArgumentError(f"table property {key}={value!r} is out of range; expected {meaning}")


def _boolean(key: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(f"table property {key}={value!r} must be 'true' or 'false'")


def _interval(key: str, value: str) -> None:
    try:
        parse_interval_ms(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"table property {key}={value!r} is not a valid duration: {exc}") from exc


def _checkpoint_policy(key: str, value: str) -> None:
    if value.strip().lower() not in ("classic", "v2"):
        raise InvalidArgumentError(f"table property {key}={value!r} must be 'classic' or 'v2'")


_VALIDATORS: dict[str, Callable[[str, str], None]] = {
    "delta.checkpointInterval": lambda k, v: _integer(k, v, 1, "a positive number of commits"),
    "delta.dataSkippingNumIndexedCols": lambda k, v: _integer(k, v, -1, "an integer >= -1 (-1 = all columns)"),
    "delta.enableDeletionVectors": _boolean,
    "delta.appendOnly": _boolean,
    "delta.enableChangeDataFeed": _boolean,
    "delta.enableTypeWidening": _boolean,
    "delta.checkpointPolicy": _checkpoint_policy,
    "delta.autoOptimize.autoCompact": _boolean,  # auto compaction (maintenance/auto_compact.py)
    "delta.autoOptimize": _boolean,  # its deprecated predecessor, still honoured
    "delta.enableRowLevelConcurrency": _boolean,
    "delta.enableRowTracking": _boolean,  # row tracking (protocol/row_tracking.py)
    "delta.rowTrackingSuspended": _boolean,
    "delta.logRetentionDuration": _interval,
    "delta.deletedFileRetentionDuration": _interval,
    "delta.setTransactionRetentionDuration": _interval,
}

KNOWN_PROPERTIES = frozenset(_VALIDATORS)


def validate_table_properties(configuration: Mapping[str, object]) -> None:
    """Raise InvalidArgumentError naming the first property whose key or value is unusable.

    Keys must be non-empty strings and values strings (the log stores ``Map[String, String]``);
    the keys in :data:`KNOWN_PROPERTIES` must also parse. Keys match exactly, as in Delta.
    """
    if not isinstance(configuration, Mapping):
        raise InvalidArgumentError(
            f"configuration must be a mapping of table property names to strings, got {type(configuration).__name__}"
        )
    for key, value in configuration.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidArgumentError(f"table property names must be non-empty strings, got {key!r}")
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"table property {key}={value!r} must be given as a string (e.g. {str(value).lower()!r}), "
                f"not {type(value).__name__}"
            )
        validator = _VALIDATORS.get(key)
        if validator is not None:
            validator(key, value)


__all__ = ["KNOWN_PROPERTIES", "validate_table_properties"]
