"""OPTIMIZE ... ZORDER BY (issue #22 item 2): the curve maths against Delta's own test vectors and
geometric truth, rows against a model and three other readers, skipping measured through
delta-rs's view of the stats, the commit as Delta records it, and Delta's refusals."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from itertools import pairwise, product
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from interop import rows_arrow, rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local.curves import curve_keys, interleave_bits, range_ids
from dvengine.errors import InvalidArgumentError, InvalidPredicateError, SqlParseError
from dvengine.expressions import parse_predicate
from dvengine.read.scan_plan import plan_scan
from dvengine.sqlcmd.tokens import parse_optimize

MAX_FILE_SIZE = "SPARK_DATABRICKS_DELTA_OPTIMIZE_MAXFILESIZE"


def _u(values: Sequence[int]) -> Any:
    return np.array(values, dtype=np.uint64)


# --- curves -----------------------------------------------------------------------------------


def test_interleave_bits_matches_deltas_test_vectors() -> None:
    # delta-io/delta InterleaveBitsSuite "2 inputs", "3 inputs" and "1 input"
    two = interleave_bits([_u([0x000FF0FF]), _u([0xFFF00F00])])
    assert list(two[0]) == [0x55, 0x55, 0x55, 0xAA, 0xAA, 0x55, 0xAA, 0xAA]
    three = interleave_bits([_u([0xFF00]), _u([0x00FF]), _u([0])])
    assert list(three[0]) == [0, 0, 0, 0, 0, 0, 0x92, 0x49, 0x24, 0x49, 0x24, 0x92]
    one = interleave_bits([_u([0x12345678])])
    assert bytes(one[0]) == (0x12345678).to_bytes(4, "big")


@pytest.mark.parametrize(("dims", "bits"), [(2, 3), (3, 2), (2, 1)])
def test_hilbert_keys_visit_every_cell_once_through_neighbours(dims: int, bits: int) -> None:
    """A Hilbert curve is a bijection on the grid whose consecutive cells differ by one step."""
    cells = list(product(range(1 << bits), repeat=dims))
    ids = [_u([c[d] for c in cells]) for d in range(dims)]
    keys = [int.from_bytes(bytes(row), "big") for row in curve_keys(ids, "hilbert", bits)]
    assert len(set(keys)) == len(cells)
    path = [cells[i] for i in sorted(range(len(cells)), key=lambda i: keys[i])]
    assert all(sum(abs(a - b) for a, b in zip(p, q, strict=True)) == 1 for p, q in pairwise(path))


def test_zorder_keys_order_cells_as_bit_interleaving_does() -> None:
    cells = list(product(range(4), repeat=2))
    ids = [_u([c[0] for c in cells]), _u([c[1] for c in cells])]
    keys = [bytes(r) for r in curve_keys(ids, "zorder", 2)]

    def model(x: int, y: int) -> int:  # x's bit first at every level
        return sum(((x >> b) & 1) << (2 * b + 1) | ((y >> b) & 1) << (2 * b) for b in range(2))

    assert sorted(range(16), key=lambda i: keys[i]) == sorted(range(16), key=lambda i: model(*cells[i]))


def test_range_ids_are_equal_share_ranks_with_nulls_first() -> None:
    values: list[Any] = [5, None, 3, 3, 9, 1, None, 7]
    ids = range_ids(pa.chunked_array([values[:3], values[3:]]), 4)
    n = len(values)
    order = sorted(values, key=lambda v: (v is not None, v))
    model = [order.index(v) * 4 // n for v in values]  # rank of the first equal value, nulls first
    assert ids.tolist() == model
    strings = range_ids(pa.array(["b", "a", "c", "a"]), 1000)
    assert strings.tolist() == [500, 0, 750, 0]


# --- OPTIMIZE ZORDER BY on tables ---------------------------------------------------------------


def _random_table(path: Path, batches: int = 8, rows: int = 2000, partitioned: bool = False) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(7)
    model: list[tuple[Any, ...]] = []
    for b in range(batches):
        x = rng.integers(0, 1000, rows).tolist()
        y = rng.integers(0, 1000, rows).tolist()
        s = [f"s{b}-{i}" for i in range(rows)]
        p = ["a" if b % 2 else "b"] * rows
        data = {"x": x, "y": y, "s": s, "p": p}
        dvengine.write(pa.table(data), str(path), mode="append", partitionBy=["p"] if partitioned else None)
        model.extend(zip(x, y, s, p, strict=True))
    return model


def _files_touched(path: Path, column: str, value: int) -> int:
    """Files whose min/max on ``column`` (as delta-rs reads the stats) admit ``column = value``."""
    from deltalake import DeltaTable as RsTable

    adds = pa.table(RsTable(str(path)).get_add_actions(flatten=True)).to_pylist()
    return sum(1 for a in adds if a[f"min.{column}"] <= value <= a[f"max.{column}"])


def _last_commit(path: Path) -> list[dict[str, Any]]:
    log = sorted((path / "_delta_log").glob("*.json"))[-1]
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_zorder_keeps_rows_and_makes_point_lookups_skip_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _random_table(tmp_path)
    dt = DeltaTable.forPath(None, tmp_path)
    dt.delete("x % 10 = 0", mode="dv")
    model = [r for r in model if r[0] % 10 != 0]
    before = dt.snapshot()
    assert len(before.files) == 8 and all(f.deletion_vector is not None for f in before.files)
    monkeypatch.setenv(MAX_FILE_SIZE, str(sum(f.size for f in before.files) // 16))  # 16 files: a 4 x 4 grid
    probes = [17, 333, 501, 777, 989]
    touched_before = {c: [_files_touched(tmp_path, c, v) for v in probes] for c in ("x", "y")}
    assert all(n == 8 for counts in touched_before.values() for n in counts)  # random data: no skipping

    res = dt.optimize().executeZOrderBy("x", "Y")["metrics"]

    snap = dt.snapshot()
    assert res["numFilesRemoved"] == 8 and res["numFilesAdded"] == len(snap.files) == 16
    assert res["zOrderStats"]["strategyName"] == "all"
    assert res["zOrderStats"]["inputOtherFiles"] == {"num": 8, "size": sum(f.size for f in before.files)}
    assert res["zOrderStats"]["numOutputCubes"] == 1
    assert res["deletionVectorStats"]["numDeletionVectorsRemoved"] == 8
    assert all(f.deletion_vector is None for f in snap.files)
    cols = ["x", "y", "s", "p"]
    want = sort_rows(model)
    assert rows_arrow(tmp_path, cols) == rows_delta_rs(tmp_path, cols) == rows_duckdb(tmp_path, cols) == want
    # both columns now prune: a point on either touches ~4 of the 16 files (one row of the grid,
    # plus a neighbour where a file boundary cuts a cell); before, all of them
    for column in ("x", "y"):
        after = [_files_touched(tmp_path, column, v) for v in probes]
        assert max(after) <= 5, (column, after)
        # and dvengine's own planner agrees with what delta-rs sees
        for v, n in zip(probes, after, strict=True):
            assert len(plan_scan(snap, parse_predicate(f"{column} = {v}", snap.schema), None).files) == n

    actions = _last_commit(tmp_path)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"] == {"predicate": "[]", "zOrderBy": '["x","y"]', "clusterBy": "[]", "auto": False}
    assert info["operationMetrics"]["numRemovedFiles"] == "8" and info["operationMetrics"]["numAddedFiles"] == "16"
    assert info["operationMetrics"]["numDeletionVectorsRemoved"] == "8"
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)


def test_zorder_where_rewrites_only_the_selected_partition_even_a_single_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _random_table(tmp_path, batches=3, rows=500, partitioned=True)  # p=b: 2 files, p=a: 1 file
    dt = DeltaTable.forPath(None, tmp_path)
    others = {f.path for f in dt.snapshot().files if f.partition_values["p"] == "b"}
    res = dt.optimize().where("p = 'a'").executeZOrderBy(["y"])["metrics"]
    assert res["numFilesRemoved"] == 1 and res["numFilesAdded"] == 1 and res["partitionsOptimized"] == 1
    snap = dt.snapshot()
    assert {f.path for f in snap.files if f.partition_values["p"] == "b"} == others
    (rewritten,) = [f for f in snap.files if f.partition_values["p"] == "a"]
    ys = pa.table({"y": [r[1] for r in model if r[3] == "a"]})["y"].to_pylist()
    got = dt.toArrow(condition="p = 'a'", columns=["y"])["y"].to_pylist()
    assert sorted(got) == sorted(ys)
    # within the rewritten file rows follow the curve: on one column that is ascending order
    import pyarrow.parquet as pq

    stored = pq.read_table(os.path.join(tmp_path, *rewritten.path.split("/")), columns=["y"])["y"].to_pylist()
    assert stored == sorted(stored)
    cols = ["x", "y", "s", "p"]
    assert rows_delta_rs(tmp_path, cols) == rows_duckdb(tmp_path, cols) == sort_rows(model)
    info = next(a["commitInfo"] for a in _last_commit(tmp_path) if "commitInfo" in a)
    assert info["operationParameters"]["predicate"] == '["`p` = \'a\'"]'
    assert info["operationParameters"]["zOrderBy"] == '["y"]'


def _folder(path: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, path)] = Path(full).read_bytes()
    return out


def test_zorder_refusals_name_the_column_and_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _random_table(tmp_path, batches=2, rows=50, partitioned=True)
    dt = DeltaTable.forPath(None, tmp_path)
    state = _folder(tmp_path)
    with pytest.raises(InvalidArgumentError, match="p is a partition column. Z-Ordering can only be performed on data columns"):
        dt.optimize().executeZOrderBy("x", "p")
    with pytest.raises(InvalidArgumentError, match="Z-Ordering column nope does not exist in data schema"):
        dt.optimize().executeZOrderBy("nope")
    with pytest.raises(InvalidPredicateError, match="non-partition column"):
        dt.optimize().where("x = 1").executeZOrderBy("y")
    with pytest.raises(TypeError, match="Z-order column must be str"):
        dt.optimize().executeZOrderBy("x", 1)  # type: ignore[arg-type]
    assert _folder(tmp_path) == state
    # no columns: Delta runs a plain compaction, which leaves a partition's lone file alone
    res = dt.optimize().executeZOrderBy()["metrics"]
    assert res["zOrderStats"] is None and res["numFilesRemoved"] == 0 and res["totalConsideredFiles"] == 2
    assert _folder(tmp_path) == state

    stats_path = tmp_path / "few_stats"
    dvengine.write(pa.table({"x": [3, 1, 2], "y": [1, 2, 3]}), str(stats_path), mode="append",
                   configuration={"delta.dataSkippingNumIndexedCols": "1"})
    few = DeltaTable.forPath(None, stats_path)
    state = _folder(stats_path)
    with pytest.raises(InvalidArgumentError, match=r"Z-Ordering on \[y\] will be ineffective.*checkStatsCollection"):
        few.optimize().executeZOrderBy("x", "y")
    assert _folder(stats_path) == state
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_OPTIMIZE_ZORDER_CHECKSTATSCOLLECTION_ENABLED", "false")
    res = few.optimize().executeZOrderBy("x", "y")["metrics"]
    assert res["numFilesAdded"] == 1
    assert sort_rows(rows_delta_rs(stats_path, ["x", "y"])) == [(1, 2), (2, 3), (3, 1)]


def test_sql_optimize_zorder_by_parses_deltas_grammar() -> None:
    s = parse_optimize("OPTIMIZE delta.`/t` ZORDER BY (a, b)")
    assert s.table.path == "/t" and s.condition is None and s.zorder_by == ("a", "b")
    s = parse_optimize("OPTIMIZE '/t' WHERE day >= '2024-01-01' AND day < '2024-02-01' ZORDER BY a")
    assert s.condition == "day >= '2024-01-01' AND day < '2024-02-01'" and s.zorder_by == ("a",)
    s = parse_optimize("optimize db.t where p = 'zorder by' zorder by (`weird col`, x.y)")
    assert s.condition == "p = 'zorder by'" and s.zorder_by == ("weird col", "x.y")
    for bad in ("OPTIMIZE t ZORDER BY", "OPTIMIZE t ZORDER BY (a", "OPTIMIZE t ZORDER BY (a) extra", "OPTIMIZE t ZORDER a"):
        with pytest.raises(SqlParseError):
            parse_optimize(bad)


def test_zorder_with_a_session_returns_deltas_frame_and_sql_runs_it(spark: Any, tmp_path: Path) -> None:
    model = _random_table(tmp_path, batches=4, rows=300)
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", "8000")
    try:
        row = DeltaTable.forPath(spark, tmp_path).optimize().executeZOrderBy("x").collect()[0]
        assert row.path == str(tmp_path)
        assert row.metrics.zOrderStats.strategyName == "all"
        assert row.metrics.zOrderStats.inputOtherFiles.num == row.metrics.numFilesRemoved == 4
        out = dvengine.sql(spark, f"OPTIMIZE delta.`{tmp_path}` ZORDER BY (y, x)").collect()[0]
        assert out.metrics.numFilesRemoved == row.metrics.numFilesAdded
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    info = DeltaTable.forPath(None, tmp_path).history(1)[0]
    assert info["operationParameters"]["zOrderBy"] == '["y","x"]'
    assert rows_delta_rs(tmp_path, ["x", "y", "s", "p"]) == sort_rows(model)
