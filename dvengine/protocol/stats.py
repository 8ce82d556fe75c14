"""Per-file column statistics as the ``add.stats`` JSON string stores them.

Stats drive data skipping, so their meaning must be exact: ``min_values``/``max_values`` are
bounds (not necessarily tight once a deletion vector hides rows, hence ``tight_bounds``), keyed
by *physical* column name and nested like the schema; a column absent from a map means "unknown",
never "no values".
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dvengine.errors import ProtocolError
from dvengine.storage.retired_files import RetiredFiles, on_retired


@dataclass(frozen=True, slots=True)
class FileStats:
    num_records: int | None = None
    min_values: Mapping[str, Any] = field(default_factory=dict)
    max_values: Mapping[str, Any] = field(default_factory=dict)
    null_count: Mapping[str, Any] = field(default_factory=dict)
    tight_bounds: bool | None = None

    def with_loose_bounds(self) -> FileStats:
        """Stats for the same physical file once a DV hides some of its rows."""
        return replace(self, tight_bounds=False)

    def to_json_string(self) -> str:
        out: dict[str, Any] = {}
        if self.num_records is not None:
            out["numRecords"] = self.num_records
        out["minValues"] = dict(self.min_values)
        out["maxValues"] = dict(self.max_values)
        out["nullCount"] = dict(self.null_count)
        if self.tight_bounds is not None:
            out["tightBounds"] = self.tight_bounds
        return json.dumps(out, separators=(",", ":"), default=str)

    @classmethod
    def parse(cls, raw: str | None) -> FileStats | None:
        """Parse ``add.stats``; None when the writer recorded no stats.

        Cached per stats string (the result is read-only): planning asks every file of the
        snapshot for its stats on every command, and a long-running writer keeps its snapshot.
        """
        if raw is None or raw == "":
            return None
        return _parse_stats(raw)

    @classmethod
    def _parse_uncached(cls, raw: str) -> FileStats:
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ProtocolError(f"add.stats is not valid JSON ({exc}): {raw[:200]}") from None
        if not isinstance(obj, Mapping):
            raise ProtocolError(f"add.stats must be a JSON object: {raw[:200]}")
        num = obj.get("numRecords")
        tight = obj.get("tightBounds")
        return cls(
            num_records=None if num is None else int(num),
            # Plain dicts, typed read-only (Mapping): a MappingProxyType around each was three
            # objects per cached stats string for the garbage collector to track and walk (a
            # dict of numbers and strings is untracked); a long stream caches one per file version.
            min_values=dict(obj.get("minValues") or {}),
            max_values=dict(obj.get("maxValues") or {}),
            null_count=dict(obj.get("nullCount") or {}),
            tight_bounds=None if tight is None else bool(tight),
        )


MAX_PARSED = 65_536

# add.stats string -> its parse; insertion order is the eviction order (oldest first). Reads take
# no lock (a dict lookup is atomic); inserts and evictions do.
_PARSED: dict[str, FileStats] = {}
_PARSED_LOCK = threading.Lock()


def _parse_stats(raw: str) -> FileStats:
    found = _PARSED.get(raw)
    if found is not None:
        return found
    parsed = FileStats._parse_uncached(raw)
    with _PARSED_LOCK:
        _PARSED[raw] = parsed
        while len(_PARSED) > MAX_PARSED:
            del _PARSED[next(iter(_PARSED))]
    return parsed


@on_retired
def _forget_retired(files: RetiredFiles) -> None:
    """Drop the parses of stats strings no live file carries any more: each is an object the
    garbage collector walks on every full collection, and a stream writes a new one per commit."""
    with _PARSED_LOCK:
        for raw in files.stats:
            _PARSED.pop(raw, None)


def cached_stats_strings() -> set[str]:
    """The stats strings whose parses are cached (tests)."""
    with _PARSED_LOCK:
        return set(_PARSED)


def stats_for_dv_file(raw_stats: str | None) -> str | None:
    """The stats string an ``add`` carrying a DV must have: same numbers, ``tightBounds: false``."""
    parsed = FileStats.parse(raw_stats)
    if parsed is None:
        return None
    if parsed.tight_bounds is False:
        return raw_stats  # already loose (a file that has a DV): same numbers, nothing to rewrite
    return parsed.with_loose_bounds().to_json_string()
