"""Parsing of newline-delimited JSON log files (commits and V2 checkpoint manifests).

A truncated or garbled line means the log cannot be trusted, so parsing fails loudly with the
file and 1-based line number instead of skipping the line: silently dropping one ``remove``
would resurrect deleted rows.
"""

from __future__ import annotations

import json
from typing import Any

from dvengine.errors import LogCorruptedError, ProtocolError
from dvengine.protocol.actions import Action, CommitInfo, action_from_json


def _lines(data: bytes, path: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogCorruptedError(f"log file {path} is not valid UTF-8 ({exc}); the file is corrupt") from None
    return text.split("\n")


def _parse_line(line: str, path: str, number: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LogCorruptedError(
            f"log file {path} line {number} is not valid JSON ({exc.msg}, column {exc.colno}); "
            f"the file is truncated or corrupt: {line[:200]!r}"
        ) from None
    if not isinstance(obj, dict):
        raise LogCorruptedError(f"log file {path} line {number} is not a JSON object: {line[:200]!r}")
    return obj


def parse_actions(data: bytes, path: str) -> list[Action]:
    """All known actions of one JSON log file, in file order (unknown action kinds are skipped)."""
    out: list[Action] = []
    for number, line in enumerate(_lines(data, path), start=1):
        if not line.strip():
            continue
        obj = _parse_line(line, path, number)
        try:
            action = action_from_json(obj)
        except ProtocolError as exc:
            raise ProtocolError(f"log file {path} line {number}: {exc}") from exc
        if action is not None:
            out.append(action)
    return out


def find_commit_info(data: bytes, path: str) -> CommitInfo | None:
    """The commitInfo of a commit file, reading only as far as needed (it is usually line 1)."""
    for number, line in enumerate(_lines(data, path), start=1):
        if not line.strip():
            continue
        obj = _parse_line(line, path, number)
        raw = obj.get("commitInfo")
        if isinstance(raw, dict):
            return CommitInfo.from_json(raw)
    return None
