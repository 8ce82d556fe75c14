"""Names of the files inside ``_delta_log`` and what they tell about a version.

Every decision of log replay (which checkpoint to start from, whether versions are contiguous,
what the latest version is) comes from file *names*, so their grammar lives in one place:

- ``<20-digit v>.json``                               commit of version v
- ``<v>.checkpoint.parquet``                          classic single-part checkpoint
- ``<v>.checkpoint.<10-digit i>.<10-digit n>.parquet``  part i of an n-part checkpoint
- ``<v>.checkpoint.<uuid>.json|parquet``              V2 checkpoint (top-level file)
- ``<v>.crc``, ``<a>.<b>.compacted.json``, ``_last_checkpoint`` and temp files are not needed
  for replay and are classified so that cleanup can still find them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum

VERSION_DIGITS = 20


class LogFileKind(Enum):
    COMMIT = "commit"
    CHECKPOINT_SINGLE = "checkpoint-single"
    CHECKPOINT_MULTI = "checkpoint-multi"
    CHECKPOINT_V2 = "checkpoint-v2"
    CRC = "crc"
    COMPACTED = "compacted"


@dataclass(frozen=True, slots=True)
class LogFileName:
    """A parsed ``_delta_log`` file name. ``part``/``num_parts`` only for multi-part checkpoints."""

    kind: LogFileKind
    version: int
    part: int | None = None
    num_parts: int | None = None
    end_version: int | None = None  # compacted files cover version..end_version

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in (LogFileKind.CHECKPOINT_SINGLE, LogFileKind.CHECKPOINT_MULTI, LogFileKind.CHECKPOINT_V2)


_V = r"(\d{" + str(VERSION_DIGITS) + r"})"
_COMMIT = re.compile(_V + r"\.json")
_SINGLE = re.compile(_V + r"\.checkpoint\.parquet")
_MULTI = re.compile(_V + r"\.checkpoint\.(\d{10})\.(\d{10})\.parquet")
_V2 = re.compile(_V + r"\.checkpoint\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.(json|parquet)")
_CRC = re.compile(_V + r"\.crc")
_COMPACTED = re.compile(_V + r"\." + _V + r"\.compacted\.json")


def parse_log_file_name(name: str) -> LogFileName | None:
    """Classify a bare file name; None for anything that is not a versioned log file."""
    base = os.path.basename(name)
    if m := _COMMIT.fullmatch(base):
        return LogFileName(LogFileKind.COMMIT, int(m.group(1)))
    if m := _SINGLE.fullmatch(base):
        return LogFileName(LogFileKind.CHECKPOINT_SINGLE, int(m.group(1)))
    if m := _MULTI.fullmatch(base):
        return LogFileName(LogFileKind.CHECKPOINT_MULTI, int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := _V2.fullmatch(base):
        return LogFileName(LogFileKind.CHECKPOINT_V2, int(m.group(1)))
    if m := _CRC.fullmatch(base):
        return LogFileName(LogFileKind.CRC, int(m.group(1)))
    if m := _COMPACTED.fullmatch(base):
        return LogFileName(LogFileKind.COMPACTED, int(m.group(1)), end_version=int(m.group(2)))
    return None


def commit_file_name(version: int) -> str:
    return f"{version:0{VERSION_DIGITS}d}.json"


def checkpoint_file_name(version: int) -> str:
    return f"{version:0{VERSION_DIGITS}d}.checkpoint.parquet"


LAST_CHECKPOINT_NAME = "_last_checkpoint"
SIDECAR_DIR_NAME = "_sidecars"
