"""``commitInfo.operationParameters`` of every operation dvengine commits, in Delta Spark's JSON shape.

Truth: delta-io/delta ``DeltaOperations.scala`` (each case class quoted beside its expectation) and
``actions.scala``: ``JsonMapSerializer`` writes each parameter with ``writeRawValue`` of
``Operation.jsonEncodedValues`` (every value passed through ``JsonUtils.toJson``), so a String is a
JSON string, a Boolean a JSON boolean, a Long a JSON number, ``None`` null, and a list / map that the
operation pre-encodes with ``JsonUtils.toJson`` a JSON string of compact JSON (Jackson: no spaces).
Where Delta's own ``DescribeDeltaHistorySuite`` spells a value out (ADD COLUMNS, SET / UNSET
TBLPROPERTIES, WRITE with replaceWhere) the scenario repeats that statement and expects the same text.

Predicate texts are dvengine's SQL rendering (Delta logs Spark's ``simpleString`` with expression ids,
``(id#12L = 6)``, which no other engine can reproduce); their container is Delta's.

Each commit is then read by delta-rs ``DeltaTable.history()`` (raw JSON values), by dvengine's
``history()`` (DESCRIBE HISTORY's ``map<string,string>``, compared with an in-test model of Delta's
``getLegacyPostDeserializationOperationParameters``), and the tables by delta-rs and DuckDB.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from interop import rows_arrow, rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.commands.options import env_key
from dvengine.errors import OperationNotAllowedError
from dvengine.maintenance import auto_compact
from dvengine.maintenance.column_type import change_column_type
from dvengine.maintenance.constraints import add_constraint, drop_constraint
from dvengine.maintenance.history import history
from dvengine.maintenance.properties import set_table_properties, unset_table_properties
from tests.conftest import GOLDEN_TABLES

S = pa.struct([pa.field("x", pa.int32())])


@dataclass(frozen=True)
class Expected:
    root: str
    version: int
    operation: str
    parameters: dict[str, Any]


def _commit_info(root: str, version: int) -> dict[str, Any]:
    lines = Path(root, "_delta_log", f"{version:020d}.json").read_text(encoding="utf-8").splitlines()
    return next(json.loads(x)["commitInfo"] for x in lines if x.startswith('{"commitInfo"'))  # type: ignore[no-any-return]


def _action(root: str, version: int, kind: str) -> dict[str, Any]:
    lines = Path(root, "_delta_log", f"{version:020d}.json").read_text(encoding="utf-8").splitlines()
    return next(json.loads(x)[kind] for x in lines if x.startswith(f'{{"{kind}"'))  # type: ignore[no-any-return]


def _typed(params: dict[str, Any]) -> str:
    """Canonical JSON text: tells true from "true" from 1, which == on Python values does not."""
    return json.dumps(params, sort_keys=True)


def _compact(value: Any) -> str:
    """Jackson's JsonUtils.toJson of a list / map: separators without spaces, UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _legacy_string(value: Any) -> str | None:
    """Delta's DESCRIBE HISTORY view of one raw value (CommitInfo.getLegacyPostDeserializationOperationParameters,
    ActionSerializerSuite "round trip of operation parameters"): a JSON string is its text, 23 -> "23",
    false -> "false", null -> null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    assert isinstance(value, int)
    return str(value)


def _version(root: str) -> int:
    return DeltaTable.forPath(None, root).version()


def _main_table(base: Path, out: list[Expected]) -> str:
    """Writes, DML, OPTIMIZE, properties, constraints, column changes, features, RESTORE on one table."""
    root = str(base / "main")

    def expect(operation: str, parameters: dict[str, Any]) -> None:
        out.append(Expected(root, _version(root), operation, parameters))

    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "a", "b"], "s": pa.array([{"x": i} for i in (1, 2, 3)], S)})
    dvengine.write(rows, root, partitionBy=["p"])
    # Write: "mode" -> mode.name(), partitionBy.map("partitionBy" -> JsonUtils.toJson(_)); DescribeDeltaHistorySuite
    # "operations - insert error if exists with partitions": ("WRITE", "ErrorIfExists", """["id"]""")
    expect("WRITE", {"mode": "ErrorIfExists", "partitionBy": '["p"]'})
    more = pa.table({"id": pa.array([4], pa.int64()), "p": ["b"], "s": pa.array([{"x": 4}], S), "v": ["new"]})
    dvengine.write(more, root, mode="append", mergeSchema=True)
    # Write: canMergeSchema.map("canMergeSchema" -> _), an Option[Boolean] set only when the option is on;
    # partitionBy is the writer's (DeltaDataSource.createRelation): none given, "[]" on a partitioned table
    expect("WRITE", {"mode": "Append", "partitionBy": "[]", "canMergeSchema": True})
    again = pa.table({"id": pa.array([5], pa.int64()), "p": ["a"], "s": pa.array([{"x": 5}], S), "v": ["r"]})
    dvengine.write(again, root, mode="overwrite", replaceWhere="p = 'a'")
    # Write: predicate.map("predicate" -> _), the replaceWhere option as written; DescribeDeltaHistorySuite
    # "operations - insert overwrite with predicate": ("WRITE", "Overwrite", """id = 1""")
    expect("WRITE", {"mode": "Overwrite", "partitionBy": "[]", "predicate": "p = 'a'"})
    dvengine.write(pa.table({"id": pa.array([6, 7], pa.int64()), "p": ["b", "b"], "s": pa.array([{"x": 6}, {"x": 7}], S),
                             "v": ["x", "y"]}), root, mode="append", partitionBy=["p"])
    # DescribeDeltaHistorySuite "operations - insert append with partition columns": ("WRITE", "Append", """["id"]""")
    expect("WRITE", {"mode": "Append", "partitionBy": '["p"]'})
    table = DeltaTable.forPath(None, root)
    table.delete("id = 6")
    # OperationWithPredicates: "predicate" -> JsonUtils.toJson(predicatesToString(predicates))
    expect("DELETE", {"predicate": '["`id` = 6"]'})
    table.update("id = 7", {"v": "'z'"})
    expect("UPDATE", {"predicate": '["`id` = 7"]'})
    source = pa.table({"id": pa.array([7, 8], pa.int64()), "v": ["m", "n"]})
    (table.alias("t").merge(source, "t.id = s.id", source_alias="s")
     .whenMatchedUpdate(condition="s.v = 'm'", set={"v": "s.v"})
     .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "p": "'b'"})
     .whenNotMatchedBySourceDelete("t.id = 1").execute())
    # Merge: ("matchedPredicates" -> JsonUtils.toJson(matchedPredicates)), each MergePredicate(predicate:
    # Option[String], actionType) with Include.NON_ABSENT: no "predicate" key for an unconditional clause
    expect("MERGE", {
        "predicate": '["`t`.`id` = `s`.`id`"]',
        "matchedPredicates": '[{"predicate":"`s`.`v` = \'m\'","actionType":"update"}]',
        "notMatchedPredicates": '[{"actionType":"insert"}]',
        "notMatchedBySourcePredicates": '[{"predicate":"`t`.`id` = 1","actionType":"delete"}]',
    })
    table.optimize().where("p = 'b'").executeCompaction()
    # Optimize: ZORDER_PARAMETER_KEY -> JsonUtils.toJson(zOrderBy), CLUSTERING_PARAMETER_KEY -> JsonUtils.toJson(
    # clusterBy.getOrElse(Seq.empty)), AUTO_COMPACTION_PARAMETER_KEY -> auto (a Boolean); isFull only when clustered
    expect("OPTIMIZE", {"predicate": '["`p` = \'b\'"]', "zOrderBy": "[]", "clusterBy": "[]", "auto": False})
    table.optimize().executeZOrderBy("id")
    expect("OPTIMIZE", {"predicate": "[]", "zOrderBy": '["id"]', "clusterBy": "[]", "auto": False})
    set_table_properties(root, {"delta.checkpointInterval": "20", "key": "value"})
    # SetTableProperties: "properties" -> JsonUtils.toJson(properties); DescribeDeltaHistorySuite
    # "operations - [un]set tbproperties": """{"delta.checkpointInterval":"20","key":"value"}"""
    expect("SET TBLPROPERTIES", {"properties": '{"delta.checkpointInterval":"20","key":"value"}'})
    unset_table_properties(root, ["key"], if_exists=True)
    # UnsetTableProperties: "properties" -> JsonUtils.toJson(propKeys), "ifExists" -> ifExists (a Boolean)
    expect("UNSET TBLPROPERTIES", {"properties": '["key"]', "ifExists": True})
    add_constraint(root, "Id_Pos", "id > 0")
    # AddConstraint: Map("name" -> constraintName, "expr" -> expr), the name as the statement spelled it
    expect("ADD CONSTRAINT", {"name": "Id_Pos", "expr": "id > 0"})
    drop_constraint(root, "ID_POS")
    # DropConstraint: Map("name" -> constraintName, "expr" -> e, "existed" -> "true"), "true" a String
    expect("DROP CONSTRAINT", {"name": "ID_POS", "expr": "id > 0", "existed": "true"})
    drop_constraint(root, "id_pos", if_exists=True)
    # AlterTableDropConstraintDeltaCommand commits DropConstraint(name, None) when IF EXISTS finds nothing:
    # Map("name" -> constraintName, "existed" -> "false")
    expect("DROP CONSTRAINT", {"name": "id_pos", "existed": "false"})
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ADD COLUMNS (v3 BIGINT, v4 INT AFTER id, s.y STRING COMMENT 'why', "
                       "t STRUCT<a: INT>)")
    # AddColumns: "columns" -> JsonUtils.toJson(Map("column" -> structFieldToMap(columnPath, column)) ++
    # colPosition.map("position" -> _.toString)); structFieldToMap: name (the full path), type (dataType.typeName:
    # "struct" for a struct), nullable, metadata. DescribeDeltaHistorySuite "operations - add columns" expects
    # [{"column":{"name":"v3","type":"long","nullable":true,"metadata":{}}},{"column":{...},"position":"AFTER v1"}]
    expect("ADD COLUMNS", {"columns": (
        '[{"column":{"name":"v3","type":"long","nullable":true,"metadata":{}}},'
        '{"column":{"name":"v4","type":"integer","nullable":true,"metadata":{}},"position":"AFTER id"},'
        '{"column":{"name":"s.y","type":"string","nullable":true,"metadata":{"comment":"why"}}},'
        '{"column":{"name":"t","type":"struct","nullable":true,"metadata":{}}}]')})
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN v4 COMMENT 'four'")
    # ChangeColumn: "column" -> JsonUtils.toJson(structFieldToMap(columnPath, newColumn)) ++ colPosition.map(...)
    expect("CHANGE COLUMN", {"column": '{"name":"v4","type":"integer","nullable":true,"metadata":{"comment":"four"}}'})
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN v4 FIRST")
    expect("CHANGE COLUMN", {"column": '{"name":"v4","type":"integer","nullable":true,"metadata":{"comment":"four"}}',
                             "position": "FIRST"})
    table.addFeatureSupport("changeDataFeed")
    # UpgradeProtocol: "newProtocol" -> JsonUtils.toJson(Map(minReaderVersion, minWriterVersion, readerFeatures,
    # writerFeatures)); DescribeDeltaHistorySuite "operations - upgrade protocol" spells it out that way
    protocol = _action(root, _version(root), "protocol")
    expect("UPGRADE PROTOCOL", {"newProtocol": _compact({k: protocol[k] for k in (
        "minReaderVersion", "minWriterVersion", "readerFeatures", "writerFeatures")})})
    table.dropFeatureSupport("checkConstraints")
    # DropTableFeature: Map("featureName" -> featureName, "truncateHistory" -> truncateHistory), always both
    expect("DROP FEATURE", {"featureName": "checkConstraints", "truncateHistory": False})
    table.restoreToVersion(3)
    # Restore: Map("version" -> version, "timestamp" -> timestamp), two Options: a number and null
    expect("RESTORE", {"version": 3, "timestamp": None})
    previous = history(root, limit=2)[1]["timestamp"]
    stamp = dt.datetime.fromtimestamp(previous / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    table.restoreToTimestamp(stamp)
    expect("RESTORE", {"version": None, "timestamp": stamp})
    return root


def _builder_tables(base: Path, out: list[Expected]) -> list[str]:
    """CREATE / REPLACE / CREATE OR REPLACE TABLE, a clustered table's OPTIMIZE and CLUSTER BY, CLONE."""
    plain, clustered = str(base / "builder"), str(base / "clustered")
    # CreateTable / ReplaceTable: "isManaged" -> isManaged.toString (a String), "description" ->
    # Option(metadata.description) (null without a comment), partitionBy / clusterBy / properties as JsonUtils.toJson
    DeltaTable.create(None).location(plain).addColumn("x", "INT").addColumn("y", "STRING").execute()
    config = _compact(_action(plain, 0, "metaData")["configuration"])
    out.append(Expected(plain, 0, "CREATE TABLE", {
        "isManaged": "false", "description": None, "partitionBy": "[]", "clusterBy": "[]", "properties": config}))
    DeltaTable.replace(None).location(plain).addColumn("x", "BIGINT").addColumn("z", "STRING").partitionedBy("x") \
        .comment("again é").property("owner", "ü").execute()
    config = _compact(_action(plain, 1, "metaData")["configuration"])
    assert '"owner":"ü"' in config  # Jackson writes UTF-8, it does not escape
    out.append(Expected(plain, 1, "REPLACE TABLE", {
        "isManaged": "false", "description": "again é", "partitionBy": '["x"]', "clusterBy": "[]", "properties": config}))
    DeltaTable.createOrReplace(None).location(plain).addColumn("x", "BIGINT").addColumn("z", "STRING").execute()
    config = _compact(_action(plain, 2, "metaData")["configuration"])
    out.append(Expected(plain, 2, "CREATE OR REPLACE TABLE", {
        "isManaged": "false", "description": None, "partitionBy": "[]", "clusterBy": "[]", "properties": config}))

    DeltaTable.create(None).location(clustered).addColumn("x", "INT").addColumn("y", "INT").clusterBy("x", "y").execute()
    config = _compact(_action(clustered, 0, "metaData")["configuration"])
    out.append(Expected(clustered, 0, "CREATE TABLE", {
        "isManaged": "false", "description": None, "partitionBy": "[]", "clusterBy": '["x","y"]', "properties": config}))
    for i in range(2):
        dvengine.write(pa.table({"x": pa.array([i], pa.int32()), "y": pa.array([i], pa.int32())}), clustered, mode="append")
    DeltaTable.forPath(None, clustered).optimize().executeCompaction()
    # Optimize with clusterBy: "zOrderBy" empty, ++ clusterBy.filter(_.nonEmpty).map(_ => "isFull" -> isFull)
    out.append(Expected(clustered, 3, "OPTIMIZE", {
        "predicate": "[]", "zOrderBy": "[]", "clusterBy": '["x","y"]', "auto": False, "isFull": False}))
    dvengine.sql(None, f"ALTER TABLE delta.`{clustered}` CLUSTER BY (y)")
    # ClusterBy(oldClusteringColumns: String, newClusteringColumns: String): comma-joined names (mkString(","))
    out.append(Expected(clustered, 4, "CLUSTER BY", {"oldClusteringColumns": "x,y", "newClusteringColumns": "y"}))

    clone = str(base / "clone")
    source = DeltaTable.forPath(None, clustered)
    source.clone(clone, isShallow=False)  # deep: DuckDB 1.4 resolves no absolute file URI of a shallow clone
    # Clone: Map("source" -> source, "sourceVersion" -> sourceVersion) (a Long); isShallow is dvengine's extra key
    out.append(Expected(clone, 0, "CLONE", {"source": source.path, "sourceVersion": 4, "isShallow": False}))
    return [plain, clustered, clone]


def _widened_table(base: Path, out: list[Expected]) -> str:
    """ALTER COLUMN ... TYPE of a nested field (a table of its own: delta-rs 1.6 reads no typeWidening table)."""
    root = str(base / "widened")
    dvengine.write(pa.table({"id": pa.array([1], pa.int64()), "s": pa.array([{"x": 1}], S)}), root,
                   configuration={"delta.enableTypeWidening": "true"})
    change_column_type(root, "S.X", "BIGINT")
    # ALTER COLUMN ... TYPE is a ChangeColumn too: the name is the full path (UnresolvedAttribute(colPath :+
    # field.name)), the type the new one; delta.typeChanges goes into the schema, not into the logged field
    out.append(Expected(root, 1, "CHANGE COLUMN", {"column": '{"name":"s.x","type":"long","nullable":true,"metadata":{}}'}))
    return root


def _mapped_table(base: Path, out: list[Expected]) -> str:
    """RENAME / DROP COLUMN (column mapping) and CHANGE COLUMN on a mapped field."""
    root = str(base / "mapped")
    dvengine.sql(None, f"CREATE TABLE delta.`{root}` (id BIGINT NOT NULL, `a.b` INT, w INT, s STRUCT<x: INT>) USING delta "
                       "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    config = _compact(_action(root, 0, "metaData")["configuration"])
    out.append(Expected(root, 0, "CREATE TABLE", {
        "isManaged": "false", "description": None, "partitionBy": "[]", "clusterBy": "[]", "properties": config}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` RENAME COLUMN `a.b` TO c")
    # RenameColumn: "oldColumnPath" -> UnresolvedAttribute(oldColumnPath).name: a part holding a dot in backquotes
    out.append(Expected(root, 1, "RENAME COLUMN", {"oldColumnPath": "`a.b`", "newColumnPath": "c"}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` RENAME COLUMN s.x TO xx")
    out.append(Expected(root, 2, "RENAME COLUMN", {"oldColumnPath": "s.x", "newColumnPath": "s.xx"}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` DROP COLUMN w")
    # DropColumns: "columns" -> JsonUtils.toJson(colsToDrop.map(UnresolvedAttribute(_).name))
    out.append(Expected(root, 3, "DROP COLUMNS", {"columns": '["w"]'}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN c COMMENT 'see'")
    # The changed field is the snapshot schema's (AbstractDeltaCatalog.alterTable: table.initialSnapshot.schema),
    # so its column mapping metadata is logged with it
    fields = {f["name"]: f for f in json.loads(_action(root, 4, "metaData")["schemaString"])["fields"]}
    out.append(Expected(root, 4, "CHANGE COLUMN", {"column": _compact(
        {"name": "c", "type": "integer", "nullable": True, "metadata": fields["c"]["metadata"]})}))
    dvengine.sql(None, f"ALTER TABLE delta.`{root}` ALTER COLUMN id DROP NOT NULL")
    fields = {f["name"]: f for f in json.loads(_action(root, 5, "metaData")["schemaString"])["fields"]}
    out.append(Expected(root, 5, "CHANGE COLUMN", {"column": _compact(
        {"name": "id", "type": "long", "nullable": True, "metadata": fields["id"]["metadata"]})}))
    return root


def _feature_drops(base: Path, out: list[Expected]) -> list[str]:
    """DROP FEATURE rowTracking (SET TBLPROPERTIES, ROW TRACKING UNBACKFILL, DROP FEATURE) and the REORG
    of DROP FEATURE deletionVectors."""
    tracked, dvs = str(base / "tracked"), str(base / "dvs")
    dvengine.write(pa.table({"id": [1, 2]}), tracked, configuration={"delta.enableRowTracking": "true"})
    DeltaTable.forPath(None, tracked).dropFeatureSupport("rowTracking")
    out.append(Expected(tracked, 1, "SET TBLPROPERTIES", {
        "properties": '{"delta.enableRowTracking":"false","delta.rowTrackingSuspended":"true"}'}))
    # RowTrackingUnBackfill: "batchId" -> JsonUtils.toJson(batchId), encoded twice: the JSON string "0"
    out.append(Expected(tracked, 2, "ROW TRACKING UNBACKFILL", {"batchId": "0"}))
    out.append(Expected(tracked, 3, "DROP FEATURE", {"featureName": "rowTracking", "truncateHistory": False}))

    dvengine.write(pa.table({"id": list(range(10))}), dvs)
    DeltaTable.forPath(None, dvs).delete("id = 3")
    with pytest.raises(OperationNotAllowedError, match="still reference DVs"):
        DeltaTable.forPath(None, dvs).dropFeatureSupport("deletionVectors")  # history keeps DVs: stops after the purge
    out.append(Expected(dvs, 2, "SET TBLPROPERTIES", {"properties": '{"delta.enableDeletionVectors":"false"}'}))
    # Reorg: super.parameters ++ Map("applyPurge" -> applyPurge)
    out.append(Expected(dvs, 3, "REORG", {"predicate": "[]", "applyPurge": True}))
    return [tracked, dvs]


def _convert_and_auto_compaction(base: Path, out: list[Expected]) -> list[str]:
    converted, compacted = base / "converted", str(base / "compacted")
    for p in ("a", "b"):
        (converted / f"p={p}").mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), converted / f"p={p}" / "part-0.parquet")
    DeltaTable.convertToDelta(None, f"parquet.`{converted}`", "p STRING")
    # Convert: Map("numFiles" -> numFiles (a Long), "partitionedBy" -> JsonUtils.toJson(partitionBy),
    # "collectStats" -> collectStats (a Boolean)) ++ sourceFormat.map("sourceFormat" -> _)
    out.append(Expected(str(converted), 0, "CONVERT", {
        "numFiles": 2, "partitionedBy": '["p"]', "collectStats": True, "sourceFormat": "parquet"}))
    with pytest.MonkeyPatch.context() as env:
        env.setenv(env_key(auto_compact.CONF_MIN_NUM_FILES), "5")
        env.delenv(env_key(auto_compact.CONF_ENABLED), raising=False)
        dvengine.write(pa.table({"id": [0]}), compacted, configuration={auto_compact.PROPERTY_AUTO_COMPACT: "true"})
        for i in range(1, 5):
            dvengine.write(pa.table({"id": [i]}), compacted, mode="append")
    # AutoCompact runs Optimize(predicate, auto = true)
    out.append(Expected(compacted, 5, "OPTIMIZE", {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": True}))
    return [str(converted), compacted]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Expected], list[str]]:
    base = tmp_path_factory.mktemp("operations")
    expected: list[Expected] = []
    roots = [_main_table(base, expected), *_builder_tables(base, expected), _mapped_table(base, expected),
             _widened_table(base, expected),
             *_feature_drops(base, expected), *_convert_and_auto_compaction(base, expected)]
    return expected, roots


def _by_root(expected: list[Expected]) -> Iterator[tuple[str, list[Expected]]]:
    for root in dict.fromkeys(e.root for e in expected):
        yield root, [e for e in expected if e.root == root]


def test_every_operation_writes_deltas_json_shape(scenario: tuple[list[Expected], list[str]]) -> None:
    expected, _ = scenario
    assert len({e.operation for e in expected}) >= 22
    for e in expected:
        info = _commit_info(e.root, e.version)
        assert info["operation"] == e.operation, (e.root, e.version)
        assert _typed(info["operationParameters"]) == _typed(e.parameters), (e.root, e.version, e.operation)


def test_list_and_map_parameters_are_compact_json_text(scenario: tuple[list[Expected], list[str]]) -> None:
    """No ", " / ": " separator anywhere inside a pre-encoded value (the old dvengine encoding had them)."""
    expected, _ = scenario
    for e in expected:
        for key, value in _commit_info(e.root, e.version)["operationParameters"].items():
            if isinstance(value, str) and value[:1] in ("[", "{"):
                assert _compact(json.loads(value)) == value, (e.operation, key, value)


def test_delta_rs_history_reads_every_commit(scenario: tuple[list[Expected], list[str]]) -> None:
    expected, _ = scenario
    for root, entries in _by_root(expected):
        theirs = {h["version"]: h for h in RsTable(root).history()}
        for e in entries:
            assert theirs[e.version]["operation"] == e.operation
            assert _typed(theirs[e.version]["operationParameters"]) == _typed(e.parameters), (e.operation, e.version)


def test_history_shows_describe_historys_strings(scenario: tuple[list[Expected], list[str]]) -> None:
    """DESCRIBE HISTORY's operationParameters is a map<string,string>: true -> "true", 3 -> "3", null stays null."""
    expected, _ = scenario
    for root, entries in _by_root(expected):
        records = {r["version"]: r for r in history(root)}
        for e in entries:
            want = {k: _legacy_string(v) for k, v in e.parameters.items()}
            assert records[e.version]["operationParameters"] == want, (e.operation, e.version)


def test_other_readers_read_the_tables(scenario: tuple[list[Expected], list[str]]) -> None:
    """delta-rs and DuckDB (delta-kernel-rs) read tables whose logs hold booleans, numbers and nulls."""
    _, roots = scenario
    for root in roots:
        if root.endswith(("mapped", "widened")):
            continue  # a dotted column name / typeWidening (delta-rs refuses it): beside the point here
        columns = [f.name for f in DeltaTable.forPath(None, root).snapshot().schema.fields]
        simple = [c for c in columns if c not in ("s", "t")]
        want = rows_arrow(root, simple)
        assert rows_delta_rs(root, simple) == want, root
        assert rows_duckdb(root, simple) == want, root


# --- history() of logs other writers wrote ---------------------------------------------------------


def test_golden_history_parameters_are_read_unchanged() -> None:
    """Delta Spark's own logs hold only string parameters: history() returns them as written."""
    for table in ("dv-partitioned-with-checkpoint", "kernel-table-with-dv-small", "basic-dv-no-checkpoint"):
        root = GOLDEN_TABLES / table
        records = history(str(root))
        assert records
        for r in records:
            assert r["operationParameters"] == _commit_info(str(root), r["version"])["operationParameters"]


def _hand_written_log(root: Path, parameters: dict[str, Any]) -> None:
    """Version 0 of a one-column table whose commitInfo carries ``parameters`` as given."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    lines = [
        {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "OPTIMIZE", "operationParameters": parameters,
                        "isolationLevel": "Serializable", "isBlindAppend": False}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "a", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                      "partitionColumns": [], "configuration": {}, "createdTime": 1}},
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_delta_shaped_parameters_read_as_describe_history_shows_them(tmp_path: Path) -> None:
    """ActionSerializerSuite: numFiles 23 -> "23", collectStats false -> "false", k1 null -> null."""
    raw = {"predicate": "[]", "auto": True, "collectStats": False, "numFiles": 23, "k1": None, "odd": ["x", 1]}
    _hand_written_log(tmp_path / "t", raw)
    assert history(str(tmp_path / "t"))[0]["operationParameters"] == {
        "predicate": "[]", "auto": "true", "collectStats": "false", "numFiles": "23", "k1": None,
        "odd": '["x",1]',  # never written by Delta (its legacy reader fails on it): shown as JSON text
    }
    assert RsTable(str(tmp_path / "t")).history()[0]["operationParameters"] == raw  # delta-rs keeps raw values


def test_old_dvengine_all_string_parameters_still_read(tmp_path: Path) -> None:
    """Before this change dvengine wrote every value as a string ("auto": "true", "description": "null",
    lists with ", "): history() shows them as they are, as Delta's DESCRIBE HISTORY would."""
    old = {"auto": "true", "description": "null", "zOrderBy": '["x", "y"]', "version": "3"}
    _hand_written_log(tmp_path / "t", old)
    assert history(str(tmp_path / "t"))[0]["operationParameters"] == old
    assert RsTable(str(tmp_path / "t")).history()[0]["operationParameters"] == old


# --- operationMetrics as DESCRIBE HISTORY shows them -----------------------------------------------
# CommitInfo.operationMetrics is an Option[Map[String, String]] Jackson deserializes with its
# StringDeserializer, which takes a JSON number / boolean as its text: delta-rs's 16 reads "16".

# Verbatim from delta-io/delta-rs (b0a231c) crates/test/tests/data/python-0.25.5-checkpoint/_delta_log/
# 00000000000000000000.json, written by delta-rs python 0.25.5 (its add line left out: history reads no data).
DELTA_RS_GOLDEN_V0 = (
    '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
    '{"metaData":{"id":"5d650ad7-a5bc-41ef-942d-8cb1911e929f","name":null,"description":null,"format":{"provider":'
    '"parquet","options":{}},"schemaString":"{\\"type\\":\\"struct\\",\\"fields\\":[{\\"name\\":\\"x\\",\\"type\\":'
    '\\"long\\",\\"nullable\\":true,\\"metadata\\":{}}]}","partitionColumns":[],"createdTime":1753290963616,'
    '"configuration":{}}}\n'
    '{"commitInfo":{"timestamp":1753290963621,"operation":"WRITE","operationParameters":{"mode":"ErrorIfExists"},'
    '"operationMetrics":{"execution_time_ms":4,"num_added_files":1,"num_added_rows":3,"num_partitions":0,'
    '"num_removed_files":0},"clientVersion":"delta-rs.py-0.25.5"}}\n'
)


def test_delta_rs_golden_commit_metrics_read_as_strings(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / f"{0:020d}.json").write_text(DELTA_RS_GOLDEN_V0)
    (record,) = history(str(root))
    assert record["operationMetrics"] == {
        "execution_time_ms": "4", "num_added_files": "1", "num_added_rows": "3", "num_partitions": "0",
        "num_removed_files": "0",
    }
    assert record["clientVersion"] == "delta-rs.py-0.25.5"  # other fields as written


def test_delta_rs_written_metrics_read_as_strings(tmp_path: Path) -> None:
    """A table delta-rs writes and deletes from: its numbers read as their text, strings untouched."""
    from deltalake import write_deltalake

    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    RsTable(root).delete("id = 2")
    dvengine.write(pa.table({"id": pa.array([4], pa.int64())}), root, mode="append")
    records = history(root)
    assert [r["version"] for r in records] == [2, 1, 0]
    for r in records:
        raw = _commit_info(root, r["version"])["operationMetrics"]
        assert r["operationMetrics"] == {k: _legacy_string(v) for k, v in raw.items()}
        assert all(isinstance(v, str) for v in r["operationMetrics"].values())
    rs_raw = [_commit_info(root, v)["operationMetrics"] for v in (1, 0)]
    assert all(isinstance(v, int) and not isinstance(v, bool) for m in rs_raw for v in m.values())  # numbers as written
    assert records[1]["operationMetrics"]["num_deleted_rows"] == "1"
    assert records[2]["operationMetrics"]["num_added_rows"] == "3"
    assert records[0]["operationMetrics"] == _commit_info(root, 2)["operationMetrics"]  # dvengine's: strings already
    rs_history = {h["version"]: h for h in RsTable(root).history()}
    assert rs_history[1]["operationMetrics"]["num_deleted_rows"] == 1  # delta-rs keeps raw values


def test_golden_history_metrics_are_read_unchanged() -> None:
    """Delta Spark's own logs hold only string metrics: history() returns them as written."""
    for table in ("dv-partitioned-with-checkpoint", "kernel-table-with-dv-small", "basic-dv-no-checkpoint"):
        root = GOLDEN_TABLES / table
        for r in history(str(root)):
            assert r.get("operationMetrics") == _commit_info(str(root), r["version"]).get("operationMetrics")


def test_commits_without_metrics_log_an_empty_map(tmp_path: Path) -> None:
    """Delta's ``OptimisticTransaction.getOperationMetrics`` gives every commit ``Some(metrics)``
    while ``spark.databricks.delta.history.metricsEnabled`` is on (the default), so a metadata-only
    commit logs ``"operationMetrics":{}``, not no field."""
    root = tmp_path / "t"
    dvengine.write(pa.table({"a": [1, 2]}), str(root))
    set_version = set_table_properties(str(root), {"delta.logRetentionDuration": "interval 30 days"})
    add_version = add_constraint(str(root), "positive", "a > 0")
    for version, operation in ((set_version, "SET TBLPROPERTIES"), (add_version, "ADD CONSTRAINT")):
        line = next(json.loads(x) for x in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
                    if x.startswith('{"commitInfo"'))
        assert line["commitInfo"]["operation"] == operation
        assert line["commitInfo"]["operationMetrics"] == {}
