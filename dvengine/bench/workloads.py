"""The measured DML shapes: DELETE and UPDATE of 1 row to half the table, MERGE upserts.

Every predicate is plain SQL that dvengine (sqlglot/Spark dialect), delta-rs (DataFusion) and
DuckDB all accept: ``id = x``, ``id IN (...)`` and ``id % m = r``. Each workload also carries
the ids it must affect, computed from the generated ids with numpy rather than by any engine,
which is what correctness is checked against.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dvengine.bench.data import NUM_CATS, SCHEMA, Layout

UPDATE_VALUE = -1.0
MERGE_VALUE = -2.0
UPDATE_SET = {"value": "-1.0"}
KINDS = ("delete", "update", "merge")

Mask = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, eq=False)
class Workload:
    """One operation on a fresh copy of the base table, with the ids it must touch.

    ``matched_ids``: existing rows deleted / updated / matched by the merge; ``new_ids``: rows a
    merge inserts. A row is "marked" after the operation when its ``value`` is negative
    (UPDATE sets -1.0, MERGE sets -2.0; generated values are in [0, 1)).
    """

    name: str
    kind: str
    shape: str
    predicate: str | None
    matched_ids: np.ndarray
    new_ids: np.ndarray
    mask: Mask | None = None  # the predicate as numpy, for the floor contender (None for MERGE)

    def fraction(self, rows: int) -> float:
        """Fraction of the table's rows the operation touches (the x axis of every plot)."""
        return len(self.matched_ids) / rows

    def merge_source(self, layout: Layout) -> pa.Table:
        """The MERGE source: the matched keys then the new keys, ``value`` = -2.0.

        Matched keys keep their row's ``cat``, so on a table partitioned by ``cat`` an upsert
        updates rows in place instead of moving them to another partition.
        """
        ids = np.concatenate([self.matched_ids, self.new_ids]).astype(np.int64)
        names = pa.array([f"merged-{i}" for i in ids.tolist()], type=pa.string())
        values = np.full(len(ids), MERGE_VALUE)
        old_cats = layout.block_of(self.matched_ids) % NUM_CATS
        cats = np.concatenate([old_cats, self.new_ids % NUM_CATS]).astype(np.int32)
        return pa.Table.from_arrays([pa.array(ids), names, pa.array(values), pa.array(cats)], schema=SCHEMA)


def _one_row(layout: Layout) -> tuple[str, Mask]:
    block = layout.files // 2
    x = (layout.start(block) + layout.start(block + 1)) // 2
    return f"id = {x}", lambda ids: ids == x


def _ten_rows(layout: Layout) -> tuple[str, Mask]:
    """10 ids in 10 different files, spread over the table (fewer files: as many as there are)."""
    blocks = [i * layout.files // 10 for i in range(10)]
    picks = sorted({layout.start(b) + (layout.start(b + 1) - layout.start(b)) // 2 + i for i, b in enumerate(blocks)})
    picks = [p for p in picks if p < layout.rows]
    listed = ", ".join(str(p) for p in picks)
    return f"id IN ({listed})", lambda ids: np.isin(ids, np.array(picks, dtype=np.int64))


def _modulo(m: int, r: int) -> Callable[[Layout], tuple[str, Mask]]:
    return lambda layout: (f"id % {m} = {r}", lambda ids: ids % m == r)


SHAPES: dict[str, tuple[str, Callable[[Layout], tuple[str, Mask]]]] = {
    "1row": ("1 row", _one_row),
    "10rows": ("10 rows in 10 files", _ten_rows),
    "0.1pct": ("0.1% scattered", _modulo(1000, 7)),
    "1pct": ("1% scattered", _modulo(100, 7)),
    "10pct": ("10% scattered", _modulo(10, 7)),
    "25pct": ("25% scattered", _modulo(4, 1)),
    "50pct": ("50% scattered", _modulo(2, 1)),
}
DELETE_SHAPES = ("1row", "10rows", "0.1pct", "1pct", "10pct", "25pct", "50pct")
UPDATE_SHAPES = ("1row", "10rows", "0.1pct", "1pct", "10pct")
MERGE_KEYS = {"1k": 1_000, "100k": 100_000}

ALL_WORKLOADS = (
    *(f"delete-{s}" for s in DELETE_SHAPES),
    *(f"update-{s}" for s in UPDATE_SHAPES),
    *(f"merge-{k}" for k in MERGE_KEYS),
)

# --quick leaves out the one shape that only refines the crossover curve.
QUICK_WORKLOADS = tuple(w for w in ALL_WORKLOADS if w != "delete-25pct")


def _predicate_workload(name: str, kind: str, shape: str, layout: Layout, ids: np.ndarray) -> Workload:
    label, build = SHAPES[shape]
    predicate, mask = build(layout)
    matched = np.sort(ids[mask(ids)])
    if shape == "10rows":
        label = f"{len(matched)} rows in {layout.files_holding(matched)} files"
    return Workload(name, kind, label, predicate, matched, np.zeros(0, dtype=np.int64), mask)


def _merge_workload(name: str, key: str, layout: Layout) -> Workload:
    """Half the keys match existing ids spread evenly over the table, half are new ids past the end."""
    half = MERGE_KEYS[key] // 2
    matched = np.unique(np.linspace(0, layout.rows - 1, num=min(half, layout.rows)).astype(np.int64))
    new = np.arange(layout.rows, layout.rows + half, dtype=np.int64)
    return Workload(name, "merge", f"upsert {MERGE_KEYS[key]:,} keys", None, matched, new)


def build_workload(name: str, layout: Layout, ids: np.ndarray) -> Workload:
    """The workload called ``name`` (e.g. ``delete-1pct``, ``merge-100k``) on the generated ``ids``."""
    kind, _, shape = name.partition("-")
    if kind == "merge" and shape in MERGE_KEYS:
        return _merge_workload(name, shape, layout)
    if kind in ("delete", "update") and shape in SHAPES:
        return _predicate_workload(name, kind, shape, layout, ids)
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(ALL_WORKLOADS)}")


def select_workloads(selectors: Sequence[str], quick: bool = False) -> tuple[str, ...]:
    """Workload names from selectors: full names (``delete-1pct``) or kinds (``delete``); none = all.

    A kind selects from the preset's pool (``--quick`` has fewer shapes); a full name always works.
    """
    pool = QUICK_WORKLOADS if quick else ALL_WORKLOADS
    if not selectors:
        return pool
    chosen: list[str] = []
    for sel in selectors:
        if sel in KINDS:
            matches = [w for w in pool if w.startswith(sel + "-")]
        elif sel in ALL_WORKLOADS:
            matches = [sel]
        else:
            raise ValueError(f"unknown workload {sel!r}; use a kind {KINDS} or one of {', '.join(ALL_WORKLOADS)}")
        chosen.extend(m for m in matches if m not in chosen)
    return tuple(chosen)
