"""The local executor's column cache (dvengine/engine/local/column_cache.py): hits only for the
same immutable file, columns and schema; bounded; off at 0; and DML results unchanged by it
across schema evolution (checked against a model and delta-rs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.engine.local import column_cache
from dvengine.engine.local.executor import match_file
from dvengine.expressions import parse_predicate
from dvengine.log import load_snapshot


@pytest.fixture(autouse=True)
def _empty() -> Any:
    column_cache.clear_column_cache()
    yield
    column_cache.clear_column_cache()


def _table(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([tag] * len(ids))})


def _counting_reader(reads: list[int]) -> Any:
    def read() -> tuple[int, pa.Table]:
        reads.append(1)
        return 10, pa.table({"id": pa.array(range(10), pa.int64())})

    return read


def test_hits_share_the_read_and_keys_separate_what_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_table(list(range(10)), "a"), root)
    snap = load_snapshot(root)
    (add,) = snap.files
    reads: list[int] = []
    read = _counting_reader(reads)

    first = column_cache.cached_columns(snap, add, ["id"], read)
    again = column_cache.cached_columns(snap, add, ["id"], read)
    assert again[0] == first[0] and again[1] is first[1]
    column_cache.cached_columns(snap, add, ["id", "v"], read)  # other columns: a miss
    column_cache.cached_columns(snap, add, None, read)
    assert len(reads) == 3
    monkeypatch.setenv(column_cache.ENV_BYTES, "0")  # off
    column_cache.cached_columns(snap, add, ["id"], read)
    assert len(reads) == 4
    monkeypatch.setenv(column_cache.ENV_BYTES, "200")  # tiny: nothing over 50 bytes is kept
    column_cache.clear_column_cache()
    column_cache.cached_columns(snap, add, ["id"], read)
    column_cache.cached_columns(snap, add, ["id"], read)
    assert len(reads) == 6
    monkeypatch.setenv(column_cache.ENV_BYTES, "lots")
    with pytest.raises(Exception, match="DVENGINE_EXECUTION_COLUMNCACHEBYTES must be a number"):
        column_cache.cached_columns(snap, add, ["id"], read)


def test_a_changed_or_vanished_local_file_is_read_again(tmp_path: Path) -> None:
    """Immutability is the protocol's promise, not a fact of the disk: a hit whose file changed size or
    modification time, or is gone, is dropped so the command reads (and fails on) the real file."""
    import os

    root = str(tmp_path / "t")
    dvengine.write(_table(list(range(10)), "a"), root)
    snap = load_snapshot(root)
    (add,) = snap.files
    reads: list[int] = []
    read = _counting_reader(reads)

    column_cache.cached_columns(snap, add, ["id"], read)
    column_cache.cached_columns(snap, add, ["id"], read)
    assert len(reads) == 1
    data_file = os.path.join(root, add.path)
    with open(data_file, "ab") as f:
        f.write(b"garbage")
    column_cache.cached_columns(snap, add, ["id"], read)
    assert len(reads) == 2
    os.remove(data_file)

    def missing() -> tuple[int, pa.Table]:
        raise FileNotFoundError(data_file)

    with pytest.raises(FileNotFoundError):
        column_cache.cached_columns(snap, add, ["id"], missing)


def test_match_file_reads_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dvengine.engine.local import executor

    root = str(tmp_path / "t")
    dvengine.write(_table(list(range(10)), "a"), root)
    snap = load_snapshot(root)
    opened: list[str] = []
    real = executor.open_data_file
    monkeypatch.setattr(executor, "open_data_file", lambda s, a: opened.append(a.path) or real(s, a))
    pred = parse_predicate("id = 3", snap.schema)
    for _ in range(3):
        m = match_file(snap, snap.files[0], pred, all_columns=False)
        assert m.matched.tolist() == [3]
    assert len(opened) == 1


def test_dml_stays_right_across_schema_changes(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_table(list(range(20)), "a"), root)
    t = DeltaTable.forPath(None, root)
    model = {i: ("a", None) for i in range(20)}
    t.delete("id = 1")
    del model[1]
    widened = pa.table({"id": pa.array([20, 21], pa.int64()), "v": ["b", "b"], "w": pa.array([7, 8], pa.int64())})
    dvengine.write(widened, root, mode="append", mergeSchema=True)  # new column: same files, new schema
    model.update({20: ("b", 7), 21: ("b", 8)})
    t.update("id < 5", {"v": "'u'"})
    model.update({i: ("u", w) for i, (_v, w) in model.items() if i < 5})
    t.delete("w = 7")
    del model[20]
    got = t.toArrow()
    rows = sort_rows([(r["id"], r["v"], r["w"]) for r in got.to_pylist()])
    expected = sort_rows([(i, v, w) for i, (v, w) in model.items()])
    assert rows == expected
    assert rows_delta_rs(root, ["id", "v", "w"]) == expected
