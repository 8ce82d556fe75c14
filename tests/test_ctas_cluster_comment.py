"""``CREATE / REPLACE TABLE ... CLUSTER BY (cols) COMMENT 'text' [TBLPROPERTIES] AS query`` through
``dvengine.sql``, against what Delta's ``CreateDeltaTableCommand`` commits: one commit holding the
protocol (``clustering`` + ``domainMetadata``), the metaData (``description`` from COMMENT), the
``delta.clustering`` domain (physical names), the removes of a replaced table and the query's adds,
under ``CREATE TABLE AS SELECT`` / ``REPLACE TABLE AS SELECT`` / ``CREATE OR REPLACE TABLE AS SELECT``
with Delta's parameters. Checked in the raw log, read back by dvengine, delta-rs and DuckDB, then
clustered by OPTIMIZE; refusals are typed and leave the folder as it was. Parser tests need no Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import assert_every_reader_sees, folder_state
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.errors import InvalidArgumentError, SqlParseError, UnsupportedFeatureError
from dvengine.log import load_snapshot
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import CreateTableAsSelectStatement, TableRef
from dvengine.storage.catalog import WAREHOUSE_OVERRIDE_CONF

COLS = ["x", "y", "s"]


def _source(root: Path, n: int = 12) -> list[tuple[int, int, str]]:
    rows = [(i, (i * 7) % 5, f"s{i}") for i in range(n)]
    dvengine.write(pa.table({"x": [r[0] for r in rows], "y": [r[1] for r in rows], "s": [r[2] for r in rows]}), str(root))
    return rows


def _one(actions: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [a[kind] for a in actions if kind in a]
    assert len(found) == 1, (kind, found)
    return found[0]


def _kinds(actions: list[dict[str, Any]]) -> set[str]:
    return {k for a in actions for k in a}


# --- parsing (no Spark) -----------------------------------------------------------------------


def test_parser_accepts_cluster_by_and_comment_with_as() -> None:
    (stmt,) = parse_sql("CREATE TABLE delta.`/x` USING delta CLUSTER BY (b, a) COMMENT 'two words' AS SELECT 1 AS a, 2 AS b")
    assert stmt == CreateTableAsSelectStatement(
        TableRef(path="/x"), "SELECT 1 AS a, 2 AS b", comment="two words", cluster_by=("b", "a")
    )
    # any clause order; Spark concatenates adjacent string literals; REPLACE and OR REPLACE
    (stmt,) = parse_sql("CREATE OR REPLACE TABLE t USING delta COMMENT 'it''s' TBLPROPERTIES ('k' = 'v') "
                        "CLUSTER BY (`a b`) LOCATION '/l' AS SELECT 1 AS `a b`")
    assert isinstance(stmt, CreateTableAsSelectStatement)
    assert (stmt.or_replace, stmt.comment, stmt.cluster_by, stmt.properties, stmt.location) == (
        True, "its", ("a b",), {"k": "v"}, "/l")
    (stmt,) = parse_sql("REPLACE TABLE t USING delta CLUSTER BY (a) AS SELECT 1 AS a")
    assert isinstance(stmt, CreateTableAsSelectStatement)
    assert (stmt.replace_only, stmt.cluster_by, stmt.comment) == (True, ("a",), None)
    # CLUSTER BY with PARTITIONED BY parses; it is refused when the statement runs, as at CREATE TABLE
    (stmt,) = parse_sql("CREATE TABLE t USING delta PARTITIONED BY (a) CLUSTER BY (b) AS SELECT 1 AS a, 2 AS b")
    assert isinstance(stmt, CreateTableAsSelectStatement)
    assert (stmt.partitioned_by, stmt.cluster_by) == (("a",), ("b",))


def test_parser_refuses_what_dvengine_cannot_cluster_by(tmp_path: Path) -> None:
    root = tmp_path / "t"
    cases: list[tuple[str, type[Exception], str]] = [
        ("CREATE TABLE delta.`{r}` USING delta CLUSTER BY (s.x) AS SELECT 1 AS a", UnsupportedFeatureError, "nested"),
        ("CREATE TABLE delta.`{r}` (a INT) USING delta CLUSTER BY (s.x)", UnsupportedFeatureError, "nested"),
        ("CREATE TABLE delta.`{r}` USING delta CLUSTER BY (a + 1) AS SELECT 1 AS a", SqlParseError, "cannot parse"),
        ("CREATE TABLE delta.`{r}` USING delta CLUSTER BY NONE AS SELECT 1 AS a", SqlParseError, "cannot parse"),
        ("CREATE TABLE delta.`{r}` USING delta COMMENT 1 AS SELECT 1 AS a", SqlParseError, "COMMENT"),
    ]
    for text, error, words in cases:
        with pytest.raises(error, match=words):
            parse_sql(text.format(r=root))
        with pytest.raises(error, match=words):
            dvengine.sql(None, text.format(r=root))
        assert not root.exists(), text


# --- on Spark ---------------------------------------------------------------------------------


def test_ctas_cluster_by_comment_one_commit_then_optimize_clusters(spark: Any, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    rows = _source(src)
    dvengine.sql(spark, f"""CREATE TABLE delta.`{dst}` USING delta CLUSTER BY (Y, x) COMMENT 'clustered copy'
        TBLPROPERTIES ('delta.checkpointInterval' = '5')
        AS SELECT /*+ REPARTITION(3) */ x, y, s FROM delta.`{src}`""")
    assert latest_version(dst) == 0
    actions = commit_actions(dst, 0)
    assert _kinds(actions) == {"commitInfo", "protocol", "metaData", "domainMetadata", "add"}
    protocol = _one(actions, "protocol")
    assert protocol["minWriterVersion"] == 7 and {"clustering", "domainMetadata"} <= set(protocol["writerFeatures"])
    meta = _one(actions, "metaData")
    assert meta["description"] == "clustered copy" and meta["partitionColumns"] == []
    assert meta["configuration"]["delta.checkpointInterval"] == "5"
    fields = json.loads(meta["schemaString"])["fields"]
    assert [(f["name"], f["type"], f["nullable"]) for f in fields] == [
        ("x", "long", True), ("y", "long", True), ("s", "string", True)]
    # ClusteringMetadataDomain: each column a list of (physical) name parts, the schema's spelling
    assert _one(actions, "domainMetadata") == {
        "domain": "delta.clustering", "configuration": '{"clusteringColumns":[["y"],["x"]]}', "removed": False}
    adds = [a["add"] for a in actions if "add" in a]
    assert len(adds) >= 2 and sum(json.loads(a["stats"])["numRecords"] for a in adds) == len(rows)
    info = _one(actions, "commitInfo")
    assert info["operation"] == "CREATE TABLE AS SELECT"
    params = info["operationParameters"]
    # CreateTable(asSelect = true): isManaged.toString, Option(description), JsonUtils.toJson lists (compact)
    assert (params["isManaged"], params["description"], params["partitionBy"]) == ("false", "clustered copy", "[]")
    assert params["clusterBy"] == '["y","x"]'
    assert json.loads(params["properties"])["delta.checkpointInterval"] == "5"
    assert int(info["operationMetrics"]["numFiles"]) == len(adds)
    assert int(info["operationMetrics"]["numOutputRows"]) == len(rows)
    assert_every_reader_sees(dst, COLS, rows)
    detail = DeltaTable.forPath(None, str(dst)).detail()
    assert detail["clusteringColumns"] == ["y", "x"] and detail["description"] == "clustered copy"

    # OPTIMIZE clusters by the CTAS's columns (Delta's liquid ZCube tagging)
    res = DeltaTable.forPath(None, str(dst)).optimize().executeCompaction()["metrics"]
    assert res["numFilesRemoved"] == len(adds) and res["numFilesAdded"] >= 1
    files = load_snapshot(str(dst)).files
    assert all(f.clustering_provider == "liquid" and f.tags and f.tags["ZCUBE_ZORDER_BY"] == '["y","x"]' for f in files)
    info = _one(commit_actions(dst, latest_version(dst)), "commitInfo")
    assert info["operation"] == "OPTIMIZE" and json.loads(info["operationParameters"]["clusterBy"]) == ["y", "x"]
    assert_every_reader_sees(dst, COLS, rows)


def test_replace_as_select_clusters_an_existing_table_and_takes_the_statement_properties(
    spark: Any, tmp_path: Path
) -> None:
    src, root = tmp_path / "src", tmp_path / "t"
    rows = _source(src, 8)
    dvengine.sql(spark, f"""CREATE TABLE delta.`{root}` USING delta COMMENT 'old'
        TBLPROPERTIES ('delta.checkpointInterval' = '7', 'owner.note' = 'old')
        AS SELECT x, s FROM delta.`{src}` WHERE x < 3""")
    old_meta = _one(commit_actions(root, 0), "metaData")
    old_adds = [a["add"] for a in commit_actions(root, 0) if "add" in a]

    # REPLACE ... CLUSTER BY ... TBLPROPERTIES: column mapping, so the domain holds physical names
    dvengine.sql(spark, f"""REPLACE TABLE delta.`{root}` USING delta CLUSTER BY (y)
        TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'owner.note' = 'new')
        AS SELECT y, x, upper(s) AS s FROM delta.`{src}`""")
    assert latest_version(root) == 1
    actions = commit_actions(root, 1)
    meta = _one(actions, "metaData")
    assert meta["id"] == old_meta["id"]  # the same table, redefined
    assert meta.get("description") is None  # the old COMMENT is not kept (Delta: table.comment of the statement)
    config = meta["configuration"]
    assert config["owner.note"] == "new" and config["delta.columnMapping.mode"] == "name"
    assert "delta.checkpointInterval" not in config  # the old properties are replaced, not merged
    fields = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in json.loads(meta["schemaString"])["fields"]}
    assert fields["y"] != "y"
    domain = _one(actions, "domainMetadata")
    assert json.loads(domain["configuration"]) == {"clusteringColumns": [[fields["y"]]]}
    protocol = _one(actions, "protocol")
    assert {"clustering", "domainMetadata", "columnMapping"} <= set(protocol["writerFeatures"])
    assert sorted(a["remove"]["path"] for a in actions if "remove" in a) == sorted(a["path"] for a in old_adds)
    info = _one(actions, "commitInfo")
    assert info["operation"] == "REPLACE TABLE AS SELECT"
    params = info["operationParameters"]
    assert json.loads(params["clusterBy"]) == ["y"]
    assert json.loads(params["properties"])["owner.note"] == "new"
    assert int(info["operationMetrics"]["numRemovedFiles"]) == len(old_adds)
    assert int(info["operationMetrics"]["numOutputRows"]) == len(rows)
    want = [(x, y, s.upper()) for x, y, s in rows]
    assert_every_reader_sees(root, COLS, want)
    assert DeltaTable.forPath(None, str(root)).detail()["clusteringColumns"] == ["y"]

    # CREATE OR REPLACE without CLUSTER BY: the domain is written with no columns (Delta's
    # getDomainMetadataFromTransaction), the features stay (the protocol is never downgraded)
    dvengine.sql(spark, f"CREATE OR REPLACE TABLE delta.`{root}` USING delta AS SELECT x FROM delta.`{src}`")
    actions = commit_actions(root, 2)
    assert json.loads(_one(actions, "domainMetadata")["configuration"]) == {"clusteringColumns": []}
    info = _one(actions, "commitInfo")
    assert info["operation"] == "CREATE OR REPLACE TABLE AS SELECT" and info["operationParameters"]["clusterBy"] == "[]"
    assert info["operationParameters"]["description"] is None  # no COMMENT: JSON null, as Option(description)
    assert DeltaTable.forPath(None, str(root)).detail()["clusteringColumns"] == []
    assert_every_reader_sees(root, ["x"], [(r[0],) for r in rows])

    # a catalog name without LOCATION: a managed table; CREATE OR REPLACE that creates records its own operation
    name = "ctas_cluster_named"
    dvengine.sql(spark, f"CREATE OR REPLACE TABLE {name} USING delta CLUSTER BY (a) COMMENT 'n' AS SELECT 1L AS a, 'z' AS b")
    named = Path(spark.conf.get(WAREHOUSE_OVERRIDE_CONF)) / name
    info = _one(commit_actions(named, 0), "commitInfo")
    assert (info["operation"], info["operationParameters"]["isManaged"]) == ("CREATE OR REPLACE TABLE AS SELECT", "true")
    assert _one(commit_actions(named, 0), "metaData")["description"] == "n"
    assert_every_reader_sees(named, ["a", "b"], [(1, "z")])


def test_ctas_cluster_by_refusals_are_typed_and_write_nothing(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _source(src, 4)
    new = tmp_path / "new"
    query = f"AS SELECT x, y, s, x > 1 AS flag FROM delta.`{src}`"
    cases: list[tuple[str, type[Exception], str]] = [
        ("CLUSTER BY (nope)", InvalidArgumentError, "'nope'"),
        ("CLUSTER BY (flag)", InvalidArgumentError, "flag"),  # boolean: not skipping-eligible
        ("PARTITIONED BY (s) CLUSTER BY (x)", InvalidArgumentError, "Clustering and partitioning"),
        ("CLUSTER BY (x, y, s, x, y)", InvalidArgumentError, "up to 4"),
        ("CLUSTER BY (x, x)", InvalidArgumentError, "twice"),
        ("CLUSTER BY (y) TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')", InvalidArgumentError, "stats"),
    ]
    for clauses, error, words in cases:
        text = f"CREATE TABLE delta.`{new}` USING delta {clauses} COMMENT 'c' {query}"
        with pytest.raises(error, match=words):
            dvengine.sql(spark, text)
        assert folder_state(new) == {}, text

    # on an existing clustered table: REPLACE refusals leave it byte-identical
    root = tmp_path / "t"
    dvengine.sql(spark, f"CREATE TABLE delta.`{root}` USING delta CLUSTER BY (x) {query}")
    before = folder_state(root)
    for text, error, words in [
        (f"REPLACE TABLE delta.`{root}` USING delta CLUSTER BY (nope) {query}", InvalidArgumentError, "'nope'"),
        (f"CREATE OR REPLACE TABLE delta.`{root}` USING delta PARTITIONED BY (s) {query}", InvalidArgumentError,
         "clustered table"),
    ]:
        with pytest.raises(error, match=words):
            dvengine.sql(spark, text)
        assert folder_state(root) == before, text
    # Delta refuses removing the files of an append-only table, so REPLACE ... AS on one
    dvengine.sql(spark, f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    before = folder_state(root)
    with pytest.raises(InvalidArgumentError, match="append-only"):
        dvengine.sql(spark, f"CREATE OR REPLACE TABLE delta.`{root}` USING delta {query}")
    assert folder_state(root) == before
