"""Change data feed: what dvengine's DELETE / UPDATE / MERGE write, and how changes are read.

The cases re-express Delta Spark's DeleteCDCSuite, UpdateCDCSuite and MergeCDCSuite (the
expected rows are theirs, written out by hand here), on both executors, plus a model-based
sequence whose expected feed comes from an in-memory model. Every feed is checked twice: by
dvengine's reader and by delta-rs' ``load_cdf`` (an independent reader); table contents by
delta-rs and DuckDB.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dml_helpers import folder_state
from interop import rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.changes import read_change_feed_options
from dvengine.errors import CommitConflictError, InvalidArgumentError
from dvengine.log import load_snapshot

ENGINES = ["local", "spark"]
CDF = {"delta.enableChangeDataFeed": "true"}
Row = tuple[Any, ...]


# --- helpers ------------------------------------------------------------------------------------


def _session(request: pytest.FixtureRequest, engine: str) -> Any:
    return request.getfixturevalue("spark") if engine == "spark" else None


def _create(path: Path, rows: Sequence[Row], columns: Sequence[str], types: Sequence[pa.DataType],
            partition_by: list[str] | None = None, files: int = 1, configuration: dict[str, str] | None = None) -> None:
    """A CDF table holding ``rows``, appended in ``files`` commits (so in several files)."""
    chunks = [rows[i::files] for i in range(files)]
    for i, chunk in enumerate(chunks):
        data = pa.table({c: pa.array([r[k] for r in chunk], t) for k, (c, t) in enumerate(zip(columns, types))})
        dvengine.write(data, str(path), mode="append" if i else "error", partitionBy=partition_by,
                       configuration={**CDF, **(configuration or {})} if i == 0 else None)


def _feed_rows(table: pa.Table, columns: Sequence[str]) -> list[Row]:
    names = [*columns, "_change_type", "_commit_version"]
    plain = table.select(names).to_pylist()
    return sorted((tuple(r[n] for n in names) for r in plain), key=repr)


def dvengine_feed(path: Path, start: int, end: int | None, columns: Sequence[str]) -> list[Row]:
    return _feed_rows(DeltaTable.forPath(None, path).changes(start, end), columns)


def delta_rs_feed(path: Path, start: int, end: int | None, columns: Sequence[str]) -> list[Row]:
    import deltalake

    reader = deltalake.DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end)
    table = pa.table(reader.read_all())
    table = table.cast(pa.schema([pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in table.schema]))
    return _feed_rows(table.set_column(table.schema.get_field_index("_commit_version"), "_commit_version",
                                       table.column("_commit_version").cast(pa.int64())), columns)


def check_feed(path: Path, start: int, end: int | None, columns: Sequence[str], expected: Sequence[Row]) -> None:
    want = sorted((tuple(r) for r in expected), key=repr)
    assert dvengine_feed(path, start, end, columns) == want
    assert delta_rs_feed(path, start, end, columns) == want


def check_table(path: Path, columns: Sequence[str], expected: Sequence[Row]) -> None:
    want = sorted(tuple(r) for r in expected)
    assert rows_delta_rs(path, columns) == want
    assert rows_duckdb(path, columns) == want


def _latest(path: Path) -> int:
    return load_snapshot(str(path)).version


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


# --- DELETE (DeleteCDCSuite) -------------------------------------------------------------------------

DELETE_CASES: dict[str, tuple[list[str] | None, str | None, Callable[[Row], bool]]] = {
    # name: (partition columns, condition, which (part, id) rows it deletes)
    "unconditional": (None, None, lambda r: True),
    "conditional covering all rows": (None, "id < 100", lambda r: r[1] < 100),
    "two random rows": (None, "id = 2 OR id = 8", lambda r: r[1] in (2, 8)),
    "unconditional - partitioned": (["part"], None, lambda r: True),
    "all rows by condition - partitioned": (["part"], "id < 1000", lambda r: r[1] < 1000),
    "partition-optimized": (["part"], "part = 3", lambda r: r[0] == 3),
    "some rows of some partitions": (["part"], "id % 7 = 1", lambda r: r[1] % 7 == 1),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["dv", "rewrite"])
@pytest.mark.parametrize("case", sorted(DELETE_CASES))
def test_delete_feed(request: pytest.FixtureRequest, tmp_path: Path, engine: str, mode: str, case: str) -> None:
    partition_by, condition, deletes = DELETE_CASES[case]
    rows = [(i % 10, i) for i in range(100)]
    path = tmp_path / "t"
    _create(path, rows, ["part", "id"], [pa.int64(), pa.int64()], partition_by, files=3)
    DeltaTable.forPath(_session(request, engine), path).delete(condition, mode=mode, engine=engine)
    version = _latest(path)
    check_table(path, ["part", "id"], [r for r in rows if not deletes(r)])
    check_feed(path, version, version, ["part", "id"], [(*r, "delete", version) for r in rows if deletes(r)])


@pytest.mark.parametrize("engine", ENGINES)
def test_delete_shape_matches_delta_spark(request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    """Copy-on-write DELETE: cdc files under _change_data/<partition>/cdc-*.parquet with the data
    columns and _change_type, dataChange false, next to add/remove with dataChange true; a DV-only
    DELETE writes no cdc action (readers derive it from the DVs)."""
    rows = [(i % 3, i, f"n{i}") for i in range(60)]
    path = tmp_path / "t"
    _create(path, rows, ["part", "id", "name"], [pa.int32(), pa.int64(), pa.string()], ["part"])
    t = DeltaTable.forPath(_session(request, engine), path)
    metrics = t.deleteMetrics("id % 5 = 0", mode="rewrite", engine=engine)
    actions = _commit(path, metrics["version"])
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    assert cdc and all(not c["dataChange"] for c in cdc)
    assert all(a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a)
    assert metrics["numAddedChangeFiles"] == len(cdc)
    assert metrics["changeFileBytes"] == sum(c["size"] for c in cdc)
    for c in cdc:
        folder, name = c["path"].rsplit("/", 1)
        assert folder == f"_change_data/part={c['partitionValues']['part']}" and name.startswith("cdc-")
        data = pq.read_table(path / c["path"])
        assert data.column_names == ["id", "name", "_change_type"]  # partition column only in the folder
        assert set(data.column("_change_type").to_pylist()) == {"delete"}
        assert c["size"] == (path / c["path"]).stat().st_size
    protocol = next(a["protocol"] for a in _commit(path, 0) if "protocol" in a)
    assert "changeDataFeed" in protocol["writerFeatures"]

    metrics = t.deleteMetrics("id % 5 = 1", mode="dv", engine=engine)
    actions = _commit(path, metrics["version"])
    assert not [a for a in actions if "cdc" in a]
    assert metrics["numDeletionVectorsAdded"] > 0
    version = metrics["version"]
    check_feed(path, version, version, ["part", "id", "name"], [(*r, "delete", version) for r in rows if r[1] % 5 == 1])


# --- UPDATE (UpdateCDCSuite) -------------------------------------------------------------------------

UPDATE_CASES: dict[str, tuple[str | None, Callable[[Row], bool]]] = {
    "unconditional": (None, lambda r: True),
    "conditional on all rows": ("key < 10", lambda r: r[0] < 10),
    "point": ("key = 1", lambda r: r[0] == 1),
    "partition-optimized": ("part = 1", lambda r: r[2] == 1),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["dv", "rewrite"])
@pytest.mark.parametrize("case", sorted(UPDATE_CASES))
def test_update_feed(request: pytest.FixtureRequest, tmp_path: Path, engine: str, mode: str, case: str) -> None:
    condition, hits = UPDATE_CASES[case]
    rows = [(1, 1, 1), (2, 2, 0), (3, 3, 1), (4, 4, 0)]
    path = tmp_path / "t"
    _create(path, rows, ["key", "value", "part"], [pa.int32(), pa.int32(), pa.int32()], ["part"])
    metrics = DeltaTable.forPath(_session(request, engine), path).updateMetrics(condition, {"value": "-1"}, mode=mode, engine=engine)
    version = metrics["version"]
    assert metrics["numAddedChangeFiles"] >= 1
    check_table(path, ["key", "value", "part"], [(k, -1 if hits((k, v, p)) else v, p) for k, v, p in rows])
    changed = [r for r in rows if hits(r)]
    expected = [(k, v, p, "update_preimage", version) for k, v, p in changed]
    expected += [(k, -1, p, "update_postimage", version) for k, v, p in changed]
    check_feed(path, version, version, ["key", "value", "part"], expected)


@pytest.mark.parametrize("engine", ENGINES)
def test_repeated_point_update_over_a_version_range(request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    rows = [(1, 1), (2, 2), (3, 3), (4, 4)]
    path = tmp_path / "t"
    _create(path, rows, ["key", "value"], [pa.int32(), pa.int32()])
    t = DeltaTable.forPath(_session(request, engine), path)
    v1 = t.updateMetrics("key = 1", {"value": "-1"}, engine=engine)["version"]
    v2 = t.updateMetrics("key = 3", {"value": "-3"}, engine=engine)["version"]
    check_feed(path, v1, v2, ["key", "value"], [
        (1, 1, "update_preimage", v1), (1, -1, "update_postimage", v1),
        (3, 3, "update_preimage", v2), (3, -3, "update_postimage", v2),
    ])
    # from version 0 on: the initial append is read from its add action as inserts
    check_feed(path, 0, None, ["key", "value"], [(*r, "insert", 0) for r in rows] + [
        (1, 1, "update_preimage", v1), (1, -1, "update_postimage", v1),
        (3, 3, "update_preimage", v2), (3, -3, "update_postimage", v2),
    ])


# --- MERGE (MergeCDCSuite) ---------------------------------------------------------------------------

TARGET = [(0, 0), (1, 10), (3, 30)]
MERGE_CASES: dict[str, tuple[list[Row], list[Row], Callable[[Any], Any], list[Row], list[Row]]] = {
    # name: (target, source, clauses, expected table, expected feed without version)
    "insert only": (TARGET, [(1, 1), (2, 2)], lambda m: m.whenNotMatchedInsertAll(),
                    [(0, 0), (1, 10), (2, 2), (3, 30)], [(2, 2, "insert")]),
    "update only": (TARGET, [(1, 1), (2, 2)], lambda m: m.whenMatchedUpdateAll(),
                    [(0, 0), (1, 1), (3, 30)], [(1, 10, "update_preimage"), (1, 1, "update_postimage")]),
    "delete only": (TARGET, [(1, 1), (2, 2)], lambda m: m.whenMatchedDelete("true"),
                    [(0, 0), (3, 30)], [(1, 10, "delete")]),
    "update + delete + insert together": (
        TARGET, [(1, 1), (2, 2), (3, -1)],
        lambda m: m.whenMatchedDelete("s.key = 3").whenMatchedUpdateAll().whenNotMatchedInsertAll(),
        [(0, 0), (1, 1), (2, 2)],
        [(2, 2, "insert"), (1, 10, "update_preimage"), (1, 1, "update_postimage"), (3, 30, "delete")]),
    "unlimited clauses - conditional final branch": (
        [(0, 0), (1, 10), (3, 30), (4, 40), (6, 60)], [(1, 1), (2, 2), (3, -1), (4, 4), (5, 0), (6, 0)],
        lambda m: m.whenMatchedUpdateAll("s.key = 1").whenMatchedUpdate("s.key = 4", {"n": "400"})
        .whenMatchedDelete("s.key = 3").whenMatchedDelete("s.key = 6")
        .whenNotMatchedInsertAll("s.key = 2").whenNotMatchedInsert("s.key = 5", {"key": "50", "n": "50"}),
        [(0, 0), (1, 1), (2, 2), (4, 400), (50, 50)],
        [(2, 2, "insert"), (50, 50, "insert"), (1, 10, "update_preimage"), (1, 1, "update_postimage"),
         (4, 40, "update_preimage"), (4, 400, "update_postimage"), (3, 30, "delete"), (6, 60, "delete")]),
    "unconditional delete only with duplicate matches": (
        [(0, 0), (1, 1)], [(1, 5), (1, 6)], lambda m: m.whenMatchedDelete(),
        [(0, 0)], [(1, 1, "delete")]),
    "not matched by source update and delete": (
        [(0, 0), (1, 10), (3, 30), (7, 70)], [(1, 1)],
        lambda m: m.whenMatchedUpdateAll().whenNotMatchedBySourceUpdate("t.key = 0", {"n": "-5"})
        .whenNotMatchedBySourceDelete("t.key = 7"),
        [(0, -5), (1, 1), (3, 30)],
        [(1, 10, "update_preimage"), (1, 1, "update_postimage"), (0, 0, "update_preimage"),
         (0, -5, "update_postimage"), (7, 70, "delete")]),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["dv", "rewrite"])
@pytest.mark.parametrize("case", sorted(MERGE_CASES))
def test_merge_feed(request: pytest.FixtureRequest, tmp_path: Path, engine: str, mode: str, case: str) -> None:
    target, source, clauses, table_after, feed = MERGE_CASES[case]
    path = tmp_path / "t"
    _create(path, target, ["key", "n"], [pa.int32(), pa.int32()])
    src = pa.table({"key": pa.array([r[0] for r in source], pa.int32()), "n": pa.array([r[1] for r in source], pa.int32())})
    builder = DeltaTable.forPath(_session(request, engine), path).alias("t").merge(src, "t.key = s.key", source_alias="s")
    metrics = clauses(builder.withEngine(engine).withMode(mode)).executeMetrics()
    version = metrics["version"]
    check_table(path, ["key", "n"], table_after)
    check_feed(path, version, version, ["key", "n"], [(*r, version) for r in feed])
    has_cdc = any("cdc" in a for a in _commit(path, version))
    assert has_cdc == (case != "insert only")  # an insert-only MERGE's inserts are read from its adds
    if has_cdc:
        assert metrics["numTargetChangeFilesAdded"] >= 1


# --- model-based sequence ---------------------------------------------------------------------------


def _model_step(rng: random.Random, model: dict[int, Row], step: int) -> tuple[str, Any, Callable[[dict[int, Row]], list[Row]]]:
    """A random operation, its arguments, and the model's (table update, changes) for it."""
    kind = rng.choice(["delete", "update", "merge"])
    k = rng.randrange(2, 6)
    if kind == "delete":
        def apply_delete(m: dict[int, Row]) -> list[Row]:
            gone = [r for r in m.values() if r[0] % k == step % k]
            for r in gone:
                del m[r[0]]
            return [(*r, "delete") for r in gone]
        return kind, f"id % {k} = {step % k}", apply_delete
    if kind == "update":
        def apply_update(m: dict[int, Row]) -> list[Row]:
            out: list[Row] = []
            for r in [r for r in m.values() if r[0] % k == step % k]:
                new = (r[0], f"u{step}", r[2])
                m[r[0]] = new
                out += [(*r, "update_preimage"), (*new, "update_postimage")]
            return out
        return kind, (f"id % {k} = {step % k}", {"name": f"'u{step}'"}), apply_update
    ids = rng.sample(range(150), 12)
    source = [(i, f"m{step}", i % 3) for i in ids]

    def apply_merge(m: dict[int, Row]) -> list[Row]:
        out: list[Row] = []
        for r in source:
            old = m.get(r[0])
            if old is None:
                out.append((*r, "insert"))
            elif old[0] % 4 == 0:
                del m[r[0]]
                out.append((*old, "delete"))
                continue
            else:
                out += [(*old, "update_preimage"), (*r, "update_postimage")]
            m[r[0]] = r
        return out
    return kind, source, apply_merge


@pytest.mark.parametrize("engine", ENGINES)
def test_random_sequence_matches_model(request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    rng = random.Random(13 if engine == "local" else 17)
    rows = [(i, f"n{i % 7}", i % 3) for i in range(100)]
    path = tmp_path / "t"
    _create(path, rows, ["id", "name", "part"], [pa.int64(), pa.string(), pa.int32()], ["part"], files=2)
    model = {r[0]: r for r in rows}
    expected: list[Row] = [(*r, "insert", v) for v in (0, 1) for r in rows[v::2]]
    t = DeltaTable.forPath(_session(request, engine), path)
    for step in range(6 if engine == "local" else 4):
        kind, args, apply = _model_step(rng, model, step)
        mode = rng.choice(["dv", "rewrite", "auto"])
        if kind == "delete":
            metrics = t.deleteMetrics(args, mode=mode, engine=engine)
        elif kind == "update":
            metrics = t.updateMetrics(args[0], args[1], mode=mode, engine=engine)
        else:
            src = pa.table({"id": pa.array([r[0] for r in args], pa.int64()), "name": [r[1] for r in args],
                            "part": pa.array([r[2] for r in args], pa.int32())})
            metrics = (t.alias("t").merge(src, "t.id = s.id", source_alias="s").withEngine(engine).withMode(mode)
                       .whenMatchedDelete("t.id % 4 = 0").whenMatchedUpdateAll().whenNotMatchedInsertAll().executeMetrics())
        changes = apply(model)
        if metrics["version"] is not None:
            expected += [(*c, metrics["version"]) for c in changes]
        else:
            assert not changes
    check_table(path, ["id", "name", "part"], list(model.values()))
    check_feed(path, 0, None, ["id", "name", "part"], expected)


# --- reading ------------------------------------------------------------------------------------------


def test_feed_of_versions_written_by_delta_rs(tmp_path: Path) -> None:
    """Versions another writer produced: delta-rs' own DELETE/UPDATE (with its cdc files) read the same."""
    import deltalake

    path = tmp_path / "t"
    data = pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array([f"x{i}" for i in range(10)])})
    deltalake.write_deltalake(str(path), data, configuration=CDF)
    dt = deltalake.DeltaTable(str(path))
    dt.delete("id = 3")
    dt.update(predicate="id = 5", updates={"v": "'five'"})
    expected = [(i, f"x{i}", "insert", 0) for i in range(10)] + [
        (3, "x3", "delete", 1), (5, "x5", "update_preimage", 2), (5, "five", "update_postimage", 2)]
    check_feed(path, 0, None, ["id", "v"], expected)


def test_with_a_session_the_feed_is_a_spark_dataframe(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path, [(1, 1), (2, 2)], ["key", "value"], [pa.int32(), pa.int32()])
    t = DeltaTable.forPath(spark, path)
    t.update("key = 2", {"value": "20"}, engine="spark")
    df = t.changes(0)
    assert df.columns == ["key", "value", "_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted((r["key"], r["value"], r["_change_type"], r["_commit_version"]) for r in df.collect())
    assert got == sorted([(1, 1, "insert", 0), (2, 2, "insert", 0), (2, 2, "update_preimage", 1), (2, 20, "update_postimage", 1)])


def test_commit_timestamps_and_timestamp_range(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path, [(1, 1), (2, 2)], ["key", "value"], [pa.int32(), pa.int32()])
    t = DeltaTable.forPath(None, path)
    v = t.updateMetrics("key = 2", {"value": "20"})["version"]
    feed = t.changes(0)
    infos = {n: next(a["commitInfo"]["timestamp"] for a in _commit(path, n) if "commitInfo" in a) for n in (0, v)}
    for row in feed.to_pylist():
        assert int(row["_commit_timestamp"].timestamp() * 1000) == infos[row["_commit_version"]]
    only_update = t.changes(startingTimestamp=infos[v])
    assert set(only_update.column("_commit_version").to_pylist()) == {v}


def test_options_function_for_a_data_source(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path, [(1, 1), (2, 2)], ["key", "value"], [pa.int32(), pa.int32()])
    DeltaTable.forPath(None, path).delete("key = 1")
    assert read_change_feed_options(str(path), {"path": str(path)}) is None
    got = read_change_feed_options(str(path), {"readChangeFeed": "true", "startingVersion": "1", "endingversion": "1"})
    assert got is not None
    assert _feed_rows(got, ["key", "value"]) == [(1, 1, "delete", 1)]
    with pytest.raises(InvalidArgumentError, match="startingVersion"):
        read_change_feed_options(str(path), {"readChangeFeed": "true", "startingVersion": "one"})
    with pytest.raises(InvalidArgumentError, match="readChangeFeed"):
        read_change_feed_options(str(path), {"readChangeFeed": "yes", "startingVersion": "0"})


def test_bad_ranges_and_disabled_feed_are_typed_errors(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _create(path, [(1, 1)], ["key", "value"], [pa.int32(), pa.int32()])
    t = DeltaTable.forPath(None, path)
    with pytest.raises(InvalidArgumentError, match="startingVersion 5"):
        t.changes(5)
    with pytest.raises(InvalidArgumentError, match="endingVersion"):
        t.changes(0, -1)
    with pytest.raises(TypeError, match="startingVersion"):
        t.changes("0")
    with pytest.raises(InvalidArgumentError, match="startingVersion or startingTimestamp"):
        t.changes()
    plain = tmp_path / "plain"
    dvengine.write(pa.table({"key": pa.array([1], pa.int32())}), str(plain))
    with pytest.raises(InvalidArgumentError, match="not enabled at version 0"):
        DeltaTable.forPath(None, plain).changes(0)


def test_new_table_protocols() -> None:
    from dvengine.protocol.schema import StructType
    from dvengine.writing.schema_checks import new_table_protocol

    legacy = new_table_protocol(StructType(()), {**CDF, "delta.enableDeletionVectors": "false"})
    assert (legacy.min_reader_version, legacy.min_writer_version) == (1, 4)  # writer 4 implies changeDataFeed
    features = new_table_protocol(StructType(()), {**CDF, "delta.enableDeletionVectors": "true"})
    assert features.min_writer_version == 7 and "changeDataFeed" in (features.writer_features or ())


def test_vacuum_keeps_change_files_in_the_window_and_reclaims_orphans(tmp_path: Path) -> None:
    """``_change_data`` is not hidden from VACUUM (Delta's rule): orphans older than the retention
    go, change files of commits inside the window stay."""
    import os

    path = tmp_path / "t"
    _create(path, [(i, i) for i in range(10)], ["key", "value"], [pa.int32(), pa.int32()])
    t = DeltaTable.forPath(None, path)
    v = t.updateMetrics("key < 5", {"value": "0"})["version"]
    committed = [a["cdc"]["path"] for a in _commit(path, v) if "cdc" in a]
    orphan = path / "_change_data" / "cdc-00000-orphan.c000.snappy.parquet"
    orphan.write_bytes(b"left by a killed writer")
    month_ago = orphan.stat().st_mtime - 30 * 24 * 3600
    os.utime(orphan, (month_ago, month_ago))
    for p in committed:  # old files, but their commit is inside the window
        os.utime(path / p, (month_ago, month_ago))
    t.vacuum()
    assert not orphan.exists()
    assert all((path / p).exists() for p in committed)
    check_feed(path, v, v, ["key", "value"], [(k, k, "update_preimage", v) for k in range(5)] + [(k, 0, "update_postimage", v) for k in range(5)])


# --- failures ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("operation", ["delete-rewrite", "update-dv", "merge-dv"])
def test_conflict_loser_leaves_no_change_files(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, operation: str
) -> None:
    import dvengine.engine.local.merge as local_merge
    from dvengine.api import dml
    from dvengine.engine.spark import merge_exec

    path = tmp_path / "t"
    rows = [(i, f"n{i % 7}", i % 3) for i in range(3000)]
    _create(path, rows, ["id", "name", "part"], [pa.int64(), pa.string(), pa.int32()], ["part"], files=2)
    stale = load_snapshot(str(path))
    # the winner retires rows the loser also changes (3, 5, 2500): a row-level conflict, not a rebase
    DeltaTable.forPath(None, path).delete("id % 997 = 1 OR id IN (3, 5, 2500)", engine="local", mode="dv")
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    for module in (dml, local_merge, merge_exec):
        monkeypatch.setattr(module, "load_snapshot", lambda root: stale)
    before = folder_state(path)
    t = DeltaTable.forPath(_session(request, engine), path)
    source = pa.table({"id": pa.array([5, 2500, 99999], pa.int64()), "name": ["m"] * 3, "part": pa.array([2, 1, 0], pa.int32())})
    with pytest.raises(CommitConflictError):
        if operation == "delete-rewrite":
            t.delete("id % 10 = 3", mode="rewrite", engine=engine)
        elif operation == "update-dv":
            t.update("id % 10 = 3", {"name": "'x'"}, mode="dv", engine=engine)
        else:
            (t.alias("t").merge(source, "t.id = s.id", source_alias="s").withEngine(engine).withMode("dv")
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    assert folder_state(path) == before  # no cdc (or DV, or data) file of the loser is left


@pytest.mark.parametrize("engine", ENGINES)
def test_legacy_protocol_table_without_dvs(request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    """DVs off: the table gets writer version 4 (no table features), DML rewrites, readers agree."""
    path = tmp_path / "t"
    rows = [(i, i * 10) for i in range(8)]
    _create(path, rows, ["key", "value"], [pa.int64(), pa.int64()], configuration={"delta.enableDeletionVectors": "false"})
    protocol = next(a["protocol"] for a in _commit(path, 0) if "protocol" in a)
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (1, 4)
    t = DeltaTable.forPath(_session(request, engine), path)
    v1 = t.updateMetrics("key % 2 = 0", {"value": "value + 1"}, engine=engine)["version"]
    v2 = t.deleteMetrics("key > 5", engine=engine)["version"]
    after_update = {k: (v + 1 if k % 2 == 0 else v) for k, v in rows}
    expected = [(k, v, "update_preimage", v1) for k, v in rows if k % 2 == 0]
    expected += [(k, v + 1, "update_postimage", v1) for k, v in rows if k % 2 == 0]
    expected += [(k, after_update[k], "delete", v2) for k, _ in rows if k > 5]
    check_feed(path, v1, v2, ["key", "value"], expected)
    check_table(path, ["key", "value"], [(k, v) for k, v in after_update.items() if k <= 5])


def test_replace_where_rewrite_feed_has_the_new_rows(tmp_path: Path) -> None:
    """A replaceWhere write on a data column whose delete rewrites a file writes change files (the
    deleted rows), so readers take that version from change files alone: the written rows must be
    in them as ``insert`` rows too, as Delta's WriteIntoDelta writes them. Before, the feed of such
    a version had the deletes only. A replace whose delete only adds DVs writes no change files
    and the feed is derived from the log."""
    path = tmp_path / "t"
    rows = [(i, f"x{i}") for i in range(40)]
    _create(path, rows, ["id", "v"], [pa.int64(), pa.string()])
    new = pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["new", "new"]})
    v1 = dvengine.write(new, str(path), mode="overwrite", replaceWhere="id < 10")  # 25% of the file: rewritten
    assert any("cdc" in a for a in _commit(path, v1))
    expected = [(i, f"x{i}", "delete", v1) for i in range(10)] + [(1, "new", "insert", v1), (2, "new", "insert", v1)]
    check_feed(path, v1, v1, ["id", "v"], expected)
    v2 = dvengine.write(pa.table({"id": pa.array([39], pa.int64()), "v": ["last"]}), str(path), mode="overwrite",
                        replaceWhere="id = 39")  # one row of the rewritten file's 30: below the threshold, a DV
    assert not any("cdc" in a for a in _commit(path, v2))
    check_feed(path, v2, v2, ["id", "v"], [(39, "x39", "delete", v2), (39, "last", "insert", v2)])
    check_table(path, ["id", "v"], [(1, "new"), (2, "new"), *[(i, f"x{i}") for i in range(10, 39)], (39, "last")])


def test_delta_rs_reads_a_removed_file_with_a_dv_inverted(tmp_path: Path) -> None:
    """A version without change files that removes a file carrying a DV (here an overwrite after a
    DV DELETE) has that file's live rows as ``delete`` rows: Delta's CDCReader reads removed files
    with their DV applied, and so does dvengine. delta-rs 1.6's ``load_cdf`` returns the rows the DV
    deletes instead (the row deleted a version earlier, again; none of the live ones), so
    tests/test_cdf_model.py compares such versions with dvengine's reader only. When this fails
    because delta-rs agrees, drop that exception there (``removes_a_file_with_a_dv``)."""
    path = tmp_path / "t"
    _create(path, [(i,) for i in range(6)], ["id"], [pa.int64()])
    t = DeltaTable.forPath(None, path)
    t.delete("id = 0", mode="dv", engine="local")
    version = dvengine.write(pa.table({"id": pa.array([100], pa.int64())}), str(path), mode="overwrite")
    expected = [(i, "delete", version) for i in range(1, 6)] + [(100, "insert", version)]
    assert dvengine_feed(path, version, version, ["id"]) == sorted(expected, key=repr)
    assert delta_rs_feed(path, version, version, ["id"]) == sorted([(0, "delete", version), (100, "insert", version)], key=repr)


def test_merge_commit_that_changed_no_row_reads_as_no_change(tmp_path: Path) -> None:
    """Delta's CDCReader (shouldSkipFileActionsInCommit): a MERGE version without change files whose
    metrics report 0 rows inserted, updated and deleted serves no change rows, although it removed
    and re-added files with dataChange true (older Delta Spark MERGEs rewrote files unchanged).
    Before, dvengine read every copied row as a delete and an insert (as delta-rs 1.6 still does).
    With a metric missing, the version is read from its adds and removes as usual."""
    import shutil

    path = tmp_path / "t"
    _create(path, [(1, 10), (2, 20)], ["key", "value"], [pa.int32(), pa.int32()])
    add = next(a["add"] for a in _commit(path, 0) if "add" in a)
    copy = "part-00000-00000000-0000-0000-0000-000000000001.c000.snappy.parquet"
    shutil.copy(path / add["path"], path / copy)
    zero = {"numTargetRowsInserted": "0", "numTargetRowsUpdated": "0", "numTargetRowsDeleted": "0", "numTargetRowsCopied": "2"}

    def commit(version: int, old: str, new: str, metrics: dict[str, str]) -> None:
        actions = [
            {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "MERGE", "operationParameters": {},
                            "readVersion": version - 1, "isBlindAppend": False, "operationMetrics": metrics}},
            {"remove": {"path": old, "deletionTimestamp": 1, "dataChange": True, "extendedFileMetadata": True,
                        "partitionValues": {}, "size": add["size"]}},
            {"add": {**add, "path": new, "dataChange": True}},
        ]
        (path / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))

    commit(1, add["path"], copy, zero)
    assert dvengine_feed(path, 1, 1, ["key", "value"]) == []  # delta-rs 1.6 reads 2 deletes + 2 inserts here
    assert dvengine_feed(path, 0, 1, ["key", "value"]) == sorted([(1, 10, "insert", 0), (2, 20, "insert", 0)], key=repr)
    commit(2, copy, add["path"], {k: v for k, v in zero.items() if k != "numTargetRowsDeleted"})
    assert dvengine_feed(path, 2, 2, ["key", "value"]) == sorted(
        [(k, v, t, 2) for k, v in [(1, 10), (2, 20)] for t in ("delete", "insert")], key=repr)


@pytest.mark.parametrize("column", ["_change_type", "_commit_version", "_commit_timestamp"])
def test_columns_the_feed_reserves_are_refused(tmp_path: Path, column: str) -> None:
    """Feed rows add ``_change_type``, ``_commit_version`` and ``_commit_timestamp`` to the table's
    columns (change files ``_change_type``): a table column of such a name made the table's DML or
    feed reads fail later with a KeyError (a duplicate field), after the metadata was committed.
    Delta refuses the metadata (CDCReader.checkMetadataChange); so does dvengine now, with nothing
    committed: creating a CDF table with the column, enabling the feed on a table that has it, and
    adding it to a CDF table by schema evolution."""
    from dvengine.errors import ReservedChangeDataColumnsError, ReservedChangeDataColumnsOnWriteError
    from dvengine.maintenance.properties import set_table_properties

    data = pa.table({"id": pa.array([1, 2], pa.int64()), column: pa.array([1, 2], pa.int64())})
    created = tmp_path / "created"
    with pytest.raises(ReservedChangeDataColumnsError, match=f"reserved columns \\[{column}\\]") as caught:
        dvengine.write(data, str(created), configuration=CDF)
    assert caught.value.delta_error_class == "DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"
    assert folder_state(created) == {}

    plain = tmp_path / "plain"
    dvengine.write(data, str(plain))
    before = folder_state(plain)
    with pytest.raises(ReservedChangeDataColumnsError, match=column):
        set_table_properties(str(plain), CDF)
    assert folder_state(plain) == before

    cdf = tmp_path / "cdf"
    _create(cdf, [(1,), (2,)], ["id"], [pa.int64()])
    before = folder_state(cdf)
    with pytest.raises(ReservedChangeDataColumnsOnWriteError, match=column) as on_write:
        dvengine.write(data, str(cdf), mode="append", mergeSchema=True)
    assert on_write.value.delta_error_class == "RESERVED_CDC_COLUMNS_ON_WRITE"
    assert folder_state(cdf) == before
    DeltaTable.forPath(None, cdf).update("id = 1", {"id": "10"}, engine="local")  # the table stays usable
    assert dvengine_feed(cdf, 1, 1, ["id"]) == [(1, "update_preimage", 1), (10, "update_postimage", 1)]


def test_removed_file_without_partition_values_takes_them_from_its_folders(tmp_path: Path) -> None:
    """A ``remove`` without ``partitionValues`` (optional in the protocol; legacy writers leave it
    out) gets them from the file's folder names. The log's path is a URI whose folder names are
    Hive-escaped, so both are undone: ``k=p%252Fq`` is ``p/q``, ``k=a%20b`` is ``a b``, the default
    partition NULL. Before, the feed carried the escaped text (``p%252Fq``) as the value."""
    path = tmp_path / "t"
    rows = [("p/q", 1), ("a b", 2), (None, 3), ("x=y%", 4)]
    _create(path, rows, ["k", "id"], [pa.string(), pa.int64()], ["k"])
    adds = [a["add"] for a in _commit(path, 0) if "add" in a]
    removes = [{"remove": {"path": a["path"], "deletionTimestamp": 1, "dataChange": True}} for a in adds]
    info = {"commitInfo": {"timestamp": 1_700_000_000_001, "operation": "DELETE", "operationParameters": {}}}
    (path / "_delta_log" / f"{1:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in [info, *removes]))
    assert dvengine_feed(path, 1, 1, ["k", "id"]) == sorted([(k, i, "delete", 1) for k, i in rows], key=repr)


def test_replace_where_rewrite_feed_has_the_new_rows_on_spark(spark: Any, tmp_path: Path) -> None:
    """The same as the in-process test, for a Spark DataFrame written through the Spark write path:
    the written rows go into the change files as ``insert`` rows next to the rewrite's deletes."""
    path = tmp_path / "t"
    _create(path, [(i, f"x{i}") for i in range(40)], ["id", "v"], [pa.int64(), pa.string()])
    new = spark.createDataFrame([(1, "new"), (2, "new")], "id BIGINT, v STRING")
    v1 = dvengine.write(new, str(path), mode="overwrite", replaceWhere="id < 10", spark=spark)
    assert any("cdc" in a for a in _commit(path, v1))
    expected = [(i, f"x{i}", "delete", v1) for i in range(10)] + [(1, "new", "insert", v1), (2, "new", "insert", v1)]
    check_feed(path, v1, v1, ["id", "v"], expected)
    check_table(path, ["id", "v"], [(1, "new"), (2, "new"), *[(i, f"x{i}") for i in range(10, 40)]])
