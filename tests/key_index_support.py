"""What the key-index tests share: an empty column cache around each test (the indexes live in
it, so one test's index must not answer another's lookup) and the check that a predicate shape is
left to the general filter path."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
