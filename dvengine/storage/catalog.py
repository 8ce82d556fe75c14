"""A minimal table catalog: table name -> location, kept in one JSON file under the warehouse dir.

delta-spark resolves ``DeltaTable.forName`` and ``tableName(...)`` through Spark's session
catalog (a Hive metastore or Spark's in-memory one). dvengine has no metastore, but a name must
survive the session that created it, so the mapping lives in ``<warehouse>/_dvengine_catalog.json``
(``spark.sql.warehouse.dir``, Spark's default ``./spark-warehouse``). Writes replace the file
atomically (write a temp file, ``os.replace``) so a crash never leaves a half-written catalog,
and a lock file serialises concurrent writers on one machine. The catalog stores locations
only: schema, properties and everything else stay in the Delta log, the single source of truth.

Names are resolved as Spark does for the session catalog: case-insensitive, backticks allowed,
``db.t`` or ``spark_catalog.db.t``; an unqualified name is in database ``default``. A managed
table (no explicit location) lives at ``<warehouse>/<t>`` in ``default`` and at
``<warehouse>/<db>.db/<t>`` otherwise, Spark's layout.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator

from dvengine.errors import CatalogError, InvalidArgumentError
from dvengine.storage.uris import canonical_object_uri, is_object_uri

CATALOG_FILE = "_dvengine_catalog.json"
WAREHOUSE_CONF = "spark.sql.warehouse.dir"
# Spark's warehouse dir is a static conf (fixed when the session starts); this dvengine key can be
# set at runtime (spark.conf.set, or DVENGINE_CATALOG_WAREHOUSEDIR without a session) and wins.
WAREHOUSE_OVERRIDE_CONF = "dvengine.catalog.warehouseDir"
DEFAULT_WAREHOUSE = "spark-warehouse"
DEFAULT_DATABASE = "default"
_LOCK_TIMEOUT_S = 30.0
_PART = re.compile(r"`((?:[^`]|``)+)`|([^.`]+)")


def _strip_scheme(path: str) -> str:
    return path[len("file:") :] if path.startswith("file:") else path


def warehouse_dir(configured: str | None = None) -> str:
    """The warehouse directory: ``configured`` (from the session's conf), else the environment
    (``DVENGINE_CATALOG_WAREHOUSEDIR``, ``SPARK_SQL_WAREHOUSE_DIR``), else ``./spark-warehouse``."""
    chosen = (
        configured
        or os.environ.get("DVENGINE_CATALOG_WAREHOUSEDIR")
        or os.environ.get("SPARK_SQL_WAREHOUSE_DIR")
        or DEFAULT_WAREHOUSE
    )
    return os.path.abspath(_strip_scheme(chosen))


def split_name(name: str) -> tuple[str, str]:
    """``(database, table)`` of a table name, lower-cased; InvalidArgumentError if it is not one."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"a table name must be a non-empty string, got {name!r}")
    parts: list[str] = []
    pos = 0
    text = name.strip()
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise InvalidArgumentError(f"cannot parse table name {name!r}")
        parts.append((match.group(1).replace("``", "`") if match.group(1) is not None else match.group(2)).strip())
        pos = match.end()
        if pos < len(text):
            if text[pos] != ".":
                raise InvalidArgumentError(f"cannot parse table name {name!r}")
            pos += 1
    if parts and parts[0].lower() == "spark_catalog" and len(parts) == 3:
        parts = parts[1:]
    if len(parts) == 1:
        parts = [DEFAULT_DATABASE, parts[0]]
    if len(parts) != 2 or not all(parts):
        raise InvalidArgumentError(f"table name {name!r} must be 'table' or 'database.table'")
    return parts[0].lower(), parts[1].lower()


def qualified_name(name: str) -> str:
    """``spark_catalog.db.t``: the form DESCRIBE DETAIL shows in its ``name`` column."""
    db, table = split_name(name)
    return f"spark_catalog.{db}.{table}"


def default_location(name: str, warehouse: str | None = None) -> str:
    """Where a managed table of this name lives: Spark's warehouse layout."""
    db, table = split_name(name)
    root = warehouse_dir(warehouse)
    return os.path.join(root, table) if db == DEFAULT_DATABASE else os.path.join(root, f"{db}.db", table)


def _catalog_path(warehouse: str | None) -> str:
    return os.path.join(warehouse_dir(warehouse), CATALOG_FILE)


def _read(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise CatalogError(f"the table catalog {path} is not valid JSON: {exc}") from None
    tables = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(tables, dict):
        raise CatalogError(f"the table catalog {path} has no 'tables' object")
    return {str(k): str(v) for k, v in tables.items()}


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock file next to the catalog (O_EXCL), so read-modify-write is not lost."""
    lock = path + ".lock"
    deadline = time.monotonic() + _LOCK_TIMEOUT_S
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise CatalogError(
                    f"the table catalog lock {lock} has been held for {_LOCK_TIMEOUT_S:.0f} s; "
                    "remove it if no dvengine process is registering a table"
                ) from None
            time.sleep(0.01)
    try:
        os.close(fd)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def _write(path: str, tables: dict[str, str]) -> None:
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"tables": dict(sorted(tables.items()))}, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def register_table(name: str, location: str, warehouse: str | None = None) -> None:
    """Map ``name`` to ``location`` (replacing an earlier mapping of the same name)."""
    db, table = split_name(name)
    path = _catalog_path(warehouse)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with _locked(path):
        tables = _read(path)
        tables[f"{db}.{table}"] = canonical_object_uri(location) if is_object_uri(location) else os.path.abspath(_strip_scheme(location))
        _write(path, tables)


def unregister_table(name: str, warehouse: str | None = None) -> bool:
    """Forget ``name``; True if it was registered. The table's files are not touched."""
    db, table = split_name(name)
    path = _catalog_path(warehouse)
    if not os.path.exists(path):
        return False
    with _locked(path):
        tables = _read(path)
        found = tables.pop(f"{db}.{table}", None) is not None
        if found:
            _write(path, tables)
    return found


def lookup_table(name: str, warehouse: str | None = None) -> str | None:
    """The location registered for ``name``, or None."""
    db, table = split_name(name)
    return _read(_catalog_path(warehouse)).get(f"{db}.{table}")


def list_tables(warehouse: str | None = None) -> dict[str, str]:
    """Every registered ``db.table`` with its location."""
    return _read(_catalog_path(warehouse))
