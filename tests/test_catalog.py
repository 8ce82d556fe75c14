"""dvengine.storage.catalog: name resolution as Spark's session catalog does it, and safe concurrent writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from dvengine.errors import CatalogError, InvalidArgumentError
from dvengine.storage import catalog


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("t", ("default", "t")),
        ("T", ("default", "t")),
        ("db.t", ("db", "t")),
        ("spark_catalog.db.t", ("db", "t")),
        ("`my db`.`a.b`", ("my db", "a.b")),
        ("`x``y`", ("default", "x`y")),
    ],
)
def test_split_name(name: str, expected: tuple[str, str]) -> None:
    assert catalog.split_name(name) == expected


@pytest.mark.parametrize("name", ["", "a.b.c.d", "a..b", "`unclosed"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        catalog.split_name(name)


def test_managed_layout(tmp_path: Path) -> None:
    assert catalog.default_location("t", str(tmp_path)) == str(tmp_path / "t")
    assert catalog.default_location("sales.t", str(tmp_path)) == str(tmp_path / "sales.db" / "t")


def test_register_lookup_unregister(tmp_path: Path) -> None:
    wh = str(tmp_path)
    assert catalog.lookup_table("t", wh) is None
    catalog.register_table("t", str(tmp_path / "x"), wh)
    assert catalog.lookup_table("DEFAULT.T", wh) == str(tmp_path / "x")
    catalog.register_table("t", str(tmp_path / "y"), wh)  # re-registering replaces
    assert catalog.list_tables(wh) == {"default.t": str(tmp_path / "y")}
    assert catalog.unregister_table("t", wh) is True
    assert catalog.lookup_table("t", wh) is None and catalog.unregister_table("t", wh) is False


def test_concurrent_registrations_are_all_kept(tmp_path: Path) -> None:
    wh = str(tmp_path)
    names = [f"t{i}" for i in range(40)]
    threads = [threading.Thread(target=catalog.register_table, args=(n, f"/data/{n}", wh)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert catalog.list_tables(wh) == {f"default.{n}": f"/data/{n}" for n in names}
    assert json.loads((tmp_path / catalog.CATALOG_FILE).read_text())["tables"]["default.t0"] == "/data/t0"
    assert not list(tmp_path.glob(".catalog-*"))  # no temp files left behind


def test_corrupt_catalog_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / catalog.CATALOG_FILE).write_text("{not json")
    with pytest.raises(CatalogError, match=catalog.CATALOG_FILE):
        catalog.lookup_table("t", str(tmp_path))
