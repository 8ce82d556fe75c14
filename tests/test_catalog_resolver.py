"""One name resolver (issue 26): ``DeltaTable.forName(None, name)``, the table builders given no
session and ``dvengine.sql(None, ...)`` look names up in the same warehouse: the active session's
when there is one (as delta-spark's builders take the active session), else the environment's.

Before, ``forName(None, ...)`` read only the environment while the builders used the active
session's warehouse, so a table a builder had just created was "not found" by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dvengine
from dvengine import DeltaTable
from dvengine.errors import TableNotFoundError
from dvengine.storage.catalog import CATALOG_FILE, WAREHOUSE_OVERRIDE_CONF


def test_with_an_active_session_every_entry_point_uses_its_warehouse(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_wh = Path(spark.conf.get(WAREHOUSE_OVERRIDE_CONF))
    monkeypatch.setenv("DVENGINE_CATALOG_WAREHOUSEDIR", str(tmp_path / "env_warehouse"))  # must not be used
    built, created = f"built_{uuid.uuid4().hex[:8]}", f"created_{uuid.uuid4().hex[:8]}"
    DeltaTable.create(None).tableName(built).addColumn("id", "BIGINT").execute()
    dvengine.sql(None, f"CREATE TABLE {created} (id BIGINT) USING delta")
    dvengine.sql(None, f"INSERT INTO {created} VALUES (7)")
    for name in (built, created):
        by_none, by_session = DeltaTable.forName(None, name), DeltaTable.forName(spark, name)
        assert by_none.path == by_session.path == str(session_wh / name)
    assert DeltaTable.forName(None, created).toArrow().column("id").to_pylist() == [7]
    assert not (tmp_path / "env_warehouse").exists()
    assert built in (session_wh / CATALOG_FILE).read_text() and created in (session_wh / CATALOG_FILE).read_text()
    with pytest.raises(TableNotFoundError, match=str(session_wh)):
        DeltaTable.forName(None, f"missing_{uuid.uuid4().hex[:8]}")


def test_without_a_session_the_environment_warehouse_serves_all(tmp_path: Path) -> None:
    """A fresh interpreter without a SparkSession: builders, SQL and forName(None) meet in
    ``DVENGINE_CATALOG_WAREHOUSEDIR``."""
    warehouse = tmp_path / "wh"
    script = textwrap.dedent("""
        import json
        import pyarrow as pa
        import dvengine
        from dvengine import DeltaTable
        DeltaTable.create(None).tableName("b1").addColumn("id", "BIGINT").execute()
        dvengine.sql(None, "CREATE TABLE s1 (id BIGINT) USING delta; INSERT INTO s1 VALUES (1), (2)")
        dvengine.write(pa.table({"id": pa.array([3], pa.int64())}), DeltaTable.forName(None, "b1").path, mode="append")
        print(json.dumps([DeltaTable.forName(None, "b1").path, DeltaTable.forName(None, "s1").path,
                          sorted(DeltaTable.forName(None, "s1").toArrow().column("id").to_pylist()),
                          DeltaTable.forName(None, "b1").toArrow().column("id").to_pylist()]))
    """)
    env = {**os.environ, "DVENGINE_CATALOG_WAREHOUSEDIR": str(warehouse)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [str(warehouse / "b1"), str(warehouse / "s1"), [1, 2], [3]]


def test_write_to_a_name_created_in_process_is_readable_by_path(tmp_path: Path, spark: Any) -> None:
    """forName(None) and forName(spark) give the same table object path, so Arrow and Spark reads agree."""
    name = f"rw_{uuid.uuid4().hex[:8]}"
    DeltaTable.createIfNotExists(None).tableName(name).addColumn("id", "BIGINT").execute()
    dvengine.write(pa.table({"id": pa.array([1, 2], pa.int64())}), DeltaTable.forName(None, name).path, mode="append")
    assert sorted(r.id for r in DeltaTable.forName(spark, name).toDF().collect()) == [1, 2]
