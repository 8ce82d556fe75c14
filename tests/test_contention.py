"""Eight writer processes of single-row DML on one file: row-level resolution hides every conflict.

The short version of ``python -m dvengine.bench.contention`` (the bench runs 8 x 50 and W = 1, 2,
4, 8 with resolution on and off). Each writer owns its rows and retries any typed conflict that
reaches it; with row-level resolution none may reach it. Truth: versions 1..W*N without gaps,
each operation's predicate in exactly one commit, rows equal to the model through dvengine,
delta-rs and DuckDB.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from interop import rows_duckdb

from dvengine.bench.contention import run_contention
from dvengine.bench.contention_workload import model_rows, operations

WRITERS = 8
OPS = 12
ROWS = 20_000


def test_eight_writers_on_one_file_surface_no_conflict(tmp_path: Path) -> None:
    root = str(tmp_path / "hot")
    result = run_contention(root, ROWS, WRITERS, OPS, row_level=True)
    assert result.errors == []
    assert result.committed == WRITERS * OPS
    assert result.surfaced_conflicts == 0, result.conflict_messages
    assert result.versions_gap_free and result.each_op_once
    assert result.rows_match_model and result.delta_rs_matches is True
    assert rows_duckdb(root, ["id", "v"]) == model_rows(ROWS, WRITERS, OPS)
    assert result.internal_retries > 0  # the writers did race: the retries happened inside dvengine
    # ops/s is over the DML window the writers stamped (start signal -> last DML), which ends
    # before the last writer process has torn its interpreter down
    assert 0 < result.elapsed_s < result.process_elapsed_s
    assert result.ops_per_s == result.committed / result.elapsed_s


def test_same_total_baseline_runs_every_writers_operations_in_one_process(tmp_path: Path) -> None:
    """The bench's same-total baseline: one process runs the W writers' W*N operations (every
    writer's rows, round robin) and ends on the table W concurrent writers end on, so it passes
    the same verification; one process never races, so nothing is retried."""
    writers, ops, rows = 4, 5, 2_000
    assert sorted(operations(None, writers, ops)) == sorted(
        op for w in range(writers) for op in operations(w, writers, ops)
    )
    result = run_contention(str(tmp_path / "serial"), rows, writers, ops, row_level=True, serial=True)
    assert result.errors == [] and result.serial
    assert result.committed == writers * ops
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert result.delta_rs_matches is True
    assert rows_duckdb(str(tmp_path / "serial"), ["id", "v"]) == model_rows(rows, writers, ops)
    assert result.internal_retries == 0 and result.surfaced_conflicts == 0


def test_ceiling_runs_the_same_total_baseline_once_per_writer_each_on_its_own_table(tmp_path: Path) -> None:
    """The bench's ceiling row: W processes, each doing the same-total baseline's W*N operations on
    a table of its own. Nothing is shared, so nothing races; every table ends as the model says,
    and ops/s counts all W*W*N commits over the common window."""
    writers, ops, rows = 2, 4, 2_000
    root = tmp_path / "ceiling"
    result = run_contention(str(root), rows, writers, ops, row_level=True, independent=True)
    assert result.errors == [] and result.independent and not result.serial
    assert result.committed == writers * writers * ops
    assert result.internal_retries == 0 and result.surfaced_conflicts == 0
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert result.delta_rs_matches is True
    tables = sorted(p.name for p in root.iterdir())
    assert tables == ["0", "1"]
    for name in tables:
        assert rows_duckdb(str(root / name), ["id", "v"]) == model_rows(rows, writers, ops)
    assert result.ops_per_s == result.committed / result.elapsed_s


def test_warm_operations_are_committed_and_verified_but_not_timed(tmp_path: Path) -> None:
    """``warm_ops``: each writer's first operations run before the start signal (its caches of the
    hot file warm, as a long-running writer's are). They are committed and verified like the
    others; only the rest count in ops/s. The same-total baseline warms every lane it runs."""
    writers, ops, rows, warm = 2, 5, 2_000, 2
    result = run_contention(str(tmp_path / "warm"), rows, writers, ops, row_level=True, warm_ops=warm)
    assert result.errors == []
    assert result.committed == writers * ops and result.timed == writers * (ops - warm)
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert rows_duckdb(str(tmp_path / "warm"), ["id", "v"]) == model_rows(rows, writers, ops)
    assert result.ops_per_s == result.timed / result.elapsed_s
    serial = run_contention(str(tmp_path / "serial"), rows, writers, ops, row_level=True, serial=True, warm_ops=warm)
    assert serial.committed == writers * ops and serial.timed == writers * (ops - warm)
    assert serial.rows_match_model
    with pytest.raises(ValueError, match="warm_ops"):
        run_contention(str(tmp_path / "bad"), rows, writers, ops, row_level=True, warm_ops=ops)


def test_file_per_writer_layout_races_for_versions_but_never_rebases(tmp_path: Path) -> None:
    """``--layout file-per-writer``: one file of ``rows`` rows per writer in one table, each writer
    changing only its own. The writers race for versions like the hot-file run (so they read each
    other's commits), but no winner changed their file: nothing is rebased and nothing surfaces.
    The same-total baseline runs on the same layout and ends on the same table."""
    writers, ops, rows = 3, 6, 1_000
    assert operations(1, writers, ops, rows, file_per_writer=True)[:2] == [(rows + 1, True), (rows + 1 + writers, False)]
    assert sorted(operations(None, writers, ops, rows, True)) == sorted(
        op for w in range(writers) for op in operations(w, writers, ops, rows, True)
    )
    root = str(tmp_path / "per-writer")
    result = run_contention(root, rows, writers, ops, row_level=True, file_per_writer=True)
    assert result.errors == [] and result.committed == writers * ops
    assert result.surfaced_conflicts == 0 and result.rebased_files == 0
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert result.delta_rs_matches is True
    model = model_rows(rows, writers, ops, file_per_writer=True)
    assert len(model) == writers * rows - writers * (ops // 2)  # every writer's DELETEs, in its own file
    assert rows_duckdb(root, ["id", "v"]) == model
    created = (Path(root) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    assert sum('"add"' in line for line in created) == writers  # one file per writer, made in one commit
    serial = run_contention(str(tmp_path / "serial"), rows, writers, ops, row_level=True, serial=True, file_per_writer=True)
    assert serial.errors == [] and serial.rows_match_model and serial.internal_retries == 0
    with pytest.raises(ValueError, match="file_per_writer"):
        run_contention(str(tmp_path / "bad"), 10, writers, ops, row_level=True, file_per_writer=True)
