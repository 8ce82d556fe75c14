"""Generated columns (``generatedColumns``): created by the builders, computed on write, recomputed by
UPDATE and MERGE, provided values checked, on both executors.

Truth: a model computing the expression in Python, delta-rs and DuckDB reading every result, and a
table whose log is written as Delta Spark writes CREATE TABLE with a generated column (the
expression in the field's ``delta.generationExpression``, the feature in the protocol).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.errors import ConstraintViolationError, InvalidArgumentError, UnsupportedFeatureError
from dvengine.log import latest_version, load_snapshot

COLUMNS = ["id", "a", "b"]


def _b(id_: int, a: int | None) -> int | None:
    return None if a is None else a * 2 + id_


def _model(rows: list[tuple[int, int | None]]) -> list[tuple[Any, ...]]:
    return [(i, a, _b(i, a)) for i, a in rows]


def _delta_spark_created(root: Path, dvs: bool = True) -> str:
    """commit 0 as Delta Spark writes `CREATE TABLE t (id BIGINT, a BIGINT, b BIGINT GENERATED ALWAYS AS (a * 2 + id))`."""
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "a", "type": "long", "nullable": True, "metadata": {}},
        {"name": "b", "type": "long", "nullable": True, "metadata": {"delta.generationExpression": "a * 2 + id"}},
    ]}
    protocol: dict[str, Any] = (
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
         "writerFeatures": ["appendOnly", "deletionVectors", "generatedColumns", "invariants"]}
        if dvs else {"minReaderVersion": 1, "minWriterVersion": 4}
    )
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "CREATE TABLE",
                        "operationParameters": {"partitionBy": "[]", "clusterBy": "[]", "description": None,
                                                "isManaged": "false", "properties": "{}"},
                        "isolationLevel": "Serializable", "isBlindAppend": True, "operationMetrics": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"protocol": protocol},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true"} if dvs else {},
                      "createdTime": int(time.time() * 1000)}},
    ]
    os.makedirs(root / "_delta_log")
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def _readers(root: str, expected: list[tuple[Any, ...]]) -> None:
    want = sort_rows(expected)
    assert rows_delta_rs(root, COLUMNS) == want
    assert rows_duckdb(root, COLUMNS) == want


def _ints(**columns: list[Any]) -> pa.Table:
    return pa.table({k: pa.array(v, pa.int64()) for k, v in columns.items()})


# --- builders ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dvs", [True, False])
def test_the_builder_stores_the_expression_and_the_feature(tmp_path: Path, dvs: bool) -> None:
    root = str(tmp_path / "t")
    (DeltaTable.create(None).location(root).addColumn("id", "bigint").addColumn("a", "bigint")
     .addColumn("b", "bigint", generatedAlwaysAs="a * 2 + id").property("delta.enableDeletionVectors", str(dvs).lower())
     .execute())
    table = deltalake.DeltaTable(root)
    field = json.loads(table.schema().to_json())["fields"][2]
    assert field["metadata"] == {"delta.generationExpression": "a * 2 + id"}
    protocol = table.protocol()
    if dvs:
        assert protocol.min_writer_version == 7 and "generatedColumns" in (protocol.writer_features or [])
    else:
        assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 4)


def test_the_builder_refuses_bad_generation_expressions(tmp_path: Path) -> None:
    builder = DeltaTable.create(None).location(str(tmp_path / "t")).addColumn("a", "bigint")
    with pytest.raises(InvalidArgumentError, match="reads generated column"):
        (builder.addColumn("b", "bigint", generatedAlwaysAs="a + 1").addColumn("c", "bigint", generatedAlwaysAs="b + 1")
         .execute())
    with pytest.raises(Exception, match="nope"):
        DeltaTable.create(None).location(str(tmp_path / "t")).addColumn("a", "bigint") \
            .addColumn("b", "bigint", generatedAlwaysAs="nope + 1").execute()
    assert not os.path.exists(tmp_path / "t" / "_delta_log")


# --- a table as Delta Spark creates it, changed by dvengine ------------------------------------------


def test_local_write_update_merge_delete_keep_generated_values(tmp_path: Path) -> None:
    root = _delta_spark_created(tmp_path / "t")
    rows: list[tuple[int, int | None]] = [(1, 10), (2, 20), (3, 30), (4, 40)]
    dvengine.write(_ints(id=[1, 2, 3, 4], a=[10, 20, 30, 40]), root, mode="append")  # b computed
    dvengine.write(_ints(id=[5], a=[50], b=[105]), root, mode="append")  # a correct b is accepted
    rows.append((5, 50))
    with pytest.raises(ConstraintViolationError, match="generated column b"):
        dvengine.write(_ints(id=[6], a=[60], b=[0]), root, mode="append")
    table = DeltaTable.forPath(None, root)
    table.update("id = 1", {"a": "a + 1"}, engine="local")  # b follows a
    rows = [(1, 11) if r[0] == 1 else r for r in rows]
    with pytest.raises(ConstraintViolationError, match="generated column b"):
        table.update("id = 2", {"b": "7"}, engine="local")
    table.delete("id = 3", mode="dv", engine="local")
    rows = [r for r in rows if r[0] != 3]
    source = _ints(id=[2, 7], a=[5, 70])
    (table.alias("t").merge(source, "t.id = s.id", source_alias="s").whenMatchedUpdate(set={"a": "s.a + t.a"})
     .whenNotMatchedInsertAll().withEngine("local").execute())
    rows = [(2, 25) if r[0] == 2 else r for r in rows] + [(7, 70)]
    version = latest_version(root)
    bad = _ints(id=[8], a=[1], b=[1])
    with pytest.raises(ConstraintViolationError, match="generated column b"):
        table.alias("t").merge(bad, "t.id = s.id", source_alias="s").whenNotMatchedInsertAll().withEngine("local").execute()
    assert latest_version(root) == version
    _readers(root, _model(rows))


def test_spark_write_and_update_compute_generated_values(spark: Any, tmp_path: Path) -> None:
    root = _delta_spark_created(tmp_path / "t")
    dvengine.write(spark.createDataFrame([(1, 10), (2, 20), (3, 30)], "id bigint, a bigint"), root, mode="append")
    rows = [(1, 10), (2, 20), (3, 30)]
    with pytest.raises(ConstraintViolationError, match="generated column b"):
        dvengine.write(spark.createDataFrame([(4, 1, 1)], "id bigint, a bigint, b bigint"), root, mode="append")
    table = DeltaTable.forPath(spark, root)
    for strategy, key in (("files", 1), ("rows", 2)):
        spark.conf.set("dvengine.spark.dmlStrategy", strategy)
        try:
            table.update(f"id = {key}", {"a": "a * 3"}, engine="spark")
        finally:
            spark.conf.unset("dvengine.spark.dmlStrategy")
        rows = [(i, a * 3) if i == key and a is not None else (i, a) for i, a in rows]
    source = spark.createDataFrame([(3, 1), (9, 9)], "id bigint, a bigint")
    (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"a": "s.a"})
     .whenNotMatchedInsertAll().withEngine("spark").execute())
    rows = [(3, 1) if r[0] == 3 else r for r in rows] + [(9, 9)]
    _readers(root, _model(rows))


def test_a_generation_expression_only_spark_evaluates(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    (DeltaTable.create(spark).location(root).addColumn("id", "bigint").addColumn("name", "string")
     .addColumn("h", "string", generatedAlwaysAs="initcap(name)").execute())  # Delta allows initcap; Arrow does not evaluate it
    dvengine.write(spark.createDataFrame([(1, "a")], "id bigint, name string"), root, mode="append")
    got = [(r["id"], r["h"]) for r in DeltaTable.forPath(None, root).toArrow().to_pylist()]
    assert got == [(1, "A")]
    with pytest.raises(UnsupportedFeatureError, match="generated column h.*INITCAP"):  # UPDATE checks rows on Arrow
        DeltaTable.forPath(None, root).update("id = 1", {"name": "name"})
    DeltaTable.forPath(None, root).delete("id = 1")  # DELETE writes no new rows
    assert load_snapshot(root).version == 2


def test_update_computes_a_generated_column_from_the_stored_value(spark: Any, tmp_path: Path) -> None:
    """Delta derives generated values from the updated row, after the assignment's cast to the
    column type: ``a = 2.7`` on an INT ``a`` stores 2, so ``g = a * 2`` is 4 (it used to be computed
    from the raw 2.7 as 5, and the write failed its own generated-column check)."""
    root = str(tmp_path / "t")
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id INT, a INT, g INT GENERATED ALWAYS AS (a * 2)) USING delta")
    dvengine.sql(None, f"INSERT INTO delta.`{root}` (id, a) VALUES (1, 1), (2, 5)")
    table = DeltaTable.forPath(spark, root)
    table.update("id = 1", {"a": "2.7"})  # a decimal into INT: Spark's cast (the local evaluator refuses it)
    table.update("id = 2", {"a": "a + 1"})
    (table.alias("t").merge(spark.createDataFrame([(2, 7.6), (3, 1.2)], "id int, v double").alias("s"), "t.id = s.id")
     .whenMatchedUpdate(set={"a": "s.v"}).whenNotMatchedInsert(values={"id": "s.id", "a": "s.v"}).execute())
    expected = [(1, 2, 4), (2, 7, 14), (3, 1, 2)]  # MERGE casts the same way: 7.6 -> 7, 1.2 -> 1
    assert sort_rows([(r["id"], r["a"], r["g"]) for r in DeltaTable.forPath(None, root).toArrow().to_pylist()]) == expected
    assert rows_delta_rs(root, ["id", "a", "g"]) == expected


# --- features still not implemented ------------------------------------------------------------------


@pytest.mark.parametrize(
    "feature",
    ["icebergCompatV1"],  # clustering and domainMetadata: tests/test_clustering.py; rowTracking: tests/test_row_tracking.py; typeWidening: tests/test_type_widening.py
)
def test_unimplemented_writer_features_are_refused_before_any_write(tmp_path: Path, feature: str) -> None:
    root = _delta_spark_created(tmp_path / "t")
    dvengine.write(_ints(id=[1, 2], a=[1, 2]), root, mode="append")
    log = Path(root, "_delta_log")
    snapshot = load_snapshot(root)
    p = snapshot.protocol
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": list(p.reader_features or ()),
                "writerFeatures": sorted({*(p.writer_features or ()), feature})}
    (log / f"{2:020d}.json").write_text(json.dumps({"commitInfo": {"timestamp": 1}}) + "\n"
                                         + json.dumps({"protocol": protocol}) + "\n")
    files = sorted(str(f) for f in Path(root).rglob("*"))
    table = DeltaTable.forPath(None, root)
    for attempt in (
        lambda: dvengine.write(_ints(id=[3], a=[3]), root, mode="append"),
        lambda: table.delete("id = 1", engine="local"),
        lambda: table.update("id = 1", {"a": "5"}, engine="local"),
    ):
        with pytest.raises(UnsupportedFeatureError, match=feature):
            attempt()
    assert sorted(str(f) for f in Path(root).rglob("*")) == files


# --- partition pruning through a generated date partition column --------------------------------------


def _delta_spark_partitioned_by_day(root: Path) -> tuple[str, list[tuple[int, dt.datetime]]]:
    """A table partitioned by `day DATE GENERATED ALWAYS AS (CAST(ts AS DATE))`, files laid out as Delta Spark
    writes them (one folder per day, `day` only in the path and partitionValues, UTC session)."""
    import pyarrow.parquet as pq

    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {"delta.generationExpression": "CAST(ts AS DATE)"}},
    ]}
    os.makedirs(root / "_delta_log")
    rows = [(i, dt.datetime(2024, 3, 1 + i // 4, (i % 4) * 6, tzinfo=dt.UTC)) for i in range(20)]  # 5 days x 4
    adds = []
    for day in sorted({ts.date() for _, ts in rows}):
        part = [(i, ts) for i, ts in rows if ts.date() == day]
        folder = root / f"day={day.isoformat()}"
        folder.mkdir()
        name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
        pq.write_table(pa.table({"id": pa.array([i for i, _ in part], pa.int64()),
                                 "ts": pa.array([ts for _, ts in part], pa.timestamp("us", tz="UTC"))}), folder / name)
        stats = {"numRecords": len(part), "minValues": {"id": part[0][0]}, "maxValues": {"id": part[-1][0]},
                 "nullCount": {"id": 0, "ts": 0}}
        adds.append({"add": {"path": f"day={day.isoformat()}/{name}", "partitionValues": {"day": day.isoformat()},
                             "size": (folder / name).stat().st_size, "modificationTime": 0, "dataChange": True,
                             "stats": json.dumps(stats)}})
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors", "generatedColumns"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": ["day"],
                      "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": 0}},
        *adds,
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root), rows


@pytest.mark.parametrize(
    ("condition", "keep", "max_candidate_files"),
    [
        ("ts >= '2024-03-04 00:00:00'", lambda ts: ts < dt.datetime(2024, 3, 4, tzinfo=dt.UTC), 3),
        ("ts < '2024-03-02 12:00:00' AND id >= 0", lambda ts: ts >= dt.datetime(2024, 3, 2, 12, tzinfo=dt.UTC), 3),
        ("ts = '2024-03-03 06:00:00'", lambda ts: ts != dt.datetime(2024, 3, 3, 6, tzinfo=dt.UTC), 3),
        ("'2024-03-05T01:00:00+09:00' > ts", lambda ts: ts >= dt.datetime(2024, 3, 4, 16, tzinfo=dt.UTC), 5),
    ],
)
def test_conditions_on_the_source_column_prune_generated_partitions(
    tmp_path: Path, condition: str, keep: Any, max_candidate_files: int
) -> None:
    root, rows = _delta_spark_partitioned_by_day(tmp_path / "t")
    metrics = DeltaTable.forPath(None, root).deleteMetrics(condition, engine="local")
    assert metrics["numCandidateFiles"] <= max_candidate_files
    assert metrics["numCandidateFiles"] + metrics["numFilesPrunedByPartition"] + metrics["numFilesSkippedByStats"] == 5
    want = sorted(i for i, ts in rows if keep(ts))
    assert sorted(r[0] for r in rows_delta_rs(root, ["id"])) == want
    assert sorted(r[0] for r in rows_duckdb(root, ["id"])) == want
