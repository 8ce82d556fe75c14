"""Generated columns and CHECK constraints that use Spark functions, changed by both executors.

A table whose log is written as Delta Spark writes ``CREATE TABLE`` with generated columns over
date/time and string functions and ``ALTER TABLE ADD CONSTRAINT`` with functions (the expressions
in the field metadata and the table properties, the features in the protocol) gets the same appends,
UPDATEs, a DV DELETE and a MERGE on the local executor and on the Spark executor (which computes
generated values with Spark SQL). Truth: the two tables read by delta-rs hold the same rows, those
rows' generated values equal a Python model of the expressions, DuckDB reads the same, and each
refused change (a row breaking a constraint, a wrong generated value) leaves the table unchanged.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb

import dvengine
from dvengine import DeltaTable
from dvengine.errors import ConstraintViolationError
from dvengine.log import latest_version

GENERATED = {
    "day": ("date", "CAST(ts AS DATE)"),
    "ym": ("string", "date_format(ts, 'yyyy-MM')"),
    "hr": ("integer", "hour(ts)"),
    "code": ("string", "upper(substring(trim(name), 1, 3))"),
    "bucket": ("long", "CASE WHEN qty IS NULL THEN -1 ELSE pmod(qty, 7) END"),
}
CONSTRAINTS = {
    "name_len": "length(trim(name)) > 0",
    "qty_ok": "coalesce(qty, 0) >= 0 AND pmod(coalesce(qty, 0), 100) <> 99",
    "recent": "year(ts) >= 2000 AND date_trunc('DAY', ts) <= TIMESTAMP '2030-01-01 00:00:00'",
}
COLUMNS = ["id", "name", "ts", "qty", *GENERATED]
UTC = dt.UTC


def _delta_spark_table(root: Path) -> str:
    """commit 0 as Delta Spark 4 writes CREATE TABLE with the generated columns, then one commit per
    ADD CONSTRAINT folded into it (the properties and the checkConstraints feature)."""
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "qty", "type": "integer", "nullable": True, "metadata": {}},
    ] + [{"name": n, "type": t, "nullable": True, "metadata": {"delta.generationExpression": e}}
         for n, (t, e) in GENERATED.items()]
    now = int(time.time() * 1000)
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "isolationLevel": "Serializable",
                        "isBlindAppend": True, "operationMetrics": {},
                        "engineInfo": "Apache-Spark/4.0.0 Delta-Lake/4.0.0", "txnId": str(uuid.uuid4())}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["appendOnly", "checkConstraints", "deletionVectors", "generatedColumns",
                                         "invariants"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true",
                                        **{f"delta.constraints.{k}": v for k, v in CONSTRAINTS.items()}},
                      "createdTime": now}},
    ]
    os.makedirs(root / "_delta_log")
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return str(root)


def _model(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The row with its generated values computed in Python (UTC, as the session)."""
    id_, name, ts, qty = row
    utc = ts.astimezone(UTC) if ts is not None else None
    return (id_, name, ts, qty,
            None if utc is None else utc.date(),
            None if utc is None else utc.strftime("%Y-%m"),
            None if utc is None else utc.hour,
            None if name is None else name.strip(" ")[:3].upper(),
            -1 if qty is None else qty % 7)


def _arrow(rows: list[tuple[Any, ...]], **generated: Any) -> pa.Table:
    ids, names, tss, qtys = zip(*rows)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string()),
                     "ts": pa.array(tss, pa.timestamp("us", tz="UTC")), "qty": pa.array(qtys, pa.int32()),
                     **{k: pa.array(v) for k, v in generated.items()}})


START = [
    (1, " alpha", dt.datetime(2024, 2, 29, 23, 30, tzinfo=UTC), 10),
    (2, "Bravo", dt.datetime(2001, 1, 1, 0, 0, 1, tzinfo=UTC), None),
    (3, "charlie ", dt.datetime(2024, 12, 31, 12, 0, tzinfo=UTC), 15),
    (4, "dé", dt.datetime(2010, 6, 15, 5, 45, 30, 250000, tzinfo=UTC), 0),
]
UPDATED_TS = dt.datetime(2025, 6, 1, 10, 30, tzinfo=UTC)
SOURCE = [(3, "zulu", dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC), 22),
          (9, " new one", dt.datetime(2029, 12, 31, 23, 59, 59, tzinfo=UTC), 700)]


def _expected() -> list[tuple[Any, ...]]:
    rows = {r[0]: r for r in START}
    rows[1] = (1, rows[1][1], UPDATED_TS, rows[1][3])
    rows[2] = (2, "bravo", rows[2][2], 41)
    rows[3] = SOURCE[0]
    del rows[4]
    rows[9] = SOURCE[1]
    return [_model(r) for r in rows.values()]


def _refused(root: str, change: Any, match: str) -> None:
    version = latest_version(root)
    with pytest.raises(ConstraintViolationError, match=match):
        change()
    assert latest_version(root) == version


def _change(root: str, spark: Any, engine: str) -> None:
    """The same sequence on either executor: appends, refused rows, UPDATEs, a DV DELETE, a MERGE."""
    table = DeltaTable.forPath(spark if engine == "spark" else None, root)

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        if engine == "local":
            return _arrow(rows)
        return spark.createDataFrame(rows, "id bigint, name string, ts timestamp, qty int").coalesce(1)  # one file

    dvengine.write(frame(START), root, mode="append")  # every generated value computed
    _refused(root, lambda: dvengine.write(frame([(5, "   ", UPDATED_TS, 1)]), root, mode="append"), "name_len")
    _refused(root, lambda: dvengine.write(frame([(5, "echo", dt.datetime(1999, 1, 1, tzinfo=UTC), 1)]), root,
                                          mode="append"), "recent")
    if engine == "local":  # a provided generated value that disagrees with the expression
        wrong = _arrow([(5, "echo", UPDATED_TS, 1)], day=[dt.date(2025, 6, 2)], ym=["2025-06"],
                       hr=pa.array([10], pa.int32()), code=["ECH"], bucket=[1])
        _refused(root, lambda: dvengine.write(wrong, root, mode="append"), "generated column day")
    _refused(root, lambda: table.update("id = 2", {"qty": "199"}, engine=engine), "qty_ok")
    table.update("id = 1", {"ts": "TIMESTAMP '2025-06-01 10:30:00'"}, engine=engine)  # day, ym, hr follow
    table.update("id = 2", {"name": "lower(name)", "qty": "41"}, engine=engine)  # code, bucket follow
    table.delete("id = 4", mode="dv", engine=engine)
    assert table.historyRecords(1)[0]["operationMetrics"]["numDeletionVectorsAdded"] in (1, "1")
    source = _arrow(SOURCE) if engine == "local" else frame(SOURCE)
    builder = table.alias("t").merge(source, "t.id = s.id", source_alias="s") if engine == "local" else \
        table.alias("t").merge(source.alias("s"), "t.id = s.id")
    (builder.whenMatchedUpdate(set={"name": "s.name", "ts": "s.ts", "qty": "s.qty"})
     .whenNotMatchedInsertAll().withEngine(engine).execute())


def test_function_generated_columns_and_constraints_on_both_executors(spark: Any, tmp_path: Path) -> None:
    local_root = _delta_spark_table(tmp_path / "local")
    spark_root = _delta_spark_table(tmp_path / "spark")
    _change(local_root, spark, "local")
    _change(spark_root, spark, "spark")
    local_rows, spark_rows = rows_delta_rs(local_root, COLUMNS), rows_delta_rs(spark_root, COLUMNS)
    assert local_rows == spark_rows
    expected = sorted(_expected())
    assert sorted(local_rows) == expected
    assert sorted(rows_duckdb(local_root, ["id", *GENERATED])) == sorted((r[0], *r[4:]) for r in expected)
