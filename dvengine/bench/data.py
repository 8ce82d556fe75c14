"""The benchmark data set: generated once as Parquet, plus the layout model used to predict results.

Rows are split into ``files`` contiguous id blocks, one Parquet file per block, so each data file
of every base table holds one known id range. That makes the outcome of every workload
predictable from ids alone (how many rows match, which files hold them), and gives min/max
stats skipping something to prune: a 1-row DELETE has exactly one candidate file.

``cat`` is the block number modulo :data:`NUM_CATS`, constant within a file, so a table
partitioned by ``cat`` has the same files and id ranges as the unpartitioned one and the two
runs are comparable.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

NUM_CATS = 4
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("cat", pa.int32()),
    ]
)
SPEC_FILE = "spec.json"


@dataclass(frozen=True)
class Layout:
    """How ``rows`` ids are split over ``files`` blocks; block ``f`` is ``[start(f), start(f + 1))``."""

    rows: int
    files: int
    seed: int

    def start(self, block: int) -> int:
        return block * self.rows // self.files

    def block_of(self, ids: np.ndarray) -> np.ndarray:
        """Block number of each id (ids must lie in ``[0, rows)``)."""
        starts = np.array([self.start(b) for b in range(self.files)], dtype=np.int64)
        return np.searchsorted(starts, ids, side="right") - 1

    def files_holding(self, ids: np.ndarray) -> int:
        """How many blocks (data files) hold at least one of ``ids`` (ids outside the table ignored)."""
        inside = ids[(ids >= 0) & (ids < self.rows)]
        return int(np.unique(self.block_of(inside)).size) if inside.size else 0


def block_table(layout: Layout, block: int) -> pa.Table:
    """The rows of one block; ``value`` is uniform in [0, 1) from a per-block seed (so never negative)."""
    lo, hi = layout.start(block), layout.start(block + 1)
    ids = pa.array(np.arange(lo, hi, dtype=np.int64))
    names = pc.binary_join_element_wise("name-", pc.cast(ids, pa.string()), "")
    values = np.random.default_rng(layout.seed + block).random(hi - lo)
    cats = np.full(hi - lo, block % NUM_CATS, dtype=np.int32)
    return pa.Table.from_arrays([ids, names, pa.array(values), pa.array(cats)], schema=SCHEMA)


def source_paths(source_dir: str, layout: Layout) -> list[str]:
    return [os.path.join(source_dir, f"part-{b:05d}.parquet") for b in range(layout.files)]


def generate_source(source_dir: str, layout: Layout) -> list[str]:
    """Write the data set as one Parquet file per block, unless an identical one is already there.

    Reuse matters for repeated runs at 10M rows; the spec file written last is the marker
    that the folder is complete and matches ``layout``.
    """
    paths = source_paths(source_dir, layout)
    spec_path = os.path.join(source_dir, SPEC_FILE)
    if os.path.exists(spec_path):
        with open(spec_path) as fh:
            if json.load(fh) == asdict(layout) and all(os.path.exists(p) for p in paths):
                return paths
    os.makedirs(source_dir, exist_ok=True)
    for block, path in enumerate(paths):
        table = block_table(layout, block)
        pq.write_table(table, path, row_group_size=table.num_rows, compression="snappy")
    with open(spec_path, "w") as fh:
        json.dump(asdict(layout), fh)
    return paths


def read_source_ids(paths: list[str]) -> np.ndarray:
    """All ids of the generated data, read back from the Parquet files (the model's ground truth)."""
    return np.concatenate([pq.read_table(p, columns=["id"]).column("id").to_numpy() for p in paths])
