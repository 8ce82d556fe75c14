"""Options of ``format("delta")`` reads and writes, checked before anything is read or written.

Spark hands a data source its options as a case-insensitive string map; Delta gives a few of
them meaning (``versionAsOf``, ``timestampAsOf``, ``mergeSchema`` ...). Those are parsed here, in
one engine-neutral place, so that a bad value fails with a typed error naming option and value
before a job starts or a file is written. Options Delta would honour but dvengine does not
implement yet raise ``UnsupportedFeatureError`` instead of being ignored: ignoring
``replaceWhere`` would silently overwrite the whole table. Options unknown to Delta are ignored,
as Spark and Delta ignore them. ``delta.*`` options become the table properties of a table the write
creates, as in Delta 2.1+ (:func:`dvengine.protocol.config_keys.delta_properties`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dvengine.commands.write_options import parse_data_change
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.protocol.config_keys import delta_properties

# Delta options with a meaning dvengine does not implement (lower case: Spark's map is case-insensitive).
# Change data feed reads (readChangeFeed, startingVersion, ...) go to ``dvengine.changes``.
_UNSUPPORTED_WRITE = (
    "replaceon",  # Delta 4's INSERT REPLACE ON / USING: ignoring them would overwrite the whole table
    "replaceusing",
)
# Spark's SaveMode names (DataFrameWriter.mode) -> dvengine's write modes; "ignore" is handled here.
SAVE_MODES = {"append": "append", "overwrite": "overwrite", "errorifexists": "error", "error": "error",
              "default": "error", "ignore": "ignore"}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _is_true(key: str, value: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(f"option {key} must be 'true' or 'false', got {value!r}")
    return text == "true"


@dataclass(frozen=True)
class ReadRequest:
    """Where and as of when to read."""

    path: str
    version: int | None
    timestamp: str | None
    options: dict[str, str]  # all of them, lower-cased: the change data feed reader takes its own


def parse_read_options(options: Mapping[str, str], path: str | None) -> ReadRequest:
    """The path and the time travel of a read; ``versionAsOf`` and ``timestampAsOf`` exclude each other."""
    opts = _lower(options)
    where = path if path is not None else opts.get("path")
    if not where:
        raise InvalidArgumentError("format('delta').load() needs a table path: load(path) or option('path', ...)")
    raw_version = opts.get("versionasof")
    raw_timestamp = opts.get("timestampasof")
    if raw_version is not None and raw_timestamp is not None:
        raise InvalidArgumentError(
            f"cannot time travel by both versionAsOf={raw_version!r} and timestampAsOf={raw_timestamp!r}; give one"
        )
    version: int | None = None
    if raw_version is not None:
        try:
            version = int(raw_version.strip())
        except ValueError:
            raise InvalidArgumentError(f"versionAsOf must be an integer version, got {raw_version!r}") from None
        if version < 0:
            raise InvalidArgumentError(f"versionAsOf must be >= 0, got {raw_version!r}")
    return ReadRequest(where, version, raw_timestamp, opts)


@dataclass(frozen=True)
class WriteRequest:
    """A checked ``df.write.format("delta")...save(path)``."""

    path: str
    mode: str  # "error", "append", "overwrite" or "ignore"
    partition_by: tuple[str, ...] | None
    merge_schema: bool | None  # None: not given (the autoMerge conf decides)
    overwrite_schema: bool | None
    replace_where: str | None
    txn_app_id: str | None = None  # txnAppId / txnVersion: an idempotent write
    txn_version: str | None = None
    # ``delta.*`` options: the table properties of a table this write creates (ignored when it exists)
    configuration: dict[str, str] | None = None
    # partitionOverwriteMode as given (checked where Delta checks it: dvengine.commands.partition_overwrite)
    partition_overwrite_mode: str | None = None
    user_metadata: str | None = None  # userMetadata: commitInfo.userMetadata (over the session conf)
    data_change: bool = True  # dataChange=false: Delta's rearrangeOnly write


def parse_write_options(
    options: Mapping[str, str], path: str | None, save_mode: str, partition_by: Sequence[str] | None
) -> WriteRequest:
    """Mode, partitioning and the options Delta gives meaning to; typed errors for the rest."""
    opts = _lower(options)
    for key in _UNSUPPORTED_WRITE:
        if key in opts:
            raise UnsupportedFeatureError(f"write option {key!r}={opts[key]!r} is not supported by format('delta') here")
    mode = SAVE_MODES.get(save_mode.strip().lower())
    if mode is None:
        raise InvalidArgumentError(f"save mode must be one of {sorted(SAVE_MODES)}, got {save_mode!r}")
    where = path if path is not None else opts.get("path")
    if not where:
        raise InvalidArgumentError("format('delta').save() needs a table path: save(path) or option('path', ...)")
    merge = _is_true("mergeSchema", opts["mergeschema"]) if "mergeschema" in opts else None
    overwrite = _is_true("overwriteSchema", opts["overwriteschema"]) if "overwriteschema" in opts else None
    parts = tuple(partition_by) if partition_by is not None else None
    return WriteRequest(
        where, mode, parts, merge, overwrite, opts.get("replacewhere"), opts.get("txnappid"), opts.get("txnversion"),
        delta_properties(options) or None,
        partition_overwrite_mode=opts.get("partitionoverwritemode"),
        user_metadata=opts.get("usermetadata"), data_change=parse_data_change(opts.get("datachange")),
    )
