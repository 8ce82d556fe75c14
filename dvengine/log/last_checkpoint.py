"""The ``_last_checkpoint`` hint file.

It is only a hint: writers update it after the checkpoint, crashes leave it stale, and other
tools may write fields we do not know. A missing or unparsable hint is therefore treated as
absent (the directory listing is authoritative), while a valid one is cross-checked against
the listing before use.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from dvengine.log.filenames import LAST_CHECKPOINT_NAME
from dvengine.storage.logstore import LogStore

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LastCheckpoint:
    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        for key, value in (
            ("size", self.size),
            ("parts", self.parts),
            ("sizeInBytes", self.size_in_bytes),
            ("numOfAddFiles", self.num_of_add_files),
        ):
            if value is not None:
                out[key] = value
        return out

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")


def last_checkpoint_path(log_path: str) -> str:
    return os.path.join(log_path, LAST_CHECKPOINT_NAME)


def _opt_int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return None if value is None else int(value)


def read_last_checkpoint(store: LogStore, log_path: str) -> LastCheckpoint | None:
    """The parsed hint, or None when it is missing or unreadable (logged: the listing decides)."""
    path = last_checkpoint_path(log_path)
    try:
        raw = store.read_bytes(path)  # one request on an object store, not exists() + read
    except FileNotFoundError:
        return None
    try:
        obj = json.loads(raw.decode("utf-8"))
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        return LastCheckpoint(
            version=int(obj["version"]),
            size=_opt_int(obj, "size"),
            parts=_opt_int(obj, "parts"),
            size_in_bytes=_opt_int(obj, "sizeInBytes"),
            num_of_add_files=_opt_int(obj, "numOfAddFiles"),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        _LOG.warning("ignoring unreadable %s (%s); falling back to listing the log", path, exc)
        return None
