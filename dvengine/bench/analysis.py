"""DV vs rewrite crossover: when does rewriting a file pay for itself, reads included?

A deletion vector makes the write cheap but every later read still scans the file's dead rows
and filters them out; a rewrite pays once, at write time, for a file that reads like new. With
``W`` the median operation time and ``R`` the median full-table read time afterwards:

    break-even reads k = (W_rewrite - W_dv) / (R_dv - R_rewrite)

is how many full reads of the table it takes before the rewrite's write penalty is repaid by
faster reads (0: the rewrite is not even slower to write; infinite: the DV table reads no slower).

The per-file threshold of ``mode=auto`` cannot influence every part of ``R_dv - R_rewrite``:
a reader may pay a fixed price as soon as *any* file has a DV (dvengine's Spark reader builds
and joins a deleted-rows frame), whatever the fraction. That fixed part is estimated as the
read penalty at the smallest measured fraction (1 row, where dead rows cost nothing) and taken
out, leaving the *marginal* penalty that grows with the deleted fraction and that a rewrite
really removes. The threshold is the fraction, interpolated on log scales between measured
fractions, where the marginal break-even drops to ``reads_per_write`` full reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

DV = "dvengine-dv"
REWRITE = "dvengine-rewrite"
READER = "spark"
READS_CHOICES = (1.0, 3.0, 10.0)


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
    break_even_reads_marginal: float | None = None  # the same without the fixed DV read price
    break_even_reads_arrow: float | None = None  # the same with toArrow as the reader


def _break_even(write_dv: float, write_rw: float, penalty: float | None) -> float | None:
    if penalty is None:
        return None
    saved = write_rw - write_dv  # what the DV saves at write time
    if saved <= 0:
        return 0.0  # the rewrite is no slower to write: it wins from the first read
    return math.inf if penalty <= 0 else saved / penalty


def _penalty(read_dv: float | None, read_rw: float | None) -> float | None:
    return None if read_dv is None or read_rw is None else read_dv - read_rw


def fixed_read_penalty(points: list[CrossoverPoint]) -> float:
    """The DV read penalty at the smallest fraction measured: what any DV costs a read (>= 0)."""
    for p in points:
        penalty = _penalty(p.read_dv_s, p.read_rewrite_s)
        if penalty is not None:
            return max(0.0, penalty)
    return 0.0


def crossover_points(summaries: list[dict[str, Any]], kind: str) -> list[CrossoverPoint]:
    """Points for every workload of ``kind`` where both DV and rewrite modes measured OK."""
    by_key = {(s["workload"], s["contender"]): s for s in summaries}
    raw: list[CrossoverPoint] = []
    for (workload, contender), dv in by_key.items():
        if contender != DV or dv["kind"] != kind:
            continue
        rw = by_key.get((workload, REWRITE))
        if rw is None or dv["median_s"] is None or rw["median_s"] is None:
            continue
        dv_reads, rw_reads = dv["read_after_s"], rw["read_after_s"]
        write_dv, write_rw = dv["median_s"], rw["median_s"]
        raw.append(
            CrossoverPoint(
                workload=workload,
                kind=kind,
                fraction=dv["fraction"],
                write_dv_s=write_dv,
                write_rewrite_s=write_rw,
                read_dv_s=dv_reads.get(READER),
                read_rewrite_s=rw_reads.get(READER),
                read_dv_arrow_s=dv_reads.get("arrow"),
                read_rewrite_arrow_s=rw_reads.get("arrow"),
                bytes_dv=dv["bytes_written"],
                bytes_rewrite=rw["bytes_written"],
                break_even_reads=_break_even(write_dv, write_rw, _penalty(dv_reads.get(READER), rw_reads.get(READER))),
                break_even_reads_arrow=_break_even(
                    write_dv, write_rw, _penalty(dv_reads.get("arrow"), rw_reads.get("arrow"))
                ),
            )
        )
    raw.sort(key=lambda p: p.fraction)
    fixed = fixed_read_penalty(raw)
    out = []
    for p in raw:
        penalty = _penalty(p.read_dv_s, p.read_rewrite_s)
        marginal = None if penalty is None else penalty - fixed
        out.append(
            CrossoverPoint(
                **{**asdict(p), "break_even_reads_marginal": _break_even(p.write_dv_s, p.write_rewrite_s, marginal)}
            )
        )
    return out


def threshold_for(points: list[CrossoverPoint], reads_per_write: float, marginal: bool = True) -> float | None:
    """Smallest fraction where rewriting pays back within ``reads_per_write`` full reads.

    Interpolated (log fraction vs log break-even) between the last measured fraction where the
    DV wins and the first where the rewrite wins; None when the DV wins at every measured
    fraction (the threshold then lies above the largest one measured).
    """

    def k_of(p: CrossoverPoint) -> float | None:
        return p.break_even_reads_marginal if marginal else p.break_even_reads

    usable = [p for p in points if k_of(p) is not None and p.fraction > 0]
    previous: CrossoverPoint | None = None
    for cur in usable:
        k = k_of(cur)
        assert k is not None
        if k > reads_per_write:
            previous = cur
            continue
        prev_k = None if previous is None else k_of(previous)
        if previous is None or prev_k is None or math.isinf(prev_k) or k <= 0:
            return cur.fraction
        lo_k, hi_k = math.log(prev_k), math.log(k)
        lo_f, hi_f = math.log(previous.fraction), math.log(cur.fraction)
        t = (lo_k - math.log(reads_per_write)) / (lo_k - hi_k) if lo_k != hi_k else 1.0
        return math.exp(lo_f + t * (hi_f - lo_f))
    return None


def crossover_report(summaries: list[dict[str, Any]], reads_per_write: float) -> dict[str, Any]:
    """The JSON-ready crossover section: points per kind, the fixed read price, the thresholds."""
    out: dict[str, Any] = {"reader": READER, "reads_per_write": reads_per_write, "kinds": {}}
    for kind in ("delete", "update"):
        points = crossover_points(summaries, kind)
        if not points:
            continue
        reads = sorted({*READS_CHOICES, reads_per_write})
        out["kinds"][kind] = {
            "points": [_finite(asdict(p)) for p in points],
            "fixed_read_penalty_s": fixed_read_penalty(points),
            "threshold": {str(r): threshold_for(points, r) for r in reads},
            "threshold_total_penalty": {str(r): threshold_for(points, r, marginal=False) for r in reads},
        }
    return out


def _finite(record: dict[str, Any]) -> dict[str, Any]:
    """JSON has no infinity: an infinite break-even is stored as the string "inf"."""
    return {k: "inf" if isinstance(v, float) and math.isinf(v) else v for k, v in record.items()}
