"""MERGE reads only candidate files, writes far less in DV mode than copy-on-write, and the CLI upsert."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dml_helpers import make_table, merge_builder
from interop import assert_all_readers
from test_merge import COLS, model_upsert, source_df

from dvengine.cli.upsert import register_cli
from dvengine.log import load_snapshot


def _hide_files(path: Path, keep: Any) -> list[Path]:
    hidden = []
    for add in load_snapshot(str(path)).files:
        if not keep(add):
            src = path / add.path
            src.rename(src.with_suffix(".hidden"))
            hidden.append(src)
    return hidden


def _unhide(hidden: list[Path]) -> None:
    for src in hidden:
        src.with_suffix(".hidden").rename(src)


@pytest.mark.parametrize("extra_new_keys", [0, 1200], ids=["in-list", "min-max-range"])
def test_source_keys_select_candidate_files(spark: Any, tmp_path: Path, extra_new_keys: int) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path, files=4)  # files sorted by id: the last one holds 150..199
    src = [(i, f"u{i}", 1) for i in range(190, 200)] + [(5000 + i, "new", 2) for i in range(extra_new_keys)]
    hidden = _hide_files(path, lambda add: json.loads(add.stats)["maxValues"]["id"] >= 190)
    assert len(hidden) == 3
    try:
        metrics = (
            merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .withMode("dv")
            .executeMetrics()
        )
    finally:
        _unhide(hidden)
    assert metrics["numCandidateFiles"] == 1 and metrics["numFilesSkippedByStats"] == 3
    assert metrics["numTargetRowsUpdated"] == 10 and metrics["numTargetRowsInserted"] == extra_new_keys
    assert_all_readers(spark, path, COLS, model_upsert(rows, src))


def test_partition_pruning_from_source_keys_and_target_only_conjuncts(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path, files=2, partition_by=["part"])
    src = [(i, f"u{i}", 2) for i in range(2, 200, 30) if i % 3 == 2]
    hidden = _hide_files(path, lambda add: add.partition_values["part"] == "2")
    try:
        metrics = (
            merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id AND t.part = s.part AND t.id < 1000")
            .whenMatchedUpdate(set={"name": "s.name"})
            .executeMetrics()
        )
    finally:
        _unhide(hidden)
    assert metrics["numFilesPrunedByPartition"] == 4 and metrics["numCandidateFiles"] <= 2
    by_id = {s[0]: s for s in src}
    assert_all_readers(spark, path, COLS, [(r[0], by_id[r[0]][1], r[2]) if r[0] in by_id else r for r in rows])


def _bytes_written(path: Path, metrics: dict[str, Any], dv_files_before: set[str]) -> int:
    dv_files = {n for n in os.listdir(path) if n.startswith("deletion_vector_")} - dv_files_before
    commit = path / "_delta_log" / f"{metrics['version']:020d}.json"
    return int(metrics["numTargetBytesAdded"]) + sum((path / n).stat().st_size for n in dv_files) + commit.stat().st_size


def test_dv_mode_writes_far_fewer_bytes_than_rewrite(spark: Any, tmp_path: Path) -> None:
    src = [(i * 1000 + 17, f"u{i}", 0) for i in range(20)]  # 20 updates spread over the 4 files
    src += [(100_000 + i, "new", 1) for i in range(10)]  # and 10 inserts
    written = {}
    for mode in ("dv", "rewrite"):
        path = tmp_path / mode
        rows = make_table(spark, path, n=20_000, files=4)
        before = set(os.listdir(path))
        metrics = (
            merge_builder(spark, str(path), "t", source_df(spark, src), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .withMode(mode)
            .executeMetrics()
        )
        written[mode] = _bytes_written(path, metrics, before)
        assert metrics["numTargetRowsUpdated"] == 20 and metrics["numTargetRowsInserted"] == 10
        assert_all_readers(spark, path, COLS, model_upsert(rows, src))
    ratio = written["rewrite"] / written["dv"]
    print(f"MERGE bytes written: dv={written['dv']} rewrite={written['rewrite']} ratio={ratio:.1f}x")
    assert ratio > 5


def test_cli_upsert(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t"
    rows = make_table(spark, path, n=50, files=2)
    new = [(3, "x", 0), (60, "y", 1)]
    source_file = tmp_path / "src.parquet"
    pq.write_table(
        pa.table({"part": pa.array([r[2] for r in new], pa.int32()), "id": pa.array([r[0] for r in new], pa.int64()),
                  "name": pa.array([r[1] for r in new])}),
        source_file,
    )
    parser = argparse.ArgumentParser()
    register_cli(parser.add_subparsers())
    args = parser.parse_args(["upsert", str(path), "--source", str(source_file), "--key", "id", "--mode", "dv"])
    assert args.handler(args) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["numTargetRowsUpdated"] == 1 and metrics["numTargetRowsInserted"] == 1
    assert_all_readers(spark, path, COLS, model_upsert(rows, new))
