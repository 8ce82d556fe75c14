"""Identity columns on change-data-feed tables: the feed carries the identity values the table holds.

A GENERATED ALWAYS identity table with ``delta.enableChangeDataFeed=true`` is changed by MERGE
(update + insert: the inserted rows get new identity values while the MERGE runs), UPDATE (pre and
post images of the same identity value) and DELETE, on the local executor and on the Spark row plan
(forced, as ``test_spark_row_plans_keep_row_ids`` does: the row plan assigns identity values inside
Spark, per partition). Truth: an in-memory model of the rows (identity value -> v) and the feed each
command must produce from it; the feed is read by dvengine and by delta-rs' ``load_cdf``, the table
by delta-rs and DuckDB. A feed row whose identity value differs from the table's (values drawn
twice, or the change file written before the values were assigned) fails the comparison.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from dml_helpers import spark_conf
from interop import rows_delta_rs
from test_cdf import check_feed, check_table

import dvengine
from dvengine import DeltaTable, IdentityGenerator
from dvengine.log import load_snapshot

Row = tuple[Any, ...]
COLUMNS = ["id", "v"]
START, STEP = 100, 10


def _mark(root: Path) -> int:
    fields = json.loads(deltalake.DeltaTable(str(root)).schema().to_json())["fields"]
    return int(next(f for f in fields if f["name"] == "id")["metadata"]["delta.identity.highWaterMark"])


@contextlib.contextmanager
def _executor(spark: Any, engine: str) -> Iterator[Any]:
    """The session to hand commands and the engine name: local, or Spark with the row plan forced."""
    if engine == "local":
        yield None
        return
    with spark_conf(spark, "dvengine.spark.dmlStrategy", "rows"), \
            spark_conf(spark, "dvengine.execution.localMaxSourceRows", "0"):
        yield spark


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_identity_values_in_the_change_feed(request: pytest.FixtureRequest, tmp_path: Path, engine: str) -> None:
    root = tmp_path / "t"
    (DeltaTable.create(None).location(str(root))
     .addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator(start=START, step=STEP))
     .addColumn("v", "string").property("delta.enableChangeDataFeed", "true").execute())
    dvengine.write(pa.table({"v": ["a", "b", "c", "d"]}), str(root), mode="append")
    model: dict[int, str] = {START + STEP * k: v for k, v in enumerate("abcd")}  # 100 a, 110 b, 120 c, 130 d
    version = load_snapshot(str(root)).version
    check_feed(root, version, version, COLUMNS, [(i, v, "insert", version) for i, v in model.items()])
    spark = request.getfixturevalue("spark") if engine == "spark" else None

    with _executor(spark, engine) as session:
        table = DeltaTable.forPath(session, str(root))
        engine_name = "local" if session is None else "spark"

        # MERGE: b and d updated, five new rows inserted; the inserts draw values beyond the mark
        mark = _mark(root)
        values = ["b", "d", "n1", "n2", "n3", "n4", "n5"]
        source: Any = (pa.table({"v": values, "w": [v + "!" for v in values]}) if session is None
                       else session.createDataFrame([(v, v + "!") for v in values], "v string, w string").repartition(3))
        metrics = (table.alias("t").merge(source, "t.v = s.v", source_alias="s")
                   .whenMatchedUpdate(set={"v": "s.w"}).whenNotMatchedInsert(values={"v": "s.v"})
                   .withEngine(engine_name).executeMetrics())
        assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (2, 5)
        version = metrics["version"]
        table_rows: dict[int, str] = dict(rows_delta_rs(root, COLUMNS))  # type: ignore[arg-type]
        inserted = {i: v for i, v in table_rows.items() if i not in model}
        assert sorted(inserted) == [mark + STEP * k for k in range(1, 6)]  # dense beyond the old mark
        assert sorted(inserted.values()) == ["n1", "n2", "n3", "n4", "n5"]
        assert _mark(root) == mark + 5 * STEP
        expected: list[Row] = [(i, v, "insert", version) for i, v in inserted.items()]
        for i in (110, 130):
            expected += [(i, model[i], "update_preimage", version), (i, model[i] + "!", "update_postimage", version)]
            model[i] += "!"
        model |= inserted
        check_feed(root, version, version, COLUMNS, expected)
        check_table(root, COLUMNS, list(model.items()))

        # an insert-only MERGE (its change rows come from the new files, not from the joined rows)
        mark = _mark(root)
        values = ["d!", "m1", "m2"]
        source = (pa.table({"v": values}) if session is None
                  else session.createDataFrame([(v,) for v in values], "v string").repartition(2))
        metrics = (table.alias("t").merge(source, "t.v = s.v", source_alias="s").whenNotMatchedInsertAll()
                   .withEngine(engine_name).executeMetrics())
        version = metrics["version"]
        inserted = {i: v for i, v in rows_delta_rs(root, COLUMNS) if i not in model}
        assert sorted(inserted) == [mark + STEP, mark + 2 * STEP] and sorted(inserted.values()) == ["m1", "m2"]
        check_feed(root, version, version, COLUMNS, [(i, v, "insert", version) for i, v in inserted.items()])
        model |= inserted

        # UPDATE: pre and post images carry the row's identity value (DV, then copy-on-write)
        for mode, pick in (("dv", "n2"), ("rewrite", "c")):
            (i,) = [k for k, v in model.items() if v == pick]
            version = table.updateMetrics(f"v = '{pick}'", {"v": "'upd'"}, mode=mode, engine=engine_name)["version"]
            check_feed(root, version, version, COLUMNS,
                       [(i, pick, "update_preimage", version), (i, "upd", "update_postimage", version)])
            model[i] = "upd"
        check_table(root, COLUMNS, list(model.items()))

        # DELETE of an inserted row: the delete row holds the value it was inserted with
        (i,) = [k for k, v in model.items() if v == "n4"]
        version = table.deleteMetrics("v = 'n4'", engine=engine_name)["version"]
        check_feed(root, version, version, COLUMNS, [(i, "n4", "delete", version)])
        del model[i]
        check_table(root, COLUMNS, list(model.items()))
