"""What the key-index tests share: an empty column cache around each test (the indexes live in
it, so one test's index must not answer another's lookup), the check that a predicate shape is
left to the general filter path, and a two-file table of random rows to compare lookups with the
whole-file filter on."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dvengine
from dvengine.engine.local import column_cache
from dvengine.engine.local.point_lookup import point_lookup
from dvengine.errors import DvengineError
from dvengine.expressions import parse_predicate
from dvengine.protocol.schema import StructType


@pytest.fixture(autouse=True)
def fresh_column_cache() -> Iterator[None]:
    """Autouse in every module that imports it."""
    column_cache.clear_column_cache()
    yield
    column_cache.clear_column_cache()


def assert_general_path(text: str, schema: StructType) -> None:
    """``text`` is no point lookup: the binder refuses it (a typed error), or it binds to a
    predicate ``point_lookup`` declines."""
    try:
        predicate = parse_predicate(text, schema)
    except DvengineError:
        return
    assert point_lookup(predicate) is None, text


BASE_DATE = dt.date(2024, 1, 1)


def write_two_random_files(root: str, seed: int, n: int = 400) -> str:
    """A table of two files of the same ``n`` random rows, NULLs in every column (~10 %): one
    unsorted, one sorted by (id, s). Columns id BIGINT (0-39), s STRING ('a', 'b', '', 'é', 'x'),
    x INT (-4..4), f DOUBLE (with NaN), d DATE (BASE_DATE + 0..3 days), ok BOOLEAN, dec DECIMAL (all NULL)."""
    rng = np.random.default_rng(seed)

    def column(values: list[Any], kind: pa.DataType) -> pa.Array:
        return pa.array([None if rng.random() < 0.1 else v for v in values], kind)

    table = pa.table({
        "id": column(rng.integers(0, 40, n).tolist(), pa.int64()),
        "s": column([["a", "b", "", "é", "x"][i % 5] for i in rng.integers(0, 5, n)], pa.string()),
        "x": column(rng.integers(-4, 5, n).tolist(), pa.int32()),
        "f": column([float(v) for v in rng.choice([-1.0, 0.0, 1.5, 2.0, float("nan")], n)], pa.float64()),
        "d": column([BASE_DATE + dt.timedelta(days=int(v)) for v in rng.integers(0, 4, n)], pa.date32()),
        "ok": column([bool(v) for v in rng.integers(0, 2, n)], pa.bool_()),
        "dec": column([None] * n, pa.decimal128(10, 2)),
    })
    dvengine.write(table, root)
    dvengine.write(table.sort_by([("id", "ascending"), ("s", "ascending")]), root, mode="append")
    return root
