"""Rows for the clustering tests: appended batches of random (x, y, s) and the model they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import dvengine


def append_xys(path: Path, batches: int, rows: int, seed: int) -> list[tuple[Any, ...]]:
    """Append ``batches`` files of ``rows`` random (x, y, s) rows (one file per append); the rows written."""
    rng = np.random.default_rng(seed)
    model: list[tuple[Any, ...]] = []
    for b in range(batches):
        x, y = rng.integers(0, 1000, rows).tolist(), rng.integers(0, 1000, rows).tolist()
        s = [f"{seed}-{b}-{i}" for i in range(rows)]
        dvengine.write(pa.table({"x": x, "y": y, "s": s}), str(path), mode="append")
        model.extend(zip(x, y, s, strict=True))
    return model
