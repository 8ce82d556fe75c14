"""The raw ``_delta_log`` JSON of a local table, read without dvengine: the independent view
the DDL tests compare commits against (actions per commit, latest version, metaData in force)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def commit_actions(root: Path, version: int) -> list[dict[str, Any]]:
    """Every action line of commit ``version``, as parsed JSON objects, in file order."""
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def latest_version(root: Path) -> int:
    return max(int(name[:20]) for name in os.listdir(root / "_delta_log") if name.endswith(".json"))


def metadata_at(root: Path, version: int) -> dict[str, Any]:
    """The ``metaData`` in force at ``version``: the newest one at or before it."""
    for v in range(version, -1, -1):
        found = [a["metaData"] for a in commit_actions(root, v) if "metaData" in a]
        if found:
            return found[0]  # type: ignore[no-any-return]
    raise AssertionError("no metaData in the log")
