"""Every VACUUM checks that dvengine can write the table first, as Delta's ``gc`` starts with
``deltaLog.protocolWrite(snapshot.protocol)``: dry runs, runs with VACUUM logging off (S3's
default), FULL and LITE alike. A writer that does not know a writer feature must not delete the
table's files (the feature may keep files alive in ways it cannot see)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from dml_helpers import folder_state
from interop import rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.errors import UnsupportedFeatureError
from dvengine.maintenance.vacuum import vacuum

LOGGING_ENV = "SPARK_DATABRICKS_DELTA_VACUUM_LOGGING_ENABLED"


def _table_with_unknown_writer_feature(root: Path, feature: str) -> Path:
    """A dvengine table, a DV delete, an old orphan, then a commit (as a newer writer leaves it)
    whose protocol lists ``feature`` among the writer features; everything aged a month."""
    dvengine.write(pa.table({"id": pa.array(range(10), pa.int64())}), str(root),
                   configuration={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(None, str(root)).delete("id < 3")
    (root / "part-00000-orphan.c000.snappy.parquet").write_bytes(b"no commit names this file")
    log = root / "_delta_log"
    versions = sorted(int(f.name[:20]) for f in log.glob("*.json"))
    protocol = None
    for v in versions:
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            protocol = json.loads(line).get("protocol", protocol)
    assert protocol is not None
    protocol = {**protocol, "minWriterVersion": 7,
                "writerFeatures": sorted({*protocol.get("writerFeatures", []), feature})}
    info = {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES",
            "operationParameters": {}, "engineInfo": "a newer writer"}
    (log / f"{versions[-1] + 1:020d}.json").write_text(
        json.dumps({"commitInfo": info}) + "\n" + json.dumps({"protocol": protocol}) + "\n")
    month_ago = time.time() - 30 * 86400
    for dirpath, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(dirpath, name), (month_ago, month_ago))
    return root


@pytest.mark.parametrize("feature", ["icebergCompatV2", "aWriterFeatureFromTheFuture"])
@pytest.mark.parametrize(("dry_run", "logging", "kind"), [
    (True, None, "FULL"),     # a dry run deletes nothing, but Delta refuses it all the same
    (False, "false", "FULL"),  # logging off (S3's default): no START commit to check the protocol
    (False, None, "FULL"),
    (False, "false", "LITE"),
    (True, None, "LITE"),
])
def test_every_vacuum_refuses_a_table_it_cannot_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, feature: str,
                                                      dry_run: bool, logging: str | None, kind: str) -> None:
    root = _table_with_unknown_writer_feature(tmp_path / "t", feature)
    if logging is None:
        monkeypatch.delenv(LOGGING_ENV, raising=False)
    else:
        monkeypatch.setenv(LOGGING_ENV, logging)
    before = folder_state(root)
    rows = rows_delta_rs(root, ["id"])
    with pytest.raises(UnsupportedFeatureError, match=feature):
        vacuum(str(root), retention_hours=0, dry_run=dry_run, enforce_retention=False, vacuum_type=kind)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        DeltaTable.forPath(None, str(root)).vacuum(0.0, dryRun=dry_run, enforceRetention=False, vacuumType=kind)
    assert folder_state(root) == before  # no file deleted, no commit, no _last_vacuum_info
    assert (root / "part-00000-orphan.c000.snappy.parquet").exists()
    assert rows_delta_rs(root, ["id"]) == rows_duckdb(root, ["id"]) == rows
