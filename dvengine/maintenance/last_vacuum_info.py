"""Where the last VACUUM stopped: Delta's ``_delta_log/_last_vacuum_info``.

VACUUM LITE reads only the commits made since the last VACUUM, so it must know where that one
stopped. Delta Spark keeps this outside the commits, in one JSON file next to them
(``VacuumCommand.scala``, ``object LastVacuumInfo``: ``_last_vacuum_info``, written with
``deltaLog.store.write(path, Iterator.single(JsonUtils.toJson(info)), overwrite = true)`` after
every VACUUM that is not a dry run, read with ``store.read(path).head``). Its one field,
``latestCommitVersionOutsideOfRetentionWindow``, is the newest commit at or before that run's
cutoff; Delta's FULL runs store ``LastVacuumInfo(None)``, which its mapper (``JsonUtils``,
``Include.NON_ABSENT``) writes as ``{}``. dvengine writes the same bytes (one JSON line, ``\\n``
ended, as every Delta LogStore writes a line), so Delta Spark and dvengine continue each other's
LITE runs.

The file is not part of the Delta protocol: readers (delta-rs, DuckDB, dvengine's log listing)
ignore it; losing it only makes the next LITE read more commits or refuse. Hence Delta's
handling, kept here: a missing or unreadable file reads as "no earlier vacuum", and a failed write
is logged, not raised (the files are deleted by then; the old value is still a safe one).
"""

from __future__ import annotations

import json
import logging

from dvengine.errors import DvengineError, StorageError
from dvengine.storage import storage_for
from dvengine.storage.logstore import log_dir

LAST_VACUUM_INFO_FILE = "_last_vacuum_info"
WATERMARK_FIELD = "latestCommitVersionOutsideOfRetentionWindow"

_LOG = logging.getLogger(__name__)


def last_vacuum_info_path(table_root: str) -> str:
    return f"{log_dir(table_root)}/{LAST_VACUUM_INFO_FILE}"


def parse_watermark(data: bytes) -> int | None:
    """The watermark in a ``_last_vacuum_info`` file's bytes; None when absent (``{}``) or unusable."""
    first_line = data.split(b"\n", 1)[0]
    try:
        info = json.loads(first_line)
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise ValueError(f"not a JSON object: {first_line[:80]!r}")
    value = info.get(WATERMARK_FIELD)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{WATERMARK_FIELD} must be a version (an int >= 0), got {value!r}")
    return value


def read_watermark(table_root: str) -> int | None:
    """The last VACUUM's ``latestCommitVersionOutsideOfRetentionWindow``; None when no VACUUM
    recorded one (or its record is unreadable, which Delta also reads as none)."""
    path = last_vacuum_info_path(table_root)
    try:
        data = storage_for(table_root).read_bytes(path)
    except FileNotFoundError:
        return None
    except (OSError, StorageError) as exc:  # unreadable: Delta's NonFatal, read as none (the safe side)
        _LOG.warning("cannot read %s: %s (read as: no earlier vacuum)", path, exc)
        return None
    try:
        return parse_watermark(data)
    except ValueError as exc:
        _LOG.warning("ignoring %s: %s (read as: no earlier vacuum)", path, exc)
        return None


def watermark_bytes(watermark: int | None) -> bytes:
    """What Delta's ``JsonUtils.toJson(LastVacuumInfo(watermark))`` plus its line end gives."""
    info = {} if watermark is None else {WATERMARK_FIELD: watermark}
    return (json.dumps(info, separators=(",", ":")) + "\n").encode()


def write_watermark(table_root: str, watermark: int | None) -> bool:
    """Record where this VACUUM stopped (overwriting); False, logged, when the write failed."""
    path = last_vacuum_info_path(table_root)
    try:
        storage_for(table_root).write(path, watermark_bytes(watermark))
    except (OSError, DvengineError) as exc:  # a store error, or one that refuses writes (Delta: NonFatal)
        _LOG.warning("VACUUM could not record where it stopped in %s: %s", path, exc)
        return False
    return True
