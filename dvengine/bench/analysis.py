"""DV vs rewrite crossover: when does rewriting a file pay for itself, reads included?

A deletion vector makes the write cheap but every later read still scans the file's dead rows
and filters them out; a rewrite pays once, at write time, for a file that reads like new. With
``W`` the median operation time and ``R`` the median full-table read time afterwards:

    break-even reads k = (W_rewrite - W_dv) / (R_dv - R_rewrite)

is how many full reads of the table it takes before the rewrite's write penalty is repaid by
faster reads. Where the DV write is slower, or the DV table reads no slower, k is 0 or
infinite. A threshold for ``mode=auto`` follows from an assumed number of full reads per
write (``reads_per_write``): rewrite the files where k <= reads_per_write. The threshold is the
fraction, interpolated on a log scale between measured fractions, at which k crosses it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

DV = "dvengine-dv"
REWRITE = "dvengine-rewrite"
READER = "spark"


@dataclass(frozen=True)
class CrossoverPoint:
    workload: str
    kind: str
    fraction: float
    write_dv_s: float
    write_rewrite_s: float
    read_dv_s: float | None
    read_rewrite_s: float | None
    read_dv_arrow_s: float | None
    read_rewrite_arrow_s: float | None
    bytes_dv: float | None
    bytes_rewrite: float | None
    break_even_reads: float | None  # None: no read-after timing; inf: rewrite never pays back


def _break_even(write_dv: float, write_rw: float, read_dv: float | None, read_rw: float | None) -> float | None:
    if read_dv is None or read_rw is None:
        return None
    saved = write_rw - write_dv  # what the DV saves at write time
    if saved <= 0:
        return 0.0  # the rewrite is no slower to write: it wins from the first read
    penalty = read_dv - read_rw
    return math.inf if penalty <= 0 else saved / penalty


def crossover_points(summaries: list[dict[str, Any]], kind: str) -> list[CrossoverPoint]:
    """Points for every workload of ``kind`` where both DV and rewrite modes measured OK."""
    by_key = {(s["workload"], s["contender"]): s for s in summaries}
    points = []
    for (workload, contender), dv in by_key.items():
        if contender != DV or dv["kind"] != kind:
            continue
        rw = by_key.get((workload, REWRITE))
        if rw is None or dv["median_s"] is None or rw["median_s"] is None:
            continue
        dv_reads, rw_reads = dv["read_after_s"], rw["read_after_s"]
        points.append(
            CrossoverPoint(
                workload=workload,
                kind=kind,
                fraction=dv["fraction"],
                write_dv_s=dv["median_s"],
                write_rewrite_s=rw["median_s"],
                read_dv_s=dv_reads.get(READER),
                read_rewrite_s=rw_reads.get(READER),
                read_dv_arrow_s=dv_reads.get("arrow"),
                read_rewrite_arrow_s=rw_reads.get("arrow"),
                bytes_dv=dv["bytes_written"],
                bytes_rewrite=rw["bytes_written"],
                break_even_reads=_break_even(
                    dv["median_s"], rw["median_s"], dv_reads.get(READER), rw_reads.get(READER)
                ),
            )
        )
    return sorted(points, key=lambda p: p.fraction)


def threshold_for(points: list[CrossoverPoint], reads_per_write: float) -> float | None:
    """Smallest fraction where rewriting pays back within ``reads_per_write`` full reads.

    Interpolated (log fraction vs log break-even) between the last measured fraction where the
    DV wins and the first where the rewrite wins; None when the DV wins at every measured
    fraction (the threshold then lies above the largest one measured).
    """
    usable = [p for p in points if p.break_even_reads is not None and p.fraction > 0]
    for prev, cur in zip([None, *usable], usable):
        assert cur.break_even_reads is not None
        if cur.break_even_reads > reads_per_write:
            continue
        if (
            prev is None
            or prev.break_even_reads is None
            or math.isinf(prev.break_even_reads)
            or cur.break_even_reads <= 0
        ):
            return cur.fraction
        lo_k, hi_k = math.log(prev.break_even_reads), math.log(cur.break_even_reads)
        lo_f, hi_f = math.log(prev.fraction), math.log(cur.fraction)
        t = (lo_k - math.log(reads_per_write)) / (lo_k - hi_k) if lo_k != hi_k else 1.0
        return math.exp(lo_f + t * (hi_f - lo_f))
    return None


def crossover_report(summaries: list[dict[str, Any]], reads_per_write: float) -> dict[str, Any]:
    """The JSON-ready crossover section: points per kind and the implied thresholds."""
    out: dict[str, Any] = {"reader": READER, "reads_per_write": reads_per_write, "kinds": {}}
    for kind in ("delete", "update"):
        points = crossover_points(summaries, kind)
        if not points:
            continue
        out["kinds"][kind] = {
            "points": [_finite(asdict(p)) for p in points],
            "threshold": {str(r): threshold_for(points, r) for r in sorted({1.0, reads_per_write, 10.0})},
        }
    return out


def _finite(record: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: an infinite break-even is stored as the string "inf"."""
    return {k: "inf" if isinstance(v, float) and math.isinf(v) else v for k, v in record.items()}
