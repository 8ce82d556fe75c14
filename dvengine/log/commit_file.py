"""Parsing of newline-delimited JSON log files (commits and V2 checkpoint manifests).

A truncated or garbled line means the log cannot be trusted, so parsing fails loudly with the
file and 1-based line number instead of skipping the line: silently dropping one ``remove``
would resurrect deleted rows.

Parsed commits are memoized by their bytes (small files only, a bounded LRU): the bytes are the
whole input, and actions are frozen, so a hit is exactly what a parse would return. It serves
writers on one hot table, where each writer reads every other writer's commit twice: once as a
winner of its commit race (commit/transaction.py) and once when its next command refreshes the
cached snapshot by the log tail (log/loader.py). Measured: ~42 us per parse of a 2 KB commit,
~6.5 winners per operation at 8 writers (spec_notes/isolation-and-concurrency.md).

Lines are decoded with orjson (~4 us against ~12 us for the standard library's ``json`` on the
four lines of a point DML's commit) wherever it gives exactly what ``json`` gives. It does not for
what orjson refuses (``NaN``, ``Infinity``, numbers beyond a double, lone surrogates: it raises,
and ``json`` decides as before, including its precise error) and for integers beyond 64 bits,
which orjson silently turns into floats: a decoded line holding any float of magnitude >= 9.2e18
(just below 2**63, where such integers land; a genuine float there decodes the same either way)
is decoded again by ``json``. Checked on the decoded values, not the text: a regex for long digit runs cost ~9 us per
line on commit lines (Z85 deletion vectors and stats are full of digits), twice orjson's decode.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import orjson

from dvengine.errors import LogCorruptedError, ProtocolError
from dvengine.protocol.actions import Action, CommitInfo, action_from_json


def _lines(data: bytes, path: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogCorruptedError(f"log file {path} is not valid UTF-8 ({exc}); the file is corrupt") from None
    return text.split("\n")


# orjson keeps integers in [-2**63, 2**64 - 1] and makes floats of larger ones, so any float this
# large may have been an integer literal (the bound is a little below 2**63, to be safe).
_MAYBE_OVERFLOWED_INT = 9.2e18


def _holds_large_float(value: Any) -> bool:
    """Whether a decoded JSON value holds a float of magnitude >= ``_MAYBE_OVERFLOWED_INT``."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            pending.extend(item.values())
        elif kind is list:
            pending.extend(item)
        elif kind is float and abs(item) >= _MAYBE_OVERFLOWED_INT:
            return True
    return False


def _loads(line: str) -> Any:
    """``json.loads(line)``, through orjson where that gives the same (see the module docstring)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        pass  # json decides: it accepts some of what orjson refuses, and words its errors
    else:
        if not _holds_large_float(value):
            return value
    return json.loads(line)


def _parse_line(line: str, path: str, number: int) -> dict[str, Any]:
    try:
        obj = _loads(line)
    except json.JSONDecodeError as exc:
        raise LogCorruptedError(
            f"log file {path} line {number} is not valid JSON ({exc.msg}, column {exc.colno}); "
            f"the file is truncated or corrupt: {line[:200]!r}"
        ) from None
    if not isinstance(obj, dict):
        raise LogCorruptedError(f"log file {path} line {number} is not a JSON object: {line[:200]!r}")
    return obj


_MEMO_MAX_BYTES = 64 * 1024  # commits of point DML are ~2 KB; large ones are rare and read once
_MEMO_ENTRIES = 256
_MEMO: OrderedDict[bytes, tuple[Action, ...]] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def parse_actions(data: bytes, path: str) -> list[Action]:
    """All known actions of one JSON log file, in file order (unknown action kinds are skipped)."""
    if len(data) > _MEMO_MAX_BYTES:
        return _parse(data, path)
    with _MEMO_LOCK:
        found = _MEMO.get(data)
        if found is not None:
            _MEMO.move_to_end(data)
            return list(found)
    out = _parse(data, path)
    with _MEMO_LOCK:
        _MEMO[data] = tuple(out)
        while len(_MEMO) > _MEMO_ENTRIES:
            _MEMO.popitem(last=False)
    return out


def _parse(data: bytes, path: str) -> list[Action]:
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
