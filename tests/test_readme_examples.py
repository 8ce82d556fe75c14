"""Every Python example in README.md runs as written and does what its comments say.

The examples are executed from README.md itself (``readme_blocks``), with ``/data/...`` folders
mapped to temporary ones and the names an example takes for granted (``df``, ``updates``,
``arrow_table``, ``stream`` ...) made by the test first. The outcome is then compared with an
in-memory model of the same operations (pandas), not with dvengine's own reading of its intent.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from interop import sort_rows
from raw_log import commit_actions
from readme_blocks import block, python_blocks, run_block
from s3_support import S3Server, no_ambient_credentials, rows_delta_rs_s3, s3_server  # noqa: F401 (fixtures)

import dvengine
from dvengine import DeltaTable
from dvengine.errors import OperationNotAllowedError
from dvengine.storage.catalog import WAREHOUSE_OVERRIDE_CONF, unregister_table

DAY = dt.date(2024, 1, 1)
COLUMNS = ["id", "user_id", "status", "day"]
SCHEMA = pa.schema([("id", pa.int64()), ("user_id", pa.int64()), ("status", pa.string()), ("day", pa.date32())])
# ids 1..200: user 42 owns ids 1 and 3 (the GDPR delete), ids 1, 3, 4 are 'new' (the correction);
# enough rows that a DML changing one or two of them writes a deletion vector, not a rewrite
SEED = pd.DataFrame({"id": range(1, 201), "user_id": [42 if i in (1, 3) else 1000 + i for i in range(1, 201)],
                     "status": ["new" if i in (1, 3, 4) else "old" for i in range(1, 201)], "day": [DAY] * 200})
# the CDC batch: id 2 changed, id 1000 new
UPDATES = pd.DataFrame({"id": [2, 1000], "user_id": [7, 11], "status": ["changed", "inserted"], "day": [DAY] * 2})

EXAMPLES = {
    "using": "from dvengine import DeltaTable",
    "evolution": "dvengine.write(df, path, mode=\"append\", mergeSchema=True)",
    "format": "dvengine.register(spark)",
    "streaming": "app_id = \"events-upsert\"",
    "maintenance": "t.optimize().where(",
    "changes": "t.changes(startingVersion=3",
    "jar": "import dvengine",
    "object_store": "opts = {\"AWS_ENDPOINT_URL\"",
}


def test_every_python_example_in_the_readme_has_a_test() -> None:
    firsts = [b.first_line for b in python_blocks()]
    covered = [f for f in firsts if any(f.startswith(start) for start in EXAMPLES.values())]
    assert covered == firsts, f"README.md examples without a test here: {sorted(set(firsts) - set(covered))}"


def arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame[COLUMNS], schema=SCHEMA, preserve_index=False)


def rows(table: pa.Table | pd.DataFrame, columns: list[str] | None = None) -> list[tuple[Any, ...]]:
    frame = table.to_pandas() if isinstance(table, pa.Table) else table
    columns = columns or COLUMNS
    return sort_rows([tuple(None if pd.isna(v) else v for v in r) for r in frame[columns].itertuples(index=False)])


def deleted(frame: pd.DataFrame, user_id: int) -> pd.DataFrame:
    return frame[frame.user_id != user_id]


def upserted(frame: pd.DataFrame, source: pd.DataFrame, insert: bool = True) -> pd.DataFrame:
    """MERGE ... ON t.id = s.id WHEN MATCHED UPDATE * [WHEN NOT MATCHED INSERT *]."""
    kept = frame[~frame.id.isin(source.id)]
    changed = source[source.id.isin(frame.id)]
    new = source[~source.id.isin(frame.id)] if insert else source.iloc[0:0]
    return pd.concat([kept, changed, new], ignore_index=True)


def operations(table: DeltaTable) -> list[str]:
    history = table.history().orderBy("version").collect()
    return [r["operation"] for r in history]


def test_using_it(spark: Any, tmp_path: Path) -> None:
    events = str(tmp_path / "events")
    # The catalog table the example opens with createIfNotExists already holds rows, so each of
    # its DML commits and `restoreToVersion(3)` has a version 3 (v0 create, v1 rows).
    (DeltaTable.createIfNotExists(spark).tableName("events").addColumn("id", "BIGINT", nullable=False)
     .addColumn("user_id", "BIGINT").addColumn("status", "STRING").addColumn("day", "DATE")
     .partitionedBy("day").execute())
    location = Path(DeltaTable.forName(spark, "events").detail().collect()[0]["location"].removeprefix("file:"))
    dvengine.write(arrow(SEED), str(location), mode="append")
    namespace: dict[str, Any] = {
        "updates": spark.createDataFrame(UPDATES[COLUMNS]),
        "df": spark.createDataFrame(SEED[COLUMNS]),
        "arrow_table": arrow(UPDATES),
    }
    try:
        run_block(block(EXAMPLES["using"]), namespace, {"/data/events": events})
        t = namespace["t"]
        # v2 DELETE, v3 UPDATE, v4 MERGE, then VACUUM, RESTORE to v3, REORG (purge)
        ops = operations(t)
        assert ops[:5] == ["CREATE TABLE", "WRITE", "DELETE", "UPDATE", "MERGE"], ops
        assert "RESTORE" in ops and ops[-1] == "REORG", ops
        # the GDPR delete wrote a deletion vector (no rewrite), and the purge rewrote it away
        assert any(a.get("add", {}).get("deletionVector") for a in commit_actions(location, 2))
        assert not any(f.deletion_vector for f in DeltaTable.forPath(None, str(location)).snapshot().files)
        at_v3 = deleted(SEED, 42).assign(status=lambda f: f.status.replace("new", "seen"))
        assert rows(t.toArrow()) == rows(at_v3)
        assert rows(t.toArrow(version=4)) == rows(upserted(at_v3, UPDATES))
        # the path table: df appended, user 42 deleted, then id 2 updated from arrow_table
        local = namespace["local"]
        assert rows(local.toArrow()) == rows(upserted(deleted(SEED, 42), UPDATES, insert=False))
    finally:
        unregister_table("events", spark.conf.get(WAREHOUSE_OVERRIDE_CONF))


def test_schema_evolution(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "events")
    dvengine.write(arrow(SEED), path)
    with_country = SEED.assign(country="de")
    source = UPDATES.assign(channel="web")
    namespace: dict[str, Any] = {
        "dvengine": dvengine, "path": path, "t": DeltaTable.forPath(spark, path),
        "df": spark.createDataFrame(with_country), "src": spark.createDataFrame(source),
    }
    run_block(block(EXAMPLES["evolution"]), namespace)
    table = DeltaTable.forPath(None, path)
    assert table.detail()["partitionColumns"] == ["day"]
    # append with mergeSchema: the old rows got a NULL country
    v1 = table.toArrow(version=1)
    assert v1.column_names == [*COLUMNS, "country"]
    assert rows(v1, ["id", "country"]) == rows(pd.concat([SEED.assign(country=None), with_country]), ["id", "country"])
    # overwrite, replaceWhere (every row is of that day), then MERGE adding `channel`
    expected = pd.concat([with_country[~with_country.id.isin(source.id)].assign(channel=None),
                          source[source.id == 2].assign(country="de"),
                          source[source.id == 1000].assign(country=None)], ignore_index=True)
    final = table.toArrow()
    assert final.column_names == [*COLUMNS, "country", "channel"]
    assert rows(final, final.column_names) == rows(expected, final.column_names)


def test_format_delta_and_sql(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "events")
    # versions 0-2 already there, so the example's read of versionAsOf 3 finds its own append
    earlier = [SEED.assign(id=SEED.id + 10_000 * (k + 1)) for k in range(3)]
    for k, frame in enumerate(earlier):
        dvengine.write(arrow(frame), path, mode="append" if k else "error", partitionBy=["day"])
    spark.createDataFrame(UPDATES[COLUMNS]).createOrReplaceTempView("updates")
    namespace: dict[str, Any] = {"dvengine": dvengine, "spark": spark, "df": spark.createDataFrame(SEED[COLUMNS])}
    run_block(block(EXAMPLES["format"]), namespace, {"/data/events": path})
    expected = upserted(deleted(pd.concat([*earlier, SEED], ignore_index=True), 42), UPDATES)
    assert rows(DeltaTable.forPath(None, path).toArrow()) == rows(expected)
    assert rows(spark.read.format("delta").option("versionAsOf", 3).load(path).toPandas()) == rows(
        pd.concat([*earlier, SEED], ignore_index=True))
    assert [r["operation"] for r in dvengine.sql(spark, f"DESCRIBE HISTORY delta.`{path}` LIMIT 2").collect()] == [
        "MERGE", "DELETE"]


def test_exactly_once_streaming_upserts(spark: Any, tmp_path: Path) -> None:
    path, checkpoint, source_dir = tmp_path / "events", tmp_path / "chk", tmp_path / "incoming"
    dvengine.write(arrow(SEED), str(path))
    source_dir.mkdir()
    batches = [UPDATES, pd.DataFrame({"id": [3, 2000], "user_id": [42, 12], "status": ["fixed", "late"], "day": [DAY] * 2})]
    for k, frame in enumerate(batches):
        pq.write_table(arrow(frame), source_dir / f"part-{k}.parquet")
    stream = spark.readStream.schema(spark.createDataFrame(UPDATES[COLUMNS]).schema).option(
        "maxFilesPerTrigger", 1).parquet(str(source_dir))
    namespace: dict[str, Any] = {"DeltaTable": DeltaTable, "stream": stream}
    try:
        run_block(block(EXAMPLES["streaming"]), namespace, {"/data/events": str(path), "/chk/events": str(checkpoint)})
        query = namespace["query"]
        query.processAllAvailable()
        query.stop()
    finally:  # the example sets them on the session; other tests share it
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    expected = upserted(upserted(SEED, batches[0]), batches[1])
    assert rows(DeltaTable.forPath(None, str(path)).toArrow()) == rows(expected)
    txns = [a["txn"] for v in (1, 2) for a in commit_actions(path, v) if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txns] == [("events-upsert", 0), ("events-upsert", 1)]


def test_maintenance_without_a_jvm(tmp_path: Path) -> None:
    """The section says every call runs with ``spark`` None: so they run here without a session."""
    path, raw = tmp_path / "events", tmp_path / "raw"
    for part in range(3):  # three small files in the one partition, then a DV on one of them
        dvengine.write(arrow(SEED[SEED.id % 3 == part]), str(path), mode="append" if part else "error", partitionBy=["day"])
    DeltaTable.forPath(None, str(path)).delete("user_id = 42")
    (raw / f"day={DAY}").mkdir(parents=True)
    pq.write_table(arrow(SEED).drop(["day"]), raw / f"day={DAY}" / "part-0.parquet")
    t = DeltaTable.forPath(None, str(path))
    namespace: dict[str, Any] = {"DeltaTable": DeltaTable, "spark": None, "t": t}
    run_block(block(EXAMPLES["maintenance"]), namespace, {
        "/data/clicks": str(tmp_path / "clicks"), "/data/events_test": str(tmp_path / "events_test"),
        "/data/raw": str(raw)}, refusals={"t.dropFeatureSupport": OperationNotAllowedError})
    live = deleted(SEED, 42)
    assert rows(t.toArrow()) == rows(live)
    ops = [r["operation"] for r in sorted(t.history(), key=lambda r: r["version"])]
    assert ops[3:6] == ["DELETE", "OPTIMIZE", "OPTIMIZE"], ops
    assert rows(DeltaTable.forPath(None, str(tmp_path / "events_test")).toArrow()) == rows(live)
    assert rows(DeltaTable.forPath(None, str(raw)).toArrow()) == rows(SEED)
    clicks = DeltaTable.forPath(None, str(tmp_path / "clicks")).detail()
    assert clicks["clusteringColumns"] == ["user_id", "ts"]
    # addFeatureSupport kept the feature, dropFeatureSupport disabled and purged the DVs
    assert t.detail()["properties"].get("delta.enableDeletionVectors") == "false"
    assert not any(a.deletion_vector for a in t.snapshot().files)
    # OPTIMIZE had already applied the DVs, so the manifest was written (not refused)
    assert (path / "_symlink_format_manifest" / f"day={DAY}" / "manifest").exists()


def test_change_data_feed(tmp_path: Path) -> None:
    path = str(tmp_path / "events")
    dvengine.write(arrow(SEED), path, configuration={"delta.enableChangeDataFeed": "true"})
    t = DeltaTable.forPath(None, path)
    t.delete("user_id = 42")  # v1
    t.update("status = 'new'", {"status": "'seen'"})  # v2: id 4
    t.alias("t").merge(arrow(UPDATES), "t.id = s.id", source_alias="s").whenMatchedUpdateAll() \
        .whenNotMatchedInsertAll().execute()  # v3: id 2 updated, id 1000 inserted
    namespace: dict[str, Any] = {"t": t}
    run_block(block(EXAMPLES["changes"]), namespace)
    feed = namespace["_"]
    assert isinstance(feed, pa.Table)
    assert feed.column_names == [*COLUMNS, "_change_type", "_commit_version", "_commit_timestamp"]
    old_2 = SEED[SEED.id == 2]
    expected = pd.concat([old_2.assign(_change_type="update_preimage"),
                          UPDATES[UPDATES.id == 2].assign(_change_type="update_postimage"),
                          UPDATES[UPDATES.id == 1000].assign(_change_type="insert")], ignore_index=True)
    columns = [*COLUMNS, "_change_type"]
    assert rows(feed, columns) == rows(expected, columns)
    assert set(feed.column("_commit_version").to_pylist()) == {3}


def test_object_store(s3_server: S3Server) -> None:  # noqa: F811 (the fixture)
    bucket = s3_server.new_bucket()
    namespace: dict[str, Any] = {"dvengine": dvengine, "DeltaTable": DeltaTable, "arrow_table": arrow(SEED)}
    endpoint = '{"AWS_ENDPOINT_URL": "http://minio:9000", "AWS_ALLOW_HTTP": "true"}'
    assert endpoint in block(EXAMPLES["object_store"]).code
    run_block(block(EXAMPLES["object_store"]), namespace, {
        endpoint: repr(s3_server.options), "s3://bucket/": f"s3://{bucket}/", "s3a://bucket/": f"s3a://{bucket}/"})
    assert rows(namespace["t"].toArrow(version=0)) == rows(SEED)
    live = deleted(SEED, 42)
    assert rows(namespace["t"].toArrow()) == rows(live)
    assert rows_delta_rs_s3(s3_server, f"s3://{bucket}/events", COLUMNS) == [
        tuple(r) for r in rows(live)]


def test_giving_spark_the_jar_in_a_new_process(tmp_path: Path) -> None:
    """As a user's script: a fresh interpreter, a plain builder, nothing of the test session."""
    script = tmp_path / "job.py"
    path = tmp_path / "events"
    script.write_text(block(EXAMPLES["jar"]).code + textwrap.dedent(f"""
        assert dvengine.jar_path() in spark.conf.get("spark.jars").split(","), spark.conf.get("spark.jars")
        spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").write.format("delta").save({str(path)!r})
        dvengine.DeltaTable.forPath(spark, {str(path)!r}).delete("id = 1")
        print(sorted(r["id"] for r in spark.read.format("delta").load({str(path)!r}).collect()))
        spark.stop()
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[2]"
