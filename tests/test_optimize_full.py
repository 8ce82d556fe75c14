"""``OPTIMIZE t FULL`` on a clustered table, after Delta's IncrementalZCubeClusteringSuite ("OPTIMIZE
FULL - change cluster keys", "- change clustering provider", "- error cases"): FULL reclusters the
files clustered by columns the table no longer has, or by another provider, which a plain OPTIMIZE
leaves alone; ZCubes of the current columns that are big enough stay; rows stay equal to a model and
to delta-rs / DuckDB reads; refusals are typed and leave the folder byte for byte as it was."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clustering_rows import append_xys
from dml_helpers import folder_state
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

from dvengine import DeltaTable
from dvengine.commit.transaction import Transaction
from dvengine.errors import OperationNotAllowedError
from dvengine.log import load_snapshot
from dvengine.maintenance.clustering import alter_clustering
from dvengine.sqlcmd import table_statements
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import OptimizeStatement
from dvengine.sqlcmd.tokens import parse_optimize

COLS = ["x", "y", "s"]
MIN_CUBE = "SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD"


def _clustered(path: Path, *cols: str) -> DeltaTable:
    (DeltaTable.create(None).location(str(path)).addColumn("x", "BIGINT").addColumn("y", "BIGINT")
     .addColumn("s", "STRING").clusterBy(*cols).execute())
    return DeltaTable.forPath(None, str(path))


def _cubes(path: Path) -> dict[str, tuple[str, ...]]:
    """path -> (ZCUBE_ID, ZCUBE_ZORDER_BY, clusteringProvider) of every live file ('' when untagged)."""
    out: dict[str, tuple[str, ...]] = {}
    for f in load_snapshot(str(path)).files:
        tags = f.tags or {}
        out[f.path] = (tags.get("ZCUBE_ID", ""), tags.get("ZCUBE_ZORDER_BY", ""), f.clustering_provider or "")
    return out


def _last_commit_info(path: Path) -> dict[str, Any]:
    version = load_snapshot(str(path)).version
    lines = (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if "commitInfo" in line)


def _same_rows(path: Path, model: list[tuple[Any, ...]]) -> None:
    want = sort_rows(model)
    assert rows_arrow(path, COLS) == rows_delta_rs(path, COLS) == rows_duckdb(path, COLS) == want


def test_full_reclusters_files_of_the_old_clustering_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dt = _clustered(tmp_path, "x", "y")
    model = append_xys(tmp_path, 4, 300, seed=11)
    dt.optimize().executeCompaction()
    old = _cubes(tmp_path)
    assert len({c[0] for c in old.values()}) == 1 and all(c[1] == '["x","y"]' for c in old.values())

    model += append_xys(tmp_path, 4, 300, seed=12)
    alter_clustering(str(tmp_path), [["y"], ["x"]])
    monkeypatch.setenv(MIN_CUBE, str(2**62))  # every ZCube small: the new files are clustered, old ones left alone
    res = dt.optimize().executeCompaction()["metrics"]
    assert res["numFilesRemoved"] == 4
    second = _cubes(tmp_path)
    assert {p: c for p, c in second.items() if p in old} == old  # Delta: "files2.intersect(files1) === files1"
    assert {c[1] for p, c in second.items() if p not in old} == {'["y","x"]'}
    _same_rows(tmp_path, model)

    monkeypatch.setenv(MIN_CUBE, "1")  # every ZCube big enough: only the old columns' files are rewritten
    res = dt.optimize().executeCompaction(full=True)["metrics"]
    assert res["numFilesRemoved"] == len(old)
    third = _cubes(tmp_path)
    assert not set(old) & set(third)
    assert {p: c for p, c in third.items() if p in second} == {p: c for p, c in second.items() if p not in old}
    assert {c[1] for c in third.values()} == {'["y","x"]'} and {c[2] for c in third.values()} == {"liquid"}
    assert _last_commit_info(tmp_path)["operationParameters"] == {
        "predicate": "[]", "zOrderBy": "[]", "clusterBy": '["y","x"]', "auto": False, "isFull": True
    }
    _same_rows(tmp_path, model)

    # everything clustered by the current columns and every ZCube big enough: FULL commits nothing
    version = load_snapshot(str(tmp_path)).version
    assert dt.optimize().executeCompaction(full=True)["metrics"]["numFilesRemoved"] == 0
    assert dt.optimize().executeCompaction()["metrics"]["numFilesRemoved"] == 0
    assert load_snapshot(str(tmp_path)).version == version


def test_full_reclusters_another_providers_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dt = _clustered(tmp_path, "x", "y")
    model = append_xys(tmp_path, 4, 300, seed=21)
    dt.optimize().executeCompaction()
    snapshot = dt.snapshot()
    txn = Transaction(str(tmp_path), snapshot, "MANUAL UPDATE", {})
    txn.add_actions([replace(f, clustering_provider="customProvider", data_change=False) for f in snapshot.files])
    txn.commit()
    custom = _cubes(tmp_path)
    assert {c[2] for c in custom.values()} == {"customProvider"}

    model += append_xys(tmp_path, 4, 300, seed=22)
    monkeypatch.setenv(MIN_CUBE, str(2**62))
    assert dt.optimize().executeCompaction()["metrics"]["numFilesRemoved"] == 4  # another provider's: left alone
    assert {p: c for p, c in _cubes(tmp_path).items() if p in custom} == custom

    monkeypatch.setenv(MIN_CUBE, "1")
    res = dt.optimize().executeCompaction(full=True)["metrics"]
    assert res["numFilesRemoved"] == len(custom)
    after = _cubes(tmp_path)
    assert not set(custom) & set(after) and {c[2] for c in after.values()} == {"liquid"}
    _same_rows(tmp_path, model)


def test_full_without_big_cubes_also_merges_the_small_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta's applyMinZCube with isFull and files to recluster: the small ZCubes of the current columns
    join them, even a single one (the single-ZCube skip only applies when nothing is reclustered)."""
    dt = _clustered(tmp_path, "x")
    model = append_xys(tmp_path, 2, 200, seed=31)
    dt.optimize().executeCompaction()
    alter_clustering(str(tmp_path), [["y"]])
    model += append_xys(tmp_path, 2, 200, seed=32)
    dt.optimize().executeCompaction()  # the two new files become one small ZCube by y
    by_y = {p for p, c in _cubes(tmp_path).items() if c[1] == '["y"]'}
    assert by_y
    version = load_snapshot(str(tmp_path)).version
    assert dt.optimize().executeCompaction()["metrics"]["numFilesRemoved"] == 0  # one small ZCube: nothing
    assert load_snapshot(str(tmp_path)).version == version
    monkeypatch.delenv(MIN_CUBE, raising=False)  # default 100 GB: every ZCube is small
    every = len(_cubes(tmp_path))
    res = dt.optimize().executeCompaction(full=True)["metrics"]
    assert res["numFilesRemoved"] == every  # the x ZCube's files and the small y ZCube's
    after = _cubes(tmp_path)
    assert not by_y & set(after) and {c[1] for c in after.values()} == {'["y"]'}
    assert len({c[0] for c in after.values()}) == 1
    _same_rows(tmp_path, model)


def test_full_refusals_are_typed_and_write_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    (DeltaTable.create(None).location(str(plain)).addColumn("x", "BIGINT").addColumn("y", "BIGINT")
     .addColumn("s", "STRING").execute())
    append_xys(plain, 2, 50, seed=41)
    before = folder_state(plain)
    with pytest.raises(OperationNotAllowedError, match=r"DELTA_OPTIMIZE_FULL_NOT_SUPPORTED.*only supported for clustered tables"):
        DeltaTable.forPath(None, str(plain)).optimize().executeCompaction(full=True)
    with pytest.raises(OperationNotAllowedError, match="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED"):  # FULL before ZORDER BY's checks
        table_statements.optimize(DeltaTable.forPath(None, str(plain)), None, ("x",), full=True)
    assert folder_state(plain) == before

    none = tmp_path / "none"
    _clustered(none, "x")
    append_xys(none, 2, 50, seed=42)
    alter_clustering(str(none), [])  # CLUSTER BY NONE: still a clustered table, with no columns
    before = folder_state(none)
    with pytest.raises(OperationNotAllowedError, match="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED"):
        DeltaTable.forPath(None, str(none)).optimize().executeCompaction(full=True)
    assert folder_state(none) == before

    clustered = tmp_path / "clustered"
    _clustered(clustered, "x")
    append_xys(clustered, 2, 50, seed=43)
    before = folder_state(clustered)
    table = DeltaTable.forPath(None, str(clustered))
    with pytest.raises(OperationNotAllowedError, match="doesn't support partition predicates"):
        table_statements.optimize(table, "x > 1", (), full=True)
    with pytest.raises(OperationNotAllowedError, match="cannot specify ZORDER BY"):  # a clustered table: ZORDER BY's error
        table_statements.optimize(table, None, ("y",), full=True)
    with pytest.raises(TypeError, match="full must be a bool"):
        table.optimize().executeCompaction(full="yes")  # type: ignore[arg-type]
    assert folder_state(clustered) == before


def test_sql_full_parses_as_deltas_grammar() -> None:
    assert parse_optimize("OPTIMIZE t FULL") == OptimizeStatement(parse_optimize("OPTIMIZE t").table, None, (), True)
    stmt = parse_optimize("optimize delta.`/x` full where a = 1 zorder by (b)")
    assert (stmt.table.path, stmt.condition, stmt.zorder_by, stmt.full) == ("/x", "a = 1", ("b",), True)
    assert parse_optimize("OPTIMIZE full").full is False and parse_optimize("OPTIMIZE full").table.name == "full"
    assert parse_optimize("OPTIMIZE full FULL").full is True
    [parsed] = parse_sql("OPTIMIZE '/p' FULL")
    assert isinstance(parsed, OptimizeStatement) and parsed.full and parsed.table.path == "/p"


def test_sql_optimize_full_with_a_session(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dvengine

    dvengine.sql(spark, f"CREATE TABLE delta.`{tmp_path}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (x)")
    model = append_xys(tmp_path, 2, 100, seed=51)
    dvengine.sql(spark, f"OPTIMIZE delta.`{tmp_path}`")
    old = _cubes(tmp_path)
    dvengine.sql(spark, f"ALTER TABLE delta.`{tmp_path}` CLUSTER BY (y)")
    monkeypatch.setenv(MIN_CUBE, "1")
    assert dvengine.sql(spark, f"OPTIMIZE delta.`{tmp_path}`").collect()[0].metrics.numFilesRemoved == 0
    out = dvengine.sql(spark, f"OPTIMIZE delta.`{tmp_path}` FULL").collect()[0]
    assert out.metrics.numFilesRemoved == len(old)
    assert {c[1] for c in _cubes(tmp_path).values()} == {'["y"]'}
    assert _last_commit_info(tmp_path)["operationParameters"]["isFull"] is True
    _same_rows(tmp_path, model)
