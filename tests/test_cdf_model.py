"""Model-based property test of the change data feed: random sequences of appends, DELETE, UPDATE,
MERGE, replaceWhere / overwrite / dynamic partition overwrite writes and OPTIMIZE on a table with
``delta.enableChangeDataFeed`` (partitioned or not, NULLs in a data column and in the partition
column; ``dv``, ``rewrite`` and ``auto`` modes; all in-process, no Spark; tables without DVs, with
row tracking, column mapping or auto compaction in some runs) must give, for every version, the
whole range and random version ranges, exactly the change rows an in-memory model expects.

The model follows Delta's rules (PROTOCOL.md "Change Data Files", Delta Spark's CDCReader and its
DML commands): appends and a MERGE's inserts are ``insert`` rows, DELETE's rows ``delete`` rows,
every row an UPDATE or MERGE update matches (changed or not) an ``update_preimage`` +
``update_postimage`` pair, a replaceWhere or overwrite write the replaced rows as ``delete`` and
its new rows as ``insert``, OPTIMIZE and auto compaction (``dataChange=false``) nothing. Rows are
compared as multisets of ``(_change_type, _commit_version, id, v, part)``. The feed is read by
dvengine and by delta-rs ``load_cdf`` (an independent reader of the same log), except where
delta-rs 1.6 is known to differ (``removes_a_file_with_a_dv``; column-mapped tables).

Predicates include point lookups (``id = k``, ``id IN``: the key index paths). Updates change the
key (``id``), move rows between partitions, assign a column its own value (still a pre/post pair),
rewrite rows updated before in the same file and run over rows earlier DVs deleted; MERGE combines
conditional matched DELETE, matched UPDATE (moving partitions or not), NOT MATCHED INSERT and NOT
MATCHED BY SOURCE UPDATE / DELETE, over targets where one source row matches several target rows,
empty sources, and an unconditional DELETE with several source rows per target row (one ``delete``).
About 15 s at 40 examples; for a longer hunt raise ``max_examples``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interop import rows_arrow, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.log import load_snapshot

Row = tuple[int, str | None, int | None]  # id, v, part (NULLs in v and part: the NULL partition)
Change = tuple[str, int, int, str | None, int | None]  # _change_type, _commit_version, id, v, part
CDF = {"delta.enableChangeDataFeed": "true"}
# Table properties a run adds to CDF: none, DVs off (writer 4, every DML rewrites), row tracking,
# column mapping (change files with physical names), auto compaction (dataChange=false commits
# after DML).
TABLE_FLAVOURS: dict[str, dict[str, str]] = {
    "plain": {},
    "no-dvs": {"delta.enableDeletionVectors": "false"},
    "row-tracking": {"delta.enableRowTracking": "true"},
    "column-mapping": {"delta.columnMapping.mode": "name"},
    "auto-compact": {"delta.autoOptimize.autoCompact": "true"},
}


@dataclass(frozen=True)
class Pred:
    sql: str
    kind: str
    a: int
    b: int

    def test(self, r: Row) -> bool:
        if self.kind == "mod":
            return r[0] % self.a == self.b % self.a
        if self.kind == "lt":
            return r[0] < self.a
        if self.kind == "part":
            return r[2] == self.a
        if self.kind == "v":
            return r[1] == f"a{self.a}"
        if self.kind == "eq":
            return r[0] == self.a
        if self.kind == "in":
            return r[0] in (self.a, self.b)
        return self.a <= r[0] <= self.a + self.b  # between

    def __repr__(self) -> str:
        return self.sql


def _pred(kind: str, a: int, b: int) -> Pred:
    sql = {
        "mod": f"id % {a} = {b % a}" if a else "",
        "lt": f"id < {a}",
        "part": f"part = {a}",
        "v": f"v = 'a{a}'",
        "between": f"id BETWEEN {a} AND {a + b}",
        "eq": f"id = {a}",  # point lookups: the local executor's key index paths
        "in": f"id IN ({a}, {b})",
    }[kind]
    return Pred(sql, kind, a, b)


predicates = st.one_of(
    st.builds(lambda a, b: _pred("mod", a, b), st.integers(2, 5), st.integers(0, 4)),
    st.builds(lambda a: _pred("lt", a, 0), st.integers(0, 60)),
    st.builds(lambda a: _pred("part", a, 0), st.integers(0, 2)),
    st.builds(lambda a: _pred("v", a, 0), st.integers(0, 4)),
    st.builds(lambda a, b: _pred("between", a, b), st.integers(0, 60), st.integers(0, 15)),
    st.builds(lambda a: _pred("eq", a, 0), st.integers(0, 60)),
    st.builds(lambda a, b: _pred("in", a, b), st.integers(0, 60), st.integers(0, 1060)),
)

# UPDATE assignments: a value change, a key change, a partition move, a no-op (still pre/post images)
ASSIGNMENTS: list[tuple[dict[str, str], Any]] = [
    ({"v": "'u'"}, lambda r: (r[0], "u", r[2])),
    ({"id": "id + 1000"}, lambda r: (r[0] + 1000, r[1], r[2])),
    ({"part": "(part + 1) % 3", "v": "concat(v, 'p')"},
     lambda r: (r[0], None if r[1] is None else r[1] + "p", None if r[2] is None else (r[2] + 1) % 3)),
    ({"v": "v"}, lambda r: r),
]

modes = st.sampled_from(["dv", "rewrite", "auto"])


@dataclass(frozen=True)
class MergeShape:
    matched_delete: bool  # WHEN MATCHED AND s.id % 3 = 0 THEN DELETE (first)
    matched_update: bool  # WHEN MATCHED THEN UPDATE SET v = s.v (and part = s.part: move_part)
    insert: bool  # WHEN NOT MATCHED THEN INSERT *
    by_source_update: bool  # WHEN NOT MATCHED BY SOURCE AND t.id % 5 = 0 THEN UPDATE SET v = 'b'
    by_source_delete: bool  # WHEN NOT MATCHED BY SOURCE AND t.id % 7 = 1 THEN DELETE
    move_part: bool = False


@dataclass(frozen=True)
class DuplicateDelete:
    """WHEN MATCHED THEN DELETE alone, several source rows per key: each target row deleted once."""


merge_shapes = st.one_of(
    st.builds(MergeShape, st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.booleans()).filter(
        lambda s: s.matched_delete or s.matched_update or s.insert or s.by_source_update or s.by_source_delete
    ),
    st.just(DuplicateDelete()),
)

operations = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 12), st.booleans()),
    st.tuples(st.just("delete"), predicates, modes),
    st.tuples(st.just("update"), predicates, st.integers(0, len(ASSIGNMENTS) - 1), modes),
    st.tuples(st.just("merge"), st.lists(st.integers(0, 80), min_size=0, max_size=10, unique=True), merge_shapes, modes),
    st.tuples(st.just("optimize")),
    st.tuples(st.just("replace"), st.integers(1, 40), st.integers(0, 4)),
    st.tuples(st.just("overwrite"), st.integers(1, 5)),
    st.tuples(st.just("replace_part"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("dynamic"), st.lists(st.sampled_from([0, 1, 2, None]), min_size=1, max_size=3)),
)


def _initial_row(i: int) -> Row:
    return (i, None if i % 13 == 12 else f"a{i % 5}", None if i % 11 == 10 else i % 3)


def _table(rows: list[Row]) -> pa.Table:
    return pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "v": pa.array([r[1] for r in rows], pa.string()),
        "part": pa.array([r[2] for r in rows], pa.int32()),
    })


def _merge(t: DeltaTable, source: list[Row], shape: MergeShape | DuplicateDelete, mode: str) -> dict[str, Any]:
    m = t.alias("t").merge(_table(source), "t.id = s.id", source_alias="s").withEngine("local").withMode(mode)
    if isinstance(shape, DuplicateDelete):
        return m.whenMatchedDelete().executeMetrics()
    if shape.matched_delete:
        m = m.whenMatchedDelete("s.id % 3 = 0")
    if shape.matched_update:
        m = m.whenMatchedUpdate(set={"v": "s.v", "part": "s.part"} if shape.move_part else {"v": "s.v"})
    if shape.insert:
        m = m.whenNotMatchedInsertAll()
    if shape.by_source_update:
        m = m.whenNotMatchedBySourceUpdate("t.id % 5 = 0", {"v": "'b'"})
    if shape.by_source_delete:
        m = m.whenNotMatchedBySourceDelete("t.id % 7 = 1")
    return m.executeMetrics()


def _merge_source(keys: list[int], shape: MergeShape | DuplicateDelete) -> list[Row]:
    if isinstance(shape, DuplicateDelete):
        return [(k, f"d{j}", k % 3) for k in keys for j in range(1 + k % 2)]
    return [(k, f"m{k % 4}", (k + 1) % 3) for k in keys]


def _merge_model(
    model: list[Row], source: list[Row], shape: MergeShape | DuplicateDelete
) -> tuple[list[Row], list[tuple[str, Row]]]:
    """The table after the MERGE and its changes. Source ids are unique except for DuplicateDelete;
    target ids may repeat (appends of existing ids), so one source row can match several target rows."""
    by_id = {s[0]: s for s in source}
    out: list[Row] = []
    changes: list[tuple[str, Row]] = []
    matched_ids = set()
    for r in model:
        s = by_id.get(r[0])
        if s is not None:
            matched_ids.add(s[0])
            if isinstance(shape, DuplicateDelete) or (shape.matched_delete and s[0] % 3 == 0):
                changes.append(("delete", r))
                continue
            if shape.matched_update:
                new = (r[0], s[1], s[2] if shape.move_part else r[2])
                changes += [("update_preimage", r), ("update_postimage", new)]
                out.append(new)
                continue
            out.append(r)
            continue
        if isinstance(shape, DuplicateDelete):
            out.append(r)
            continue
        if shape.by_source_update and r[0] % 5 == 0:
            new = (r[0], "b", r[2])
            changes += [("update_preimage", r), ("update_postimage", new)]
            out.append(new)
            continue
        if shape.by_source_delete and r[0] % 7 == 1:
            changes.append(("delete", r))
            continue
        out.append(r)
    if not isinstance(shape, DuplicateDelete) and shape.insert:
        for s in source:
            if s[0] not in matched_ids:
                changes.append(("insert", s))
                out.append(s)
    return out, changes


def _feed_dvengine(path: str, start: int, end: int) -> Counter[Change]:
    table = DeltaTable.forPath(None, path).changes(start, end)
    return Counter(
        (r["_change_type"], r["_commit_version"], r["id"], r["v"], r["part"]) for r in table.to_pylist()
    )


def _feed_delta_rs(path: str, start: int, end: int) -> Counter[Change]:
    import deltalake

    table = pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=start, ending_version=end).read_all())
    return Counter(
        (r["_change_type"], int(r["_commit_version"]), r["id"], r["v"], r["part"]) for r in table.to_pylist()
    )


def _run(
    path: str, partitioned: bool, flavour: str, initial: int, ops: list[Any]
) -> tuple[list[Row], dict[int, list[Change]]]:
    """Run ``ops``; returns the model's rows and the expected changes of every version."""
    model: list[Row] = [_initial_row(i) for i in range(initial)]
    for chunk in range(3):  # three files (per partition), so DML touches several and OPTIMIZE has work
        rows = model[chunk::3]
        dvengine.write(_table(rows), path, mode="append" if chunk else "error",
                       partitionBy=["part"] if partitioned and not chunk else None,
                       configuration=None if chunk else {**CDF, **TABLE_FLAVOURS[flavour]})
    expected: dict[int, list[Change]] = {
        v: [("insert", v, *r) for r in model[v::3]] for v in range(3)
    }
    next_id = initial
    t = DeltaTable.forPath(None, path)
    for op in ops:
        if flavour == "no-dvs":  # without DVs every DML rewrites (mode="dv" is refused)
            op = tuple("rewrite" if x == "dv" else x for x in op)
        before = load_snapshot(path).version
        changes: list[tuple[str, Row]] = []
        version: int | None
        if op[0] == "append":
            if op[2]:  # new ids
                new = [_initial_row(i) for i in range(next_id, next_id + op[1])]
                next_id += op[1]
            else:  # ids the table may hold already: MERGE then matches several target rows per source row
                new = [(i * 7 % 50, f"c{i}", i % 3) for i in range(op[1])]
            version = dvengine.write(_table(new), path, mode="append")
            changes = [("insert", r) for r in new]
            model += new
        elif op[0] == "delete":
            pred, mode = op[1], op[2]
            version = t.deleteMetrics(pred.sql, mode=mode, engine="local")["version"]
            changes = [("delete", r) for r in model if pred.test(r)]
            model = [r for r in model if not pred.test(r)]
        elif op[0] == "update":
            pred, which, mode = op[1], op[2], op[3]
            assignment, apply = ASSIGNMENTS[which]
            version = t.updateMetrics(pred.sql, assignment, mode=mode, engine="local")["version"]
            for r in model:
                if pred.test(r):
                    changes += [("update_preimage", r), ("update_postimage", apply(r))]
            model = [apply(r) if pred.test(r) else r for r in model]
        elif op[0] == "merge":
            keys, shape, mode = op[1], op[2], op[3]
            source = _merge_source(keys, shape)
            version = _merge(t, source, shape, mode)["version"]
            model, changes = _merge_model(model, source, shape)
        elif op[0] == "optimize":
            t.optimize().executeCompaction()
            version = None  # dataChange=false: whatever it commits has no changes
        elif op[0] == "replace":  # replaceWhere on a data column: the replaced rows go, the new ones come
            bound, count = op[1], op[2]
            new = [(bound - 1 - i, f"r{i}", i % 3) for i in range(min(count, bound))]
            version = dvengine.write(_table(new), path, mode="overwrite", replaceWhere=f"id < {bound}")
            changes = [("delete", r) for r in model if r[0] < bound] + [("insert", r) for r in new]
            model = [r for r in model if r[0] >= bound] + new
        elif op[0] == "replace_part":  # replaceWhere on the partition column (a data column when unpartitioned)
            part, count = op[1], op[2]
            new = [(next_id + i, f"q{i}", part) for i in range(count)]
            next_id += count
            version = dvengine.write(_table(new), path, mode="overwrite", replaceWhere=f"part = {part}")
            changes = [("delete", r) for r in model if r[2] == part] + [("insert", r) for r in new]
            model = [r for r in model if r[2] != part] + new
        elif op[0] == "dynamic":  # dynamic partition overwrite: the partitions the data writes to (all rows unpartitioned)
            new = [(next_id + i, f"y{i}", part) for i, part in enumerate(op[1])]
            next_id += len(new)
            version = dvengine.write(_table(new), path, mode="overwrite", partitionOverwriteMode="dynamic")
            replaced = [r for r in model if not partitioned or r[2] in op[1]]
            changes = [("delete", r) for r in replaced] + [("insert", r) for r in new]
            model = [r for r in model if partitioned and r[2] not in op[1]] + new
        else:  # a plain overwrite: every file removed, new ones added
            new = [(next_id + i, f"o{i}", i % 3) for i in range(op[1])]
            next_id += op[1]
            version = dvengine.write(_table(new), path, mode="overwrite")
            changes = [("delete", r) for r in model] + [("insert", r) for r in new]
            model = new
        after = load_snapshot(path).version
        for v in range(before + 1, after + 1):
            expected[v] = []
        if changes:
            assert version is not None and before < version <= after, (op, version)
            expected[version] = [(kind, version, *r) for kind, r in changes]
        elif version is not None and op[0] in ("delete", "update", "merge"):
            assert version == before  # nothing matched: nothing committed
    return model, expected


def removes_a_file_with_a_dv(path: str, version: int) -> bool:
    """Whether ``version`` (without cdc files) removes a file that has a DV without re-adding it.

    delta-rs 1.6 ``load_cdf`` reads such a file's DV-deleted rows as the ``delete`` rows, instead
    of its live rows (Delta's CDCReader reads removed files with their DV applied): a DELETE in
    ``dv`` mode, then an overwrite, reads the earlier deleted row again and misses the live ones
    (tests/test_cdf.py::test_delta_rs_reads_a_removed_file_with_a_dv_inverted). Those versions
    are compared with dvengine's reader only."""
    actions = [json.loads(line) for line in (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]
    if any("cdc" in a for a in actions):
        return False
    added = {a["add"]["path"] for a in actions if "add" in a}
    return any(
        "remove" in a and a["remove"].get("dataChange", True) and a["remove"].get("deletionVector")
        and a["remove"]["path"] not in added
        for a in actions
    )


def check_feed(path: str, expected: dict[int, list[Change]], ranges: list[tuple[int, int]], delta_rs: bool = True) -> None:
    latest = max(expected)
    assert sorted(expected) == list(range(latest + 1))
    delta_rs_differs = {v for v in range(latest + 1) if removes_a_file_with_a_dv(path, v)}
    for start, end in [*((v, v) for v in range(latest + 1)), (0, latest), *ranges]:
        end = min(end, latest)
        if start > end:
            continue
        want = Counter(c for v in range(start, end + 1) for c in expected[v])
        got = _feed_dvengine(path, start, end)
        assert got == want, (start, end, sorted((got - want).elements()), sorted((want - got).elements()))
        if delta_rs and not delta_rs_differs.intersection(range(start, end + 1)):
            assert _feed_delta_rs(path, start, end) == want, (start, end, "delta-rs")


@contextmanager
def _auto_compact_min_files(value: str | None) -> Iterator[None]:
    """Delta's autoCompact.minNumFiles (50 by default) for one run, so the small tables here compact."""
    key = "SPARK_DATABRICKS_DELTA_AUTOCOMPACT_MINNUMFILES"
    before = os.environ.get(key)
    if value is not None:
        os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partitioned=st.booleans(),
    flavour=st.sampled_from(sorted(TABLE_FLAVOURS)),
    initial=st.integers(6, 45),
    ops=st.lists(operations, min_size=1, max_size=6),
    ranges=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=2),
)
def test_change_feed_matches_model(
    partitioned: bool, flavour: str, initial: int, ops: list[Any], ranges: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, _auto_compact_min_files("4" if flavour == "auto-compact" else None):
        path = str(Path(tmp) / "t")
        model, expected = _run(path, partitioned, flavour, initial, ops)
        assert rows_arrow(path, ["id", "v", "part"]) == sort_rows(model)
        # delta-rs 1.6 refuses CDF reads of column-mapped tables ("Column mapping is not supported")
        check_feed(path, expected, ranges, delta_rs=flavour != "column-mapping")
