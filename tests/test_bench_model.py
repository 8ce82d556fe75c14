"""Pure parts of the benchmark harness: the workload model, table copies and diffs, crossover maths."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dvengine.bench import tables
from dvengine.bench.analysis import CrossoverPoint, crossover_report, threshold_for
from dvengine.bench.data import Layout, generate_source, read_source_ids
from dvengine.bench.verify import duckdb_sql_matches, expected_facts
from dvengine.bench.workloads import ALL_WORKLOADS, build_workload, select_workloads


@pytest.fixture(scope="module")
def generated(tmp_path_factory: Any) -> tuple[Layout, list[str], np.ndarray]:
    layout = Layout(rows=10_000, files=20, seed=1)
    paths = generate_source(str(tmp_path_factory.mktemp("src")), layout)
    return layout, paths, read_source_ids(paths)


def test_source_blocks_are_contiguous_and_reused(generated: tuple[Layout, list[str], np.ndarray]) -> None:
    layout, paths, ids = generated
    assert np.array_equal(ids, np.arange(layout.rows))
    mtimes = [Path(p).stat().st_mtime_ns for p in paths]
    assert generate_source(str(Path(paths[0]).parent), layout) == paths
    assert [Path(p).stat().st_mtime_ns for p in paths] == mtimes  # same spec: not regenerated


@pytest.mark.parametrize("name", ALL_WORKLOADS)
def test_workload_model_agrees_with_duckdb(generated: tuple[Layout, list[str], np.ndarray], name: str) -> None:
    layout, paths, ids = generated
    w = build_workload(name, layout, ids)
    if w.predicate is not None:
        assert duckdb_sql_matches(paths, w.predicate) == len(w.matched_ids)
    facts = expected_facts(w, layout)
    if w.kind == "delete":
        assert facts.rows == layout.rows - len(w.matched_ids)
    if w.kind == "merge":
        assert len(w.new_ids) == len(w.matched_ids) or len(w.matched_ids) == layout.rows
        assert facts.marked == len(w.matched_ids) + len(w.new_ids)
        source = w.merge_source(layout)
        assert source.num_rows == len(w.matched_ids) + len(w.new_ids)


def test_small_shapes_prune_to_their_files(generated: tuple[Layout, list[str], np.ndarray]) -> None:
    layout, _, ids = generated
    assert layout.files_holding(build_workload("delete-1row", layout, ids).matched_ids) == 1
    ten = build_workload("delete-10rows", layout, ids)
    assert len(ten.matched_ids) == 10 and layout.files_holding(ten.matched_ids) == 10
    assert layout.files_holding(build_workload("delete-1pct", layout, ids).matched_ids) == 20


def test_select_workloads() -> None:
    assert select_workloads([]) == ALL_WORKLOADS
    assert select_workloads(["merge", "delete-1row"]) == ("merge-1k", "merge-100k", "delete-1row")
    with pytest.raises(ValueError):
        select_workloads(["drop-table"])


def test_fresh_copy_links_data_and_footprint_counts_new_files(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "_delta_log").mkdir(parents=True)
    (base / "_delta_log" / f"{0:020d}.json").write_text('{"add": {"path": "a.parquet"}}\n')
    (base / "a.parquet").write_bytes(b"x" * 10)
    copy = Path(tables.fresh_copy(str(base), str(tmp_path / "copy")))
    assert (copy / "a.parquet").stat().st_ino == (base / "a.parquet").stat().st_ino
    assert (copy / "_delta_log" / f"{0:020d}.json").stat().st_ino != (
        base / "_delta_log" / f"{0:020d}.json"
    ).stat().st_ino
    before = tables.folder_state(str(copy))
    (copy / "deletion_vector_x.bin").write_bytes(b"d" * 7)
    (copy / "_delta_log" / f"{1:020d}.json").write_text(
        '{"remove": {"path": "a.parquet"}}\n{"add": {"path": "a.parquet", "deletionVector": {}}}\n'
    )
    fp = tables.footprint(str(copy), before, since_version=0)
    assert (fp.dv_files_written, fp.data_files_written, fp.bytes_written) == (1, 0, 7)
    assert (fp.files_removed, fp.files_added, fp.log_files_written) == (1, 1, 1)


def _point(fraction: float, k: float | None) -> CrossoverPoint:
    return CrossoverPoint("w", "delete", fraction, 1.0, 2.0, None, None, None, None, None, None, k)


def test_threshold_interpolates_where_rewrite_pays_back() -> None:
    points = [_point(0.001, math.inf), _point(0.01, 100.0), _point(0.1, 1.0), _point(0.5, 0.0)]
    assert threshold_for(points, 1.0, marginal=False) == pytest.approx(0.1)
    assert 0.01 < (threshold_for(points, 10.0, marginal=False) or 0) < 0.1
    assert threshold_for(points[:2], 1.0, marginal=False) is None


def _summary(workload: str, contender: str, fraction: float, write_s: float, read_s: float) -> dict[str, Any]:
    return {
        "workload": workload,
        "contender": contender,
        "kind": "delete",
        "fraction": fraction,
        "median_s": write_s,
        "bytes_written": 1.0,
        "read_after_s": {"spark": read_s},
    }


def test_marginal_break_even_removes_the_fixed_dv_read_price() -> None:
    summaries = [
        _summary("one", "dvengine-dv", 1e-6, 1.0, 5.0),  # any DV costs 2 s per read
        _summary("one", "dvengine-rewrite", 1e-6, 3.0, 3.0),
        _summary("tenth", "dvengine-dv", 0.1, 1.0, 7.0),  # 4 s per read, 2 of them marginal
        _summary("tenth", "dvengine-rewrite", 0.1, 9.0, 3.0),
    ]
    section = crossover_report(summaries, 1.0)["kinds"]["delete"]
    one, tenth = section["points"]
    assert section["fixed_read_penalty_s"] == pytest.approx(2.0)
    assert (one["break_even_reads"], one["break_even_reads_marginal"]) == (pytest.approx(1.0), "inf")
    assert (tenth["break_even_reads"], tenth["break_even_reads_marginal"]) == (pytest.approx(2.0), pytest.approx(4.0))
    assert section["threshold"]["10.0"] == pytest.approx(0.1)
    assert section["threshold"]["1.0"] is None  # at 1 read the DV still wins at every measured fraction


def test_register_adds_bench_subcommand() -> None:
    import argparse

    from dvengine.bench.cli import config_from_args, register, run_bench

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "--quick", "--workloads", "delete", "merge-1k", "--partitioned"])
    assert args.handler is run_bench
    config = config_from_args(args)
    assert (config.rows, config.files, config.repeat, config.partitioned) == (1_000_000, 10, 1, True)
    assert config.workloads == (
        "delete-1row",
        "delete-10rows",
        "delete-0.1pct",
        "delete-1pct",
        "delete-10pct",
        "delete-50pct",
        "merge-1k",
    )
    full = config_from_args(parser.parse_args(["bench"]))
    assert (full.rows, full.files, full.repeat, len(full.workloads)) == (10_000_000, 20, 3, len(ALL_WORKLOADS))
    assert full.spark_conf == {}
    confs = ["--spark-conf", "dvengine.spark.dmlStrategy=rows", "--spark-conf", "a.b = c=d"]
    assert config_from_args(parser.parse_args(["bench", *confs])).spark_conf == {
        "dvengine.spark.dmlStrategy": "rows",
        "a.b": "c=d",
    }
    for bad in ("no-equals", "=value"):
        with pytest.raises(ValueError, match=f"KEY=VALUE, got {bad!r}"):
            config_from_args(parser.parse_args(["bench", "--spark-conf", bad]))
