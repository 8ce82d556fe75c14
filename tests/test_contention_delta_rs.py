"""delta-rs as a contender of the contention bench (``--engines ... delta-rs``).

The same workload as dvengine's writers (each writer its own rows of one hot file, alternating
DELETE and UPDATE), done by ``deltalake.DeltaTable.delete/update`` in writer processes timed by the
same lane protocol. Truth: the commits are delta-rs's own (engineInfo, copy-on-write, no DV),
versions 1..W*N without gaps, each operation's predicate (as delta-rs logs it) in exactly one
commit, rows equal to the model through dvengine, delta-rs and DuckDB. A conflict delta-rs raises
(``CommitFailedError``) is counted as surfaced and the operation re-planned; one delta-rs resolves
itself (a winner on another file) is counted inside. Both races are provoked deterministically:
a rival commits between the writer's refresh and its commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from interop import rows_duckdb

from dvengine.bench.contention import create_hot_table, main, run_contention
from dvengine.bench.contention_delta_rs import run_op
from dvengine.bench.contention_report import markdown
from dvengine.bench.contention_workload import model_rows

deltalake = pytest.importorskip("deltalake")

WRITERS = 2
OPS = 3
ROWS = 1_000


class RivalAfterRefresh(deltalake.DeltaTable):
    """A writer's table handle whose first refresh is followed by a rival's DELETE of ``rival_row``
    on another handle: the race every concurrent writer can lose, made to happen every time."""

    rival_row: int | None = None

    def update_incremental(self) -> None:
        super().update_incremental()
        if self.rival_row is not None:
            deltalake.DeltaTable(self.table_uri).delete(f"id = {self.rival_row}")
            self.rival_row = None


def _commits(root: Path) -> dict[int, list[dict[str, Any]]]:
    return {int(p.name.split(".")[0]): [json.loads(line) for line in p.read_text().splitlines()]
            for p in (root / "_delta_log").glob("*.json")}


def test_delta_rs_writers_on_one_file_are_verified_and_counted(tmp_path: Path) -> None:
    root = tmp_path / "hot"
    result = run_contention(str(root), ROWS, WRITERS, OPS, row_level=None, engine="delta-rs")
    assert result.errors == [] and result.gave_up == 0
    assert result.engine == "delta-rs" and result.row_level is None
    assert result.committed == result.timed == WRITERS * OPS
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert result.delta_rs_matches is True and result.duckdb_matches is True and result.verified
    assert rows_duckdb(root, ["id", "v"]) == model_rows(ROWS, WRITERS, OPS)
    assert result.rebased_files == 0 and result.ops_per_s == result.timed / result.elapsed_s > 0
    assert len(result.conflict_messages) == min(5, result.surfaced_conflicts)
    assert all(m.startswith("CommitFailedError: ") for m in result.conflict_messages)
    commits = _commits(root)
    assert sorted(commits) == list(range(WRITERS * OPS + 1))
    for version in range(1, WRITERS * OPS + 1):  # delta-rs's copy-on-write commits, one file rewritten each
        actions = commits[version]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        assert info["engineInfo"].startswith("delta-rs") and info["operation"] in ("DELETE", "UPDATE")
        assert sum("remove" in a for a in actions) == 1 and sum("add" in a for a in actions) == 1
        assert not any(a.get("add", {}).get("deletionVector") for a in actions)


def test_delta_rs_same_total_baseline_is_the_same_table_from_one_process(tmp_path: Path) -> None:
    result = run_contention(str(tmp_path / "serial"), ROWS, WRITERS, OPS, row_level=None, serial=True,
                            warm_ops=2, engine="delta-rs")
    assert result.errors == [] and result.serial
    assert result.committed == WRITERS * OPS and result.timed == WRITERS * (OPS - 2)
    assert result.surfaced_conflicts == 0 and result.internal_retries == 0
    assert result.versions_gap_free and result.each_op_once and result.rows_match_model
    assert rows_duckdb(tmp_path / "serial", ["id", "v"]) == model_rows(ROWS, WRITERS, OPS)


def test_a_conflict_delta_rs_raises_is_surfaced_and_the_operation_replanned(tmp_path: Path) -> None:
    """The rival rewrites the hot file after our refresh: delta-rs's conflict check fails our
    commit with CommitFailedError. It counts as surfaced, the UPDATE is re-planned on a refreshed
    table and lands right after the rival."""
    root = tmp_path / "hot"
    create_hot_table(str(root), ROWS)
    table = RivalAfterRefresh(str(root))
    table.rival_row = 5
    record = run_op(table, 3, delete=False)
    assert record["surfaced"] == 1 and record["conflicts"][0].startswith("CommitFailedError: ")
    assert record["version"] == 2 and record["reconciled"] == 0
    assert rows_duckdb(root, ["id", "v"]) == [(i, -3 if i == 3 else i) for i in range(ROWS) if i != 5]


def test_a_winner_on_another_file_is_resolved_inside_delta_rs(tmp_path: Path) -> None:
    """file-per-writer layout: the rival rewrites the other file, delta-rs's conflict check passes
    and it commits past the rival without raising: nothing surfaced, one race resolved inside."""
    root = tmp_path / "per-writer"
    create_hot_table(str(root), ROWS, files=2)
    table = RivalAfterRefresh(str(root))
    table.rival_row = ROWS + 5
    record = run_op(table, 3, delete=True)
    assert record["surfaced"] == 0 and record["version"] == 2 and record["reconciled"] == 1
    assert rows_duckdb(root, ["id", "v"]) == [(i, i) for i in range(2 * ROWS) if i not in (3, ROWS + 5)]


def test_row_level_is_dvengine_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="row_level"):
        run_contention(str(tmp_path / "a"), ROWS, WRITERS, OPS, row_level=True, engine="delta-rs")
    with pytest.raises(ValueError, match="row_level"):
        run_contention(str(tmp_path / "b"), ROWS, WRITERS, OPS, row_level=None)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cli_reports_both_engines_and_their_same_round_ratio(tmp_path: Path) -> None:
    """``--engines dvengine delta-rs``: rows of both engines, labelled, and dvengine/delta-rs per W
    from the same round; dvengine's rows alone still render the table without an engine column."""
    out = tmp_path / "out"
    code = main(["--writers", str(WRITERS), "--ops", str(OPS), "--rows", str(ROWS), "--repeats", "1",
                 "--row-level", "on", "--same-total", "off", "--engines", "dvengine", "delta-rs", "--out", str(out)])
    assert code == 0
    report = json.loads((out / "contention.json").read_text())
    rows = {r["engine"]: r for r in report["results"]}
    assert sorted(rows) == ["delta-rs", "dvengine"] and len(report["results"]) == 2
    assert rows["dvengine"]["row_level"] is True and rows["delta-rs"]["row_level"] is None
    assert all(r["verified"] and r["committed"] == WRITERS * OPS for r in rows.values())
    (ratio,) = report["engine_ratios"]
    assert ratio["who"] == str(WRITERS) and ratio["row_level"] is True
    assert ratio["ratio"] == pytest.approx(rows["dvengine"]["ops_per_s"] / rows["delta-rs"]["ops_per_s"])
    text = (out / "contention.md").read_text()
    assert "| engine | row-level | W |" in text and f"| delta-rs | - | {WRITERS} |" in text
    assert f"| {WRITERS} | on | {ratio['ratio']:.2f}x" in text
    dvengine_only = markdown([rows["dvengine"]], report["meta"])
    assert "\n| row-level | W |" in dvengine_only and "| engine |" not in dvengine_only
    assert "delta-rs" not in dvengine_only
