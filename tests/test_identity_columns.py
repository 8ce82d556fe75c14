"""Identity columns (``identityColumns``): builders, values assigned on append beyond the high-water
mark (which the commit stores) and to rows MERGE inserts, GENERATED ALWAYS rules, uniqueness under
concurrent writers.

Truth: the values PROTOCOL.md allows (``start + k * step`` beyond the mark, all distinct), the mark
in the field metadata read back by delta-rs, rows read by delta-rs and DuckDB, and a table whose log
is written as Delta Spark writes an identity table after an insert (mark already at 3).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from dml_helpers import spark_conf
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable, IdentityGenerator
from dvengine.errors import (
    InvalidArgumentError,
    MetadataChangedError,
    OperationNotAllowedError,
)
from dvengine.log import latest_version, load_snapshot


def _mark(root: str, column: str = "id") -> Any:
    fields = json.loads(deltalake.DeltaTable(root).schema().to_json())["fields"]
    return next(f for f in fields if f["name"] == column)["metadata"].get("delta.identity.highWaterMark")


def _rows(root: str) -> list[tuple[Any, ...]]:
    got = rows_delta_rs(root, ["id", "v"])
    assert got == rows_duckdb(root, ["id", "v"])
    return got


def _create(root: str, always: bool = True, start: int = 1, step: int = 1) -> DeltaTable:
    spec = IdentityGenerator(start=start, step=step)
    kwargs = {"generatedAlwaysAs": spec} if always else {"generatedByDefaultAs": spec}
    return DeltaTable.create(None).location(root).addColumn("id", "bigint", **kwargs).addColumn("v", "string").execute()


def _delta_spark_identity_table(root: Path) -> str:
    """As Delta Spark leaves `CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING)` after
    `INSERT INTO t (v) VALUES ('a'), ('b'), ('c')`: ids 1..3 in a data file, mark 3 in the schema."""
    os.makedirs(root / "_delta_log")
    pa_table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    import pyarrow.parquet as pq

    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(pa_table, root / name)
    identity = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False}
    schema = lambda mark: {"type": "struct", "fields": [  # noqa: E731
        {"name": "id", "type": "long", "nullable": True,
         "metadata": {**identity, **({} if mark is None else {"delta.identity.highWaterMark": mark})}},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    ]}
    meta = {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
            "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": int(time.time() * 1000)}
    commit0 = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE", "operationParameters": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["appendOnly", "deletionVectors", "identityColumns", "invariants"]}},
        {"metaData": {**meta, "schemaString": json.dumps(schema(None))}},
    ]
    stats = {"numRecords": 3, "minValues": {"id": 1, "v": "a"}, "maxValues": {"id": 3, "v": "c"},
             "nullCount": {"id": 0, "v": 0}}
    commit1 = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE",
                        "operationParameters": {"mode": "Append", "partitionBy": "[]"},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0"}},
        {"metaData": {**meta, "schemaString": json.dumps(schema(3))}},
        {"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                 "modificationTime": int(time.time() * 1000), "dataChange": True, "stats": json.dumps(stats)}},
    ]
    for version, actions in enumerate((commit0, commit1)):
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def test_the_builder_stores_identity_columns_as_delta(tmp_path: Path) -> None:
    always, by_default = str(tmp_path / "a"), str(tmp_path / "b")
    _create(always, start=10, step=5)
    _create(by_default, always=False)
    fields = json.loads(deltalake.DeltaTable(always).schema().to_json())["fields"]
    assert fields[0]["metadata"] == {"delta.identity.start": 10, "delta.identity.step": 5,
                                     "delta.identity.allowExplicitInsert": False}
    fields = json.loads(deltalake.DeltaTable(by_default).schema().to_json())["fields"]
    assert fields[0]["metadata"]["delta.identity.allowExplicitInsert"] is True
    assert "identityColumns" in (deltalake.DeltaTable(always).protocol().writer_features or [])
    legacy = str(tmp_path / "legacy")
    (DeltaTable.create(None).location(legacy).addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator())
     .property("delta.enableDeletionVectors", "false").execute())
    protocol = deltalake.DeltaTable(legacy).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 6)
    with pytest.raises(InvalidArgumentError, match="BIGINT"):
        DeltaTable.create(None).location(str(tmp_path / "c")).addColumn("id", "int", generatedAlwaysAs=IdentityGenerator()) \
            .execute()


def test_appends_assign_values_beyond_the_mark_and_commit_it(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, start=10, step=5)
    dvengine.write(pa.table({"v": ["a", "b", "c"]}), root, mode="append")
    assert _mark(root) == 20
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")
    assert _mark(root) == 25
    assert _rows(root) == sort_rows([(10, "a"), (15, "b"), (20, "c"), (25, "d")])
    down = str(tmp_path / "down")
    _create(down, start=-1, step=-2)
    dvengine.write(pa.table({"v": ["a", "b"]}), down, mode="append")
    assert _mark(down) == -3 and _rows(down) == sort_rows([(-1, "a"), (-3, "b")])


def test_generated_always_refuses_given_values_and_updates(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    table = _create(root)
    dvengine.write(pa.table({"v": ["a", "b"]}), root, mode="append")
    version = latest_version(root)
    with pytest.raises(OperationNotAllowedError, match="GENERATED ALWAYS"):
        dvengine.write(pa.table({"id": pa.array([7], pa.int64()), "v": ["x"]}), root, mode="append")
    with pytest.raises(OperationNotAllowedError, match="IDENTITY"):
        table.update("v = 'a'", {"id": "id + 100"})
    source = pa.table({"id": pa.array([7], pa.int64()), "v": ["z"]})
    with pytest.raises(OperationNotAllowedError, match="GENERATED ALWAYS"):
        table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenNotMatchedInsertAll().execute()
    with pytest.raises(OperationNotAllowedError, match="GENERATED ALWAYS"):
        (table.alias("t").merge(source, "t.v = s.v", source_alias="s")
         .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"}).execute())
    assert latest_version(root) == version
    table.update("v = 'a'", {"v": "'A'"})  # other columns change as usual; the id stays
    table.delete("v = 'b'")
    source = pa.table({"v": ["A"]})
    table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenMatchedUpdate(set={"v": "'AA'"}).execute()
    assert _rows(root) == [(1, "AA")]


def test_by_default_accepts_given_values(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _create(root, always=False)
    dvengine.write(pa.table({"id": pa.array([100], pa.int64()), "v": ["given"]}), root, mode="append")
    dvengine.write(pa.table({"v": ["generated"]}), root, mode="append")
    assert _rows(root) == sort_rows([(100, "given"), (1, "generated")])


def test_concurrent_appends_never_commit_duplicate_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _delta_spark_identity_table(tmp_path / "t")
    assert _mark(root) == 3
    stale = load_snapshot(root)
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")  # the winner takes 4
    from dvengine.commands import write as write_command

    monkeypatch.setattr(write_command, "load_snapshot", lambda _root: stale)  # a writer that read mark 3 too
    with pytest.raises(MetadataChangedError):
        dvengine.write(pa.table({"v": ["e"]}), root, mode="append")
    monkeypatch.undo()
    dvengine.write(pa.table({"v": ["e"]}), root, mode="append")  # retried on fresh state: 5
    rows = _rows(root)
    assert rows == sort_rows([(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")])
    assert _mark(root) == 5


def test_spark_appends_assign_unique_values(spark: Any, tmp_path: Path) -> None:
    """A Spark append whose frame ends in a shuffle, under AQE: the identity values are unique and
    dense beyond the mark (exactly mark + 1 .. mark + n, as the in-process append gives), the mark
    is the last of them, and the frame's upstream runs once. Counted twice over: an accumulator
    bumped by a Python UDF before the shuffle (each input row once, not twice), and Spark's status
    tracker (the 7-task map stage before the shuffle completed in exactly one stage of the write's
    jobs; a rerun would complete it again instead of skipping it). The table keeps no column
    statistics, so the mark cannot be read back from the written files."""
    from pyspark.sql import functions as F

    from dvengine.bench.spark_jobs import count_spark_jobs
    from dvengine.maintenance.properties import set_table_properties

    root = _delta_spark_identity_table(tmp_path / "t")
    # no column statistics: the mark must come from the values handed out, not from the files' max
    set_table_properties(root, {"delta.dataSkippingNumIndexedCols": "0"})
    seen = spark.sparkContext.accumulator(0)

    def tag(i):  # type: ignore[no-untyped-def]  # no hints: pyspark would read them as a pandas UDF's
        seen.add(1)
        return f"s{i}"

    upstream = spark.range(0, 40, 1, numPartitions=7).select(F.udf(tag, "string")("id").alias("v"))
    frame = upstream.repartition(3, "v")
    context = spark.sparkContext
    with spark_conf(spark, "spark.sql.adaptive.enabled", "true"), count_spark_jobs(spark, "identity-append") as jobs:
        group = context.getLocalProperty("spark.jobGroup.id")
        dvengine.write(frame, root, mode="append")
        tracker = context.statusTracker()
        stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup(group) for s in tracker.getJobInfo(j).stageIds]
    assert jobs.jobs is not None and jobs.jobs >= 1
    assert seen.value == 40, f"the frame's upstream ran {seen.value / 40:g} times"
    map_stages = [st for st in stages if st is not None and st.numTasks == 7 and st.numCompletedTasks > 0]
    assert len(map_stages) == 1, f"the 7-task upstream stage completed {len(map_stages)} times"
    rows = _rows(root)
    new = sorted(i for i, v in rows if v.startswith("s"))
    assert new == list(range(4, 44)), new  # unique and dense beyond the old mark (3)
    assert sorted(v for i, v in rows if v.startswith("s")) == sorted(f"s{i}" for i in range(40))
    assert _mark(root) == 43
    dvengine.write(pa.table({"v": ["after"]}), root, mode="append")
    assert [i for i, v in _rows(root) if v == "after"] == [44]


def test_restore_keeps_the_high_water_mark(tmp_path: Path) -> None:
    """RESTORE brings back an older schema, but values handed out since stay used (Delta keeps the mark)."""
    root = str(tmp_path / "t")
    table = _create(root)
    dvengine.write(pa.table({"v": ["a"]}), root, mode="append")  # version 1: id 1
    dvengine.write(pa.table({"v": ["b", "c"]}), root, mode="append")  # version 2: ids 2, 3
    table.restoreToVersion(1)
    assert _mark(root) == 3 and _rows(root) == [(1, "a")]
    dvengine.write(pa.table({"v": ["d"]}), root, mode="append")
    assert _rows(root) == sort_rows([(1, "a"), (4, "d")])  # 2 and 3 are not handed out again


def _grid_beyond(values: list[int], mark: int, step: int, start: int) -> bool:
    """PROTOCOL.md: new values are distinct, on the ``start + k * step`` grid, beyond the old mark."""
    beyond = all(v > mark for v in values) if step > 0 else all(v < mark for v in values)
    return len(set(values)) == len(values) and all((v - start) % step == 0 for v in values) and beyond


@pytest.mark.parametrize("always", [True, False])
@pytest.mark.parametrize(("start", "step"), [(10, 5), (-1, -2)])
def test_merge_inserts_get_identity_values(tmp_path: Path, always: bool, start: int, step: int) -> None:
    root = str(tmp_path / "t")
    table = _create(root, always=always, start=start, step=step)
    dvengine.write(pa.table({"v": ["a", "b"]}), root, mode="append")
    model = dict(_rows(root))  # id -> v
    mark = _mark(root)
    assert mark == start + step

    # explicit values without the identity column; one matched row is updated, two rows inserted
    source = pa.table({"v": ["b", "c", "d"], "w": ["B", "C", "D"]})
    (table.alias("t").merge(source, "t.v = s.v", source_alias="s")
     .whenMatchedUpdate(set={"v": "s.w"}).whenNotMatchedInsert(values={"v": "s.w"}).execute())
    new = [mark + step, mark + 2 * step]  # dense, in source row order
    model[next(i for i, v in model.items() if v == "b")] = "B"
    model.update(zip(new, ["C", "D"]))
    assert _rows(root) == sort_rows(list(model.items()))
    assert _grid_beyond(new, mark, step, start) and _mark(root) == new[-1]
    mark = new[-1]

    # insertAll from a source without the identity column
    source = pa.table({"v": ["C", "e", "f", "g"]})
    table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenNotMatchedInsertAll().execute()
    new = [mark + step * k for k in (1, 2, 3)]
    model.update(zip(new, ["e", "f", "g"]))
    assert _rows(root) == sort_rows(list(model.items()))
    assert _grid_beyond(new, mark, step, start) and _mark(root) == new[-1]

    dvengine.write(pa.table({"v": ["after"]}), root, mode="append")  # an append continues beyond
    model[new[-1] + step] = "after"
    assert _rows(root) == sort_rows(list(model.items())) and _mark(root) == new[-1] + step
    assert len(model) == 8


def test_merge_by_default_keeps_given_values(tmp_path: Path) -> None:
    """Two insert clauses: one gives the id (kept as given, the mark not moved by it), one does not
    (new values from the mark, in source order, only for its rows)."""
    root = str(tmp_path / "t")
    table = _create(root, always=False)
    dvengine.write(pa.table({"v": ["a"]}), root, mode="append")  # id 1, mark 1
    source = pa.table({"n": pa.array([500, 0, 600, 0], pa.int64()), "v": ["p", "q", "r", "s"]})
    (table.alias("t").merge(source, "t.v = s.v", source_alias="s")
     .whenNotMatchedInsert("s.n > 0", values={"id": "s.n", "v": "s.v"})
     .whenNotMatchedInsert(values={"v": "s.v"}).execute())
    assert _rows(root) == sort_rows([(1, "a"), (500, "p"), (2, "q"), (600, "r"), (3, "s")])
    assert _mark(root) == 3
    source = pa.table({"n": pa.array([0, 700], pa.int64()), "v": ["t", "u"]})  # insertAll: the source has the id
    (table.alias("t").merge(source.rename_columns(["id", "v"]), "t.v = s.v", source_alias="s")
     .whenNotMatchedInsertAll().execute())
    assert _rows(root) == sort_rows([(1, "a"), (500, "p"), (2, "q"), (600, "r"), (3, "s"), (0, "t"), (700, "u")])
    assert _mark(root) == 3


def test_merge_insert_and_append_from_one_snapshot_never_duplicate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append and a MERGE insert that drew values from the same mark: whichever commits second
    fails with MetadataChangedError, the table unchanged by it; retried, values stay unique."""
    from dvengine.commands import write as write_command
    from dvengine.engine.local import merge as local_merge

    root = _delta_spark_identity_table(tmp_path / "t")
    table = DeltaTable.forPath(None, root)

    def merge_insert(v: str) -> None:
        table.alias("t").merge(pa.table({"v": [v]}), "t.v = s.v", source_alias="s").whenNotMatchedInsertAll().execute()

    stale = load_snapshot(root)
    dvengine.write(pa.table({"v": ["appended"]}), root, mode="append")  # takes 4
    version = latest_version(root)
    monkeypatch.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)  # no blind commit: it lists (the stub)
    monkeypatch.setattr(local_merge, "load_snapshot", lambda _root: stale)
    with pytest.raises(MetadataChangedError):
        merge_insert("merged")  # would also take 4
    monkeypatch.undo()
    assert latest_version(root) == version
    merge_insert("merged")  # fresh state: 5

    stale = load_snapshot(root)
    merge_insert("merged2")  # takes 6
    version = latest_version(root)
    monkeypatch.setattr(write_command, "load_snapshot", lambda _root: stale)
    with pytest.raises(MetadataChangedError):
        dvengine.write(pa.table({"v": ["appended2"]}), root, mode="append")  # would also take 6
    monkeypatch.undo()
    assert latest_version(root) == version
    dvengine.write(pa.table({"v": ["appended2"]}), root, mode="append")
    assert _rows(root) == sort_rows([(1, "a"), (2, "b"), (3, "c"), (4, "appended"), (5, "merged"), (6, "merged2"),
                                     (7, "appended2")])
    assert _mark(root) == 7


def test_spark_merges_assign_identity_values_on_both_plans(spark: Any, tmp_path: Path) -> None:
    """On the Spark executor a small source runs as file tasks (the in-process MERGE's inserts);
    a large one on the row plan, whose inserts spread over Spark partitions: each partition gets a
    dense range above the mark, so the values are exactly the ones the local executor gives
    (rows may get them in another order), and the commit stores the new mark."""
    from dml_helpers import default_engine

    root = _delta_spark_identity_table(tmp_path / "t")
    table = DeltaTable.forPath(spark, root)
    source = spark.createDataFrame([("c",), ("d",), ("e",)], "v string")
    with default_engine(spark, "spark-files"):
        metrics = table.alias("t").merge(source.alias("s"), "t.v = s.v").whenNotMatchedInsertAll().executeMetrics()
    assert metrics["executionEngine"] == "spark"
    assert _rows(root) == sort_rows([(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]) and _mark(root) == 5

    # the row plan: an update and 11 inserts from a source in 3 partitions; a local twin of the table
    # takes the same MERGE on the local executor
    twin = str(tmp_path / "twin")
    shutil.copytree(root, twin)
    values = ["b", *[f"n{i:02d}" for i in range(11)]]
    source = spark.createDataFrame([(v,) for v in values], "v string").repartition(3)

    def merge(target: DeltaTable, src: Any) -> dict[str, Any]:
        return (target.alias("t").merge(src, "t.v = s.v", source_alias="s")
                .whenMatchedUpdate(set={"v": "concat(s.v, '!')"}).whenNotMatchedInsertAll().executeMetrics())

    with default_engine(spark, "spark-rows"):
        assert merge(table, source)["numTargetRowsInserted"] == 11
    merge(DeltaTable.forPath(None, twin), pa.table({"v": values}))
    got, local = _rows(root), _rows(twin)
    assert sorted(i for i, _ in got) == sorted(i for i, _ in local) == [1, 2, 3, 4, 5, *range(6, 17)]
    assert sorted(v for _, v in got) == sorted(v for _, v in local)
    assert dict(got)[2] == "b!" and _mark(root) == _mark(twin) == 16


def test_spark_row_plan_merge_identity_by_default_negative_step_and_races(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BY DEFAULT, step -2: a given value is kept (and does not move the mark), the other clause's
    rows get ``mark - 2``, ``mark - 4`` ...; a row-plan MERGE that drew values from a mark an append
    has since used fails the conflict check, the table unchanged by it."""
    from dml_helpers import default_engine

    from dvengine.engine.spark import merge_exec

    root = str(tmp_path / "t")
    _create(root, always=False, start=-1, step=-2)
    table = DeltaTable.forPath(spark, root)
    dvengine.write(pa.table({"v": ["a"]}), root, mode="append")  # -1, mark -1
    source = spark.createDataFrame([(500, "p"), (0, "q"), (0, "r"), (600, "s"), (0, "u")], "n long, v string").repartition(2)
    with default_engine(spark, "spark-rows"):
        (table.alias("t").merge(source.alias("s"), "t.v = s.v")
         .whenNotMatchedInsert("s.n > 0", values={"id": "s.n", "v": "s.v"})
         .whenNotMatchedInsert(values={"v": "s.v"}).execute())
    got = dict(_rows(root))
    assert got[500] == "p" and got[600] == "s" and sorted(i for i in got if i < 0) == [-7, -5, -3, -1]
    assert _mark(root) == -7

    stale = load_snapshot(root)
    dvengine.write(pa.table({"v": ["appended"]}), root, mode="append")  # takes -9
    version = latest_version(root)
    monkeypatch.setattr(merge_exec, "load_snapshot", lambda _root: stale)
    with default_engine(spark, "spark-rows"), pytest.raises(MetadataChangedError):
        (table.alias("t").merge(spark.createDataFrame([("late",)], "v string").alias("s"), "t.v = s.v")
         .whenNotMatchedInsertAll().execute())  # would also take -9
    monkeypatch.undo()
    assert latest_version(root) == version and _mark(root) == -9
    assert sorted(i for i, _ in _rows(root)) == [-9, -7, -5, -3, -1, 500, 600]
