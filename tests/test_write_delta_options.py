"""``df.write.format("delta").option("delta.<property>", v)`` on a write that creates the table
(issue 26): the ``delta.*`` options become its table properties, as in Delta 2.1+
(``DeltaDataSource.createRelation`` hands ``parameters.filterKeys(_.startsWith("delta."))``
through ``DeltaConfigs.validateConfigurations`` to ``WriteIntoDelta``, which uses them only when
the table does not exist yet). Other options (``mergeSchema``) are not stored. Checked in the raw
log (configuration, protocol, column mapping metadata) and by delta-rs reading the table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from interop import rows_delta_rs

from dvengine.commands.source_options import parse_write_options
from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.storage.catalog import WAREHOUSE_OVERRIDE_CONF


def _last(root: Path, kind: str) -> dict[str, Any]:
    found = [json.loads(line)[kind] for p in sorted((root / "_delta_log").glob("*.json"))
             for line in p.read_text().splitlines() if kind in json.loads(line)]
    return found[-1]


def test_delta_options_are_table_properties_spelled_as_delta_spells_them() -> None:
    request = parse_write_options(
        {"DELTA.COLUMNMAPPING.MODE": "name", "delta.appendOnly": "true", "Delta.Feature.AllowColumnDefaults": "supported",
         "delta.myOwn.Key": "x", "mergeSchema": "true", "path": "/t"},
        None, "error", None,
    )
    assert request.configuration == {"delta.columnMapping.mode": "name", "delta.appendOnly": "true",
                                     "delta.feature.allowcolumndefaults": "supported", "delta.myOwn.Key": "x"}
    assert parse_write_options({"mergeSchema": "true"}, "/t", "append", None).configuration is None


@pytest.mark.parametrize("option", ["replaceOn", "REPLACEUSING"])
def test_delta_4_replace_on_and_using_are_refused_not_ignored(option: str) -> None:
    """Delta 4's ``replaceOn`` / ``replaceUsing`` (DeltaOptions) replace the rows they match; ignored,
    the overwrite would replace the whole table, so they are refused naming the option."""
    with pytest.raises(UnsupportedFeatureError, match=option.lower()):
        parse_write_options({option: "id", "path": "/t"}, None, "overwrite", None)


def test_a_creating_save_takes_delta_options_as_properties(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, v string")
    (df.write.format("delta").option("delta.columnMapping.mode", "name").option("DELTA.ENABLECHANGEDATAFEED", "true")
     .option("delta.feature.allowColumnDefaults", "supported").option("mergeSchema", "true").save(str(root)))
    meta, protocol = _last(root, "metaData"), _last(root, "protocol")
    config = meta["configuration"]
    assert config["delta.columnMapping.mode"] == "name" and config["delta.enableChangeDataFeed"] == "true"
    assert config["delta.columnMapping.maxColumnId"] == "2"
    assert not any(k.lower().startswith("delta.feature.") or k.lower() == "mergeschema" for k in config)
    assert {"columnMapping", "allowColumnDefaults", "changeDataFeed"} <= set(protocol["writerFeatures"])
    assert "columnMapping" in protocol["readerFeatures"]
    fields = json.loads(meta["schemaString"])["fields"]
    assert all(f["metadata"]["delta.columnMapping.physicalName"].startswith("col-") for f in fields)
    assert rows_delta_rs(root, ["id", "v"]) == [(1, "a"), (2, "b")]

    # On an existing table Delta ignores them: the configuration stays as it was.
    spark.createDataFrame([(3, "c")], "id bigint, v string").write.format("delta").mode("append") \
        .option("delta.enableChangeDataFeed", "false").option("delta.appendOnly", "true").save(str(root))
    assert _last(root, "metaData")["configuration"] == config
    assert rows_delta_rs(root, ["id", "v"]) == [(1, "a"), (2, "b"), (3, "c")]


def test_save_as_table_and_bad_values(spark: Any, tmp_path: Path) -> None:
    name = "write_options_t"
    df = spark.createDataFrame([(1, "a")], "id bigint, v string")
    df.write.format("delta").option("delta.columnMapping.mode", "id").option("delta.appendOnly", "true").saveAsTable(name)
    root = Path(spark.conf.get(WAREHOUSE_OVERRIDE_CONF)) / name
    config = _last(root, "metaData")["configuration"]
    assert config["delta.columnMapping.mode"] == "id" and config["delta.appendOnly"] == "true"
    bad = tmp_path / "bad"
    with pytest.raises(InvalidArgumentError, match="delta.appendOnly"):
        df.write.format("delta").option("delta.appendOnly", "maybe").save(str(bad))
    assert not bad.exists() or not any(bad.rglob("*.json"))
