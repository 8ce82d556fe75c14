"""``ALTER TABLE t CLUSTER BY (c, ...)`` and ``ALTER TABLE t CLUSTER BY NONE`` through ``dvengine.sql``.

What Delta does (delta-spark ``AbstractDeltaCatalog.alterTable``, ``AlterTableClusterByDeltaCommand``,
``ClusteredTableUtils``, ``DeltaOperations.ClusterBy``; see spec_notes/zorder-and-clustering.md):
one commit of a new ``delta.clustering`` domain (physical name parts), operation ``CLUSTER BY``
with ``oldClusteringColumns`` / ``newClusteringColumns``; no file rewritten, so files clustered by
the old columns keep their ZCube and OPTIMIZE leaves them alone; an unpartitioned table without
clustering becomes clustered (the ``clustering`` and ``domainMetadata`` features join the
protocol); ``CLUSTER BY NONE`` empties the columns, and does nothing on an unclustered table;
partitioned tables and CREATE's column checks are refused.

Truth from outside dvengine: the raw ``_delta_log`` JSON, delta-rs (its reader, and its writer,
which appends before and refuses the ``clustering`` feature after), DuckDB's reader, the folder's
bytes for refusals.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from clustering_rows import append_xys
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake
from deltalake.exceptions import CommitFailedError
from dml_helpers import assert_every_reader_sees, data_listing, folder_state
from raw_log import commit_actions, latest_version

import dvengine
from dvengine import DeltaTable
from dvengine.commit.conflicts import TransactionFootprint, WinningCommit, check_conflicts
from dvengine.errors import (
    ConcurrentTransactionError,
    InvalidArgumentError,
    OperationNotAllowedError,
    SqlParseError,
    UnsupportedFeatureError,
)
from dvengine.log import load_snapshot
from dvengine.log.checkpoint_writer import write_checkpoint
from dvengine.maintenance import clustering
from dvengine.maintenance.clustering import clustering_columns
from dvengine.protocol.actions import DomainMetadata
from dvengine.sqlcmd.parse import parse_sql
from dvengine.sqlcmd.statements import AlterClusterByStatement, TableRef

COLS = ["x", "y", "s"]
MIN_CUBE_ENV = "SPARK_DATABRICKS_DELTA_OPTIMIZE_CLUSTERING_MERGESTRATEGY_MINCUBESIZE_THRESHOLD"


def _kinds(actions: list[dict[str, Any]]) -> list[str]:
    return sorted(k for a in actions for k in a)


def _one(actions: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [a[kind] for a in actions if kind in a]
    assert len(found) == 1, (kind, actions)
    return found[0]  # type: ignore[no-any-return]


def _cluster_by_commit(root: Path, old: str, new: str, columns: list[list[str]]) -> list[dict[str, Any]]:
    """The latest commit is Delta's ClusterBy: its commitInfo and the new domain; returns its actions."""
    actions = commit_actions(root, latest_version(root))
    info = _one(actions, "commitInfo")
    assert info["operation"] == "CLUSTER BY"
    assert info["operationParameters"] == {"oldClusteringColumns": old, "newClusteringColumns": new}
    assert info["operationMetrics"] == {}  # ClusterBy declares no metrics; Delta's transaction logs the empty map
    domain = _one(actions, "domainMetadata")
    assert domain == {"domain": "delta.clustering", "removed": False,
                      "configuration": json.dumps({"clusteringColumns": columns}, separators=(",", ":"))}
    assert not any(k in a for a in actions for k in ("add", "remove"))
    return actions


def _optimize(root: Path) -> dict[str, Any]:
    result: Any = DeltaTable.forPath(None, str(root)).optimize().executeCompaction()
    return result["metrics"]  # type: ignore[no-any-return]


def _zorder_by(root: Path) -> dict[str, str | None]:
    """path -> the ZCUBE_ZORDER_BY tag of every live file (None: not in a ZCube)."""
    return {f.path: (f.tags or {}).get("ZCUBE_ZORDER_BY") for f in load_snapshot(str(root)).files}


def _refused(root: Path, statement: str, error: type[Exception], *words: str) -> None:
    before = folder_state(root)
    with pytest.raises(error) as caught:
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` {statement}")
    for word in words:
        assert word in str(caught.value), (statement, str(caught.value))
    assert folder_state(root) == before, statement


def test_new_columns_on_a_clustered_table_leave_files_and_their_zcubes_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (x)")
    model = append_xys(root, 3, 500, seed=1)
    _optimize(root)
    clustered_by_x = _zorder_by(root)
    assert set(clustered_by_x.values()) == {'["x"]'}
    protocol = _one(commit_actions(root, 0), "protocol")
    files = data_listing(root)

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY (Y, x)")

    # commitInfo + domainMetadata only: no protocol, metaData or file action; spelled as written
    actions = _cluster_by_commit(root, "x", "Y,x", [["y"], ["x"]])
    assert _kinds(actions) == ["commitInfo", "domainMetadata"]
    assert data_listing(root) == files and _zorder_by(root) == clustered_by_x
    assert clustering_columns(load_snapshot(str(root))) == ["y", "x"]
    assert DeltaTable.forPath(None, str(root)).detail()["clusteringColumns"] == ["y", "x"]
    assert RsTable(str(root)).protocol().writer_features == protocol["writerFeatures"]
    assert_every_reader_sees(root, COLS, model)

    # New files are clustered by the new columns; the ZCube of the old ones stays (Delta: without
    # FULL, files clustered by other columns are not candidates), also when no cube is "done".
    model += append_xys(root, 2, 500, seed=2)
    monkeypatch.setenv(MIN_CUBE_ENV, str(2**62))
    metrics = _optimize(root)
    after = _zorder_by(root)
    assert {p: t for p, t in after.items() if p in clustered_by_x} == clustered_by_x
    assert metrics["numFilesRemoved"] == 2
    assert {t for p, t in after.items() if p not in clustered_by_x} == {'["y","x"]'}
    info = _one(commit_actions(root, latest_version(root)), "commitInfo")
    assert (info["operation"], info["operationParameters"]["clusterBy"]) == ("OPTIMIZE", '["y","x"]')
    assert_every_reader_sees(root, COLS, model)

    # the new domain is kept by a checkpoint (the commits before it deleted: only it is read)
    snapshot = load_snapshot(str(root))
    write_checkpoint(snapshot)
    for v in range(snapshot.version + 1):
        (root / "_delta_log" / f"{v:020d}.json").unlink()
    assert clustering_columns(load_snapshot(str(root))) == ["y", "x"]
    assert_every_reader_sees(root, COLS, model)


def test_an_unclustered_table_becomes_clustered(tmp_path: Path) -> None:
    """A table delta-rs made (protocol 1/2): Delta's ALTER adds delta.feature.clustering, which
    becomes writer 7 with clustering + domainMetadata besides the legacy features 1/2 implies."""
    root = tmp_path / "t"
    first = pa.table({"x": pa.array([3, 1, 2], pa.int64()), "y": pa.array([30, 10, 20], pa.int64()), "s": ["c", "a", "b"]})
    write_deltalake(str(root), first)
    write_deltalake(str(root), first, mode="append")  # delta-rs appends before the ALTER
    assert _one(commit_actions(root, 0), "protocol") == {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = _one(commit_actions(root, 0), "metaData")

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY (x)")

    actions = _cluster_by_commit(root, "", "x", [["x"]])
    assert _kinds(actions) == ["commitInfo", "domainMetadata", "metaData", "protocol"]
    protocol = _one(actions, "protocol")
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (1, 7) and "readerFeatures" not in protocol
    assert sorted(protocol["writerFeatures"]) == ["appendOnly", "clustering", "domainMetadata", "invariants"]
    new_metadata = _one(actions, "metaData")
    assert {k: v for k, v in new_metadata.items() if v is not None} == {k: v for k, v in metadata.items() if v is not None}
    assert "delta.feature.clustering" not in new_metadata["configuration"]  # null = absent, as delta-rs wrote it
    assert RsTable(str(root)).protocol().writer_features is not None
    rows = [(r["x"], r["y"], r["s"]) for r in first.to_pylist()] * 2
    assert_every_reader_sees(root, COLS, rows)
    # delta-rs 1.x does not write clustered tables: the feature is really on
    with pytest.raises(CommitFailedError, match="ClusteredTable"):
        write_deltalake(str(root), first, mode="append")

    metrics = _optimize(root)
    assert metrics["numFilesRemoved"] == 2
    snapshot = load_snapshot(str(root))
    assert all(f.clustering_provider == "liquid" and (f.tags or {}).get("ZCUBE_ZORDER_BY") == '["x"]'
               for f in snapshot.files)
    assert_every_reader_sees(root, COLS, rows)


def test_cluster_by_none(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (x, y)")
    model = append_xys(root, 3, 200, seed=3)
    protocol = _one(commit_actions(root, 0), "protocol")

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY NONE")

    actions = _cluster_by_commit(root, "x,y", "", [])
    assert _kinds(actions) == ["commitInfo", "domainMetadata"]
    snapshot = load_snapshot(str(root))
    assert clustering_columns(snapshot) == [] and "clustering" in (snapshot.protocol.writer_features or ())
    assert RsTable(str(root)).protocol().writer_features == protocol["writerFeatures"]  # never downgraded
    # OPTIMIZE is an ordinary compaction again (Delta: no clustering stats)
    _optimize(root)
    info = _one(commit_actions(root, latest_version(root)), "commitInfo")
    assert (info["operation"], info["operationParameters"]["clusterBy"]) == ("OPTIMIZE", "[]")
    assert_every_reader_sees(root, COLS, model)

    # and clustering again
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY (s)")
    _cluster_by_commit(root, "", "s", [["s"]])

    # on a table that is not clustered: nothing at all (Delta skips it)
    plain = tmp_path / "plain"
    dvengine.sql(None, f"CREATE TABLE delta.`{plain}` (x BIGINT) USING delta")
    before = folder_state(plain)
    dvengine.sql(None, f"ALTER TABLE delta.`{plain}` CLUSTER BY NONE")
    assert folder_state(plain) == before


def test_column_mapping_writes_physical_names(tmp_path: Path) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (x BIGINT, y BIGINT, s STRING) USING delta "
                       "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    model = append_xys(root, 2, 100, seed=4)
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` RENAME COLUMN y TO `y 2`")
    schema = json.loads(load_snapshot(str(root)).metadata.schema_string)
    physical = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"]}
    assert physical["y 2"].startswith("col-")

    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY (`y 2`, x)")

    _cluster_by_commit(root, "", "`y 2`,x", [[physical["y 2"]], [physical["x"]]])
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY (s)")
    _cluster_by_commit(root, "`y 2`,x", "s", [[physical["s"]]])
    _optimize(root)
    assert_every_reader_sees(root, ["x", "y 2", "s"], model)


def test_refusals_are_typed_and_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (a INT, b BOOLEAN, c BINARY, d STRUCT<e: INT>, f ARRAY<INT>, "
                       "g STRING, h DATE, i DOUBLE, j DECIMAL(10, 2)) USING delta CLUSTER BY (a)")
    _refused(root, "CLUSTER BY (nope)", InvalidArgumentError, "'nope'")
    _refused(root, "CLUSTER BY (a, g, h, i, j)", InvalidArgumentError, "up to 4", "has 5")
    _refused(root, "CLUSTER BY (b)", InvalidArgumentError, "b : boolean", "data skipping")
    _refused(root, "CLUSTER BY (a, c)", InvalidArgumentError, "c : binary")
    _refused(root, "CLUSTER BY (d)", InvalidArgumentError, "d : struct<e:integer>")
    _refused(root, "CLUSTER BY (f)", InvalidArgumentError, "f : array<integer>")
    _refused(root, "CLUSTER BY (a, A)", InvalidArgumentError, "twice")
    _refused(root, "CLUSTER BY (d.e)", UnsupportedFeatureError, "d.e", "nested")
    _refused(root, "CLUSTER BY (a.x)", InvalidArgumentError, "'a.x'")
    monkeypatch.setenv("SPARK_DATABRICKS_DELTA_CLUSTEREDTABLE_NUMCLUSTERINGCOLUMNSLIMIT", "1")
    _refused(root, "CLUSTER BY (a, g)", InvalidArgumentError, "up to 1")
    monkeypatch.delenv("SPARK_DATABRICKS_DELTA_CLUSTEREDTABLE_NUMCLUSTERINGCOLUMNSLIMIT")
    for ok in ("a, g, h, i", "j"):  # every eligible type is taken
        dvengine.sql(None, f"ALTER TABLE delta.`{root}` CLUSTER BY ({ok})")

    # stats are collected for the first dataSkippingNumIndexedCols leaf columns only
    few = tmp_path / "few"
    dvengine.sql(None, f"CREATE TABLE delta.`{few}` (a INT, g STRING, h DATE) USING delta "
                       "TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '2')")
    _refused(few, "CLUSTER BY (h)", InvalidArgumentError, "'h'", "stats")
    dvengine.sql(None, f"ALTER TABLE delta.`{few}` CLUSTER BY (g, a)")
    _cluster_by_commit(few, "", "g,a", [["g"], ["a"]])

    # a partitioned table, also for NONE (Delta checks partitioning before anything else)
    part = tmp_path / "part"
    dvengine.sql(None, f"CREATE TABLE delta.`{part}` (a INT, g STRING) USING delta PARTITIONED BY (g)")
    for statement in ("CLUSTER BY (a)", "CLUSTER BY NONE"):
        _refused(part, statement, OperationNotAllowedError, "partitioned table", str(part))

    # CREATE ... CLUSTER BY checks types the same way
    with pytest.raises(InvalidArgumentError, match="b : boolean"):
        dvengine.sql(None, f"CREATE TABLE delta.`{tmp_path / 'new'}` (a INT, b BOOLEAN) USING delta CLUSTER BY (b)")
    assert not (tmp_path / "new").exists()


def test_concurrent_cluster_by_conflicts_but_an_append_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta's checkIfDomainMetadataConflict: two commits writing delta.clustering conflict."""
    root = tmp_path / "t"
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (x BIGINT, y BIGINT, s STRING) USING delta CLUSTER BY (x)")
    stale = load_snapshot(str(root))
    monkeypatch.setattr(clustering, "load_snapshot", lambda _root: stale)
    model = append_xys(root, 1, 10, seed=5)  # a blind append won the race: no conflict

    clustering.alter_clustering(str(root), [("y",)])
    _cluster_by_commit(root, "x", "y", [["y"]])

    before = folder_state(root)
    with pytest.raises(ConcurrentTransactionError, match="delta.clustering"):
        clustering.alter_clustering(str(root), [("s",)])  # read the table before the first ALTER
    assert folder_state(root) == before
    monkeypatch.undo()
    assert clustering_columns(load_snapshot(str(root))) == ["y"]
    assert_every_reader_sees(root, COLS, model)


def test_domain_conflict_rule_spares_row_tracking_and_other_domains() -> None:
    winner = WinningCommit.from_actions(3, [DomainMetadata("delta.clustering", "{}"), DomainMetadata("delta.rowTracking", "{}")])
    check_conflicts(winner, TransactionFootprint(domains={"delta.rowTracking", "my.domain"}))
    with pytest.raises(ConcurrentTransactionError, match="delta.clustering"):
        check_conflicts(winner, TransactionFootprint(domains={"delta.clustering"}))


def test_parse() -> None:
    path = TableRef(path="/t")
    cases = {
        "ALTER TABLE delta.`/t` CLUSTER BY (a)": (path, (("a",),)),
        "alter table delta.`/t` cluster  by (a, `b c`, s.x);": (path, (("a",), ("b c",), ("s", "x"))),
        "ALTER TABLE db.t CLUSTER BY NONE": (TableRef(name="db.t"), ()),
        "ALTER TABLE t\nCLUSTER\nBY none": (TableRef(name="t"), ()),
    }
    for text, (table, columns) in cases.items():
        assert parse_sql(text) == [AlterClusterByStatement(table, columns)], text
    for bad in ("ALTER TABLE t CLUSTER BY ()", "ALTER TABLE t CLUSTER BY a", "ALTER TABLE t CLUSTER BY (a,)",
                "ALTER TABLE t CLUSTER BY (a) NONE", "ALTER TABLE t CLUSTER BY NONE (a)", "ALTER TABLE t CLUSTER BY ('a')"):
        with pytest.raises(SqlParseError):
            parse_sql(bad)


def test_catalog_name_without_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVENGINE_CATALOG_WAREHOUSEDIR", str(tmp_path / "warehouse"))
    name = f"cb_{uuid.uuid4().hex[:8]}"  # another test's session may be active: its warehouse then holds the name
    dvengine.sql(None, f"CREATE TABLE {name} (id BIGINT, v STRING) USING delta")
    result = dvengine.sql(None, f"INSERT INTO {name} VALUES (2, 'b'), (1, 'a'); ALTER TABLE {name} CLUSTER BY (v)")
    assert isinstance(result, pa.Table) and result.num_rows == 0
    root = Path(DeltaTable.forName(None, name).path)
    _cluster_by_commit(root, "", "v", [["v"]])
    assert_every_reader_sees(root, ["id", "v"], [(1, "a"), (2, "b")])


def test_through_a_session(spark: Any) -> None:
    """One run through a SparkSession and a catalog name (the statement's own work needs no JVM)."""
    name = f"cb_spark_{uuid.uuid4().hex[:8]}"
    dvengine.sql(spark, f"CREATE TABLE {name} (id BIGINT, v STRING) USING delta CLUSTER BY (id)")
    assert dvengine.sql(spark, f"ALTER TABLE {name} CLUSTER BY (v, id)").collect() == []
    root = Path(DeltaTable.forName(spark, name).path)
    _cluster_by_commit(root, "id", "v,id", [["v"], ["id"]])
    with pytest.raises(InvalidArgumentError, match="'nope'"):
        dvengine.sql(spark, f"ALTER TABLE {name} CLUSTER BY (nope)")


def test_the_clustering_feature_is_enabled_by_ddl_only(tmp_path: Path) -> None:
    """Delta refuses ``delta.feature.clustering`` as a table property on an existing table
    (DELTA_ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED) and at a CREATE without CLUSTER BY
    (DELTA_CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED): a clustered table needs its
    domain, which only CLUSTER BY writes. Nothing is written either way; with CLUSTER BY it is accepted."""
    plain = tmp_path / "plain"
    dvengine.sql(None, f"CREATE TABLE delta.`{plain}` (a INT, b STRING) USING delta")
    before = folder_state(plain)
    with pytest.raises(UnsupportedFeatureError, match="ALTER_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"):
        dvengine.sql(None, f"ALTER TABLE delta.`{plain}` SET TBLPROPERTIES ('delta.feature.clustering' = 'supported')")
    assert folder_state(plain) == before
    fresh = tmp_path / "fresh"
    with pytest.raises(UnsupportedFeatureError, match="CREATE_TABLE_SET_CLUSTERING_TABLE_FEATURE_NOT_ALLOWED"):
        dvengine.sql(None, f"CREATE TABLE delta.`{fresh}` (a INT) USING delta TBLPROPERTIES ('delta.feature.clustering' = 'supported')")
    assert not fresh.exists() or folder_state(fresh) == {}
    with pytest.raises(UnsupportedFeatureError, match="CREATE_TABLE_SET_CLUSTERING"):
        DeltaTable.create(None).location(str(fresh)).addColumn("a", "INT").property("delta.feature.clustering", "enabled").execute()
    clustered = tmp_path / "clustered"
    dvengine.sql(None, f"CREATE TABLE delta.`{clustered}` (a INT) USING delta CLUSTER BY (a) "
                       "TBLPROPERTIES ('delta.feature.clustering' = 'supported')")
    assert clustering_columns(load_snapshot(str(clustered))) == ["a"]
    (metadata,) = [a["metaData"] for a in commit_actions(clustered, 0) if "metaData" in a]
    assert "delta.feature.clustering" not in metadata["configuration"]  # a feature, not a property, as Delta stores it
    (protocol,) = [a["protocol"] for a in commit_actions(clustered, 0) if "protocol" in a]
    assert "clustering" in protocol["writerFeatures"]
