"""Benchmark: the deletion-vector codec (serialize / deserialize of the portable 64-bit Roaring
format, and the Z85 text of inline DVs) on the shapes DML produces.

Every DML that retires rows encodes one DV per changed file, and every reader (and every losing
writer's catch-up) decodes them, so the codec sits on both paths. Shapes: ``sparse`` (every 30th
row: array containers, the costliest to parse), ``dense`` (9 rows of 10: bitmap containers),
``runs`` (blocks of 1,000 contiguous rows: run containers) and ``point`` (the few rows of a point
DELETE, the inline case). Each timing is the median of ``--repeats`` calls after one warm-up, with
min and max; a round trip is checked for equality before anything is timed. The unit suite checks
the codec's bytes against an independent hand-written Roaring codec (tests/test_dv_bitmap.py); it
does not time it.

Run: ``python -m dvengine.bench.dv_codec [--rows 3000000] [--repeats 7] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dvengine.dv.bitmap import bitmap_from_row_indexes, deserialize_bitmap, serialize_bitmap
from dvengine.dv.z85 import z85_decode, z85_encode


def shapes(rows: int) -> dict[str, npt.NDArray[np.uint64]]:
    """Row indexes of each shape, about ``rows`` of them (``point``: 3 rows)."""
    span = rows * 30
    sparse = np.arange(0, span, 30, dtype=np.uint64)
    dense_all = np.arange(0, rows + rows // 9, dtype=np.uint64)
    dense = dense_all[dense_all % 10 != 0]
    runs = (np.arange(0, rows // 1000, dtype=np.uint64)[:, None] * 3000 + np.arange(1000, dtype=np.uint64)).ravel()
    point = np.array([7, 65_537, 4_000_000_123], dtype=np.uint64)
    return {"sparse": sparse, "dense": dense, "runs": runs, "point": point}


def _timed(call: Callable[[], object], repeats: int) -> dict[str, float]:
    """Median, min and max seconds of ``repeats`` calls after one untimed warm-up call."""
    call()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds)}


def measure(rows: int, repeats: int) -> dict[str, Any]:
    """Time each codec step for each shape; raise ``AssertionError`` if a round trip differs."""
    results: dict[str, Any] = {}
    for name, indexes in shapes(rows).items():
        bitmap = bitmap_from_row_indexes(indexes)
        data = serialize_bitmap(bitmap)
        text = z85_encode(data)
        assert deserialize_bitmap(data) == bitmap, f"{name}: the DV did not round-trip"
        assert z85_decode(text, len(data)) == data, f"{name}: the Z85 text did not round-trip"
        results[name] = {
            "rows": len(indexes), "serialized_bytes": len(data),
            "build_from_indexes": _timed(partial(bitmap_from_row_indexes, indexes), repeats),
            "serialize": _timed(partial(serialize_bitmap, bitmap), repeats),
            "deserialize": _timed(partial(deserialize_bitmap, data), repeats),
            "z85_encode": _timed(partial(z85_encode, data), repeats),
            "z85_decode": _timed(partial(z85_decode, text, len(data)), repeats),
        }
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    shapes_measured = measure(args.rows, args.repeats)
    result = {"rows": args.rows, "repeats": args.repeats, "load_before": load_before,
              "load_after": os.getloadavg(), "cpus": os.cpu_count(), "shapes": shapes_measured}
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
