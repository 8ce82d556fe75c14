"""Correctness checks that must pass before a measured time may count.

The expectation comes from the workload model (numpy over the generated ids); the observation
comes from reading the table after the operation. Two readers observe it: the contender's own
read-after query (which also checks that its reader applies DVs correctly) and, when the
DuckDB delta extension is installed, DuckDB's ``delta_scan`` (delta-kernel-rs), which shares
no code with either engine.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np

from dvengine.bench.data import Layout
from dvengine.bench.workloads import Workload

# Every fact is one cheap aggregate over the table, the same SQL for every reader.
FACTS_SQL = "SELECT count(*) AS n, sum(id) AS id_sum, sum(CASE WHEN value < 0 THEN 1 ELSE 0 END) AS marked FROM {table}"


@dataclass(frozen=True)
class TableFacts:
    """Row count, sum of ids and rows with a negative ``value`` (the UPDATE / MERGE marker)."""

    rows: int
    id_sum: int
    marked: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def facts_from_row(row: Any) -> TableFacts:
    n, id_sum, marked = row
    return TableFacts(int(n), int(id_sum or 0), int(marked or 0))


def expected_facts(workload: Workload, layout: Layout) -> TableFacts:
    """What any correct engine must leave behind, from ids alone."""
    total = layout.rows * (layout.rows - 1) // 2
    matched = int(np.sum(workload.matched_ids, dtype=np.int64))
    m = len(workload.matched_ids)
    if workload.kind == "delete":
        return TableFacts(layout.rows - m, total - matched, 0)
    if workload.kind == "update":
        return TableFacts(layout.rows, total, m)
    new = workload.new_ids
    return TableFacts(layout.rows + len(new), total + int(np.sum(new, dtype=np.int64)), m + len(new))


@functools.cache
def _duckdb_extension(package: str, filename: str) -> str | None:
    """Path of the DuckDB extension ``filename`` shipped by the wheel ``package``, if installed."""
    try:
        import duckdb  # noqa: F401

        files = metadata.files(package) or []
    except (ImportError, metadata.PackageNotFoundError):
        return None
    for f in files:
        if str(f).endswith(filename):
            return str(f.locate())
    return None


def duckdb_delta_extension() -> str | None:
    """Path of the DuckDB delta extension shipped by the ``duckdb-ext-delta`` wheel, if installed."""
    return _duckdb_extension("duckdb-ext-delta", "delta.duckdb_extension")


def _s3_secret(options: Mapping[str, str]) -> str:
    """DuckDB's ``CREATE SECRET`` for an endpoint given as ``AWS_*`` storage options (path-style
    URLs: a local S3 server has no per-bucket host names)."""
    endpoint = options.get("AWS_ENDPOINT_URL", "")
    host = endpoint.split("://", 1)[-1].rstrip("/")
    parts = [f"KEY_ID '{options.get('AWS_ACCESS_KEY_ID', '')}'", f"SECRET '{options.get('AWS_SECRET_ACCESS_KEY', '')}'",
             f"REGION '{options.get('AWS_REGION', 'us-east-1')}'"]
    if host:
        parts += [f"ENDPOINT '{host}'", "URL_STYLE 'path'", f"USE_SSL {'false' if endpoint.startswith('http://') else 'true'}"]
    return f"CREATE SECRET bench_s3 (TYPE s3, {', '.join(parts)})"


@contextlib.contextmanager
def duckdb_delta_connection(s3_options: Mapping[str, str] | None = None) -> Iterator[Any]:
    """A DuckDB connection with the delta extension loaded (``delta_scan`` works), closed on exit;
    None inside the block when DuckDB or ``duckdb-ext-delta`` is not installed. The one place the
    benches and the soak/torture runs open DuckDB as an independent reader.

    ``s3_options`` (``AWS_*`` storage options of an S3-compatible endpoint): httpfs is loaded too
    and given them as a secret, so ``delta_scan('s3://...')`` reads that endpoint (None inside the
    block when ``duckdb-ext-httpfs`` is not installed)."""
    extension = duckdb_delta_extension()
    httpfs = _duckdb_extension("duckdb-ext-httpfs", "httpfs.duckdb_extension") if s3_options is not None else None
    if extension is None or (s3_options is not None and httpfs is None):
        yield None
        return
    import duckdb

    con = duckdb.connect(config={"allow_unsigned_extensions": True})
    try:
        if httpfs is not None and s3_options is not None:
            con.execute(f"LOAD '{httpfs}'")
            con.execute(_s3_secret(s3_options))
        con.execute(f"LOAD '{extension}'")
        yield con
    finally:
        con.close()


def duckdb_facts(table_path: str) -> TableFacts | None:
    """Facts as DuckDB's delta_scan sees them, or None when the extension is not installed."""
    with duckdb_delta_connection() as con:
        if con is None:
            return None
        escaped = table_path.replace("'", "''")
        row = con.execute(FACTS_SQL.format(table=f"delta_scan('{escaped}')")).fetchone()
    return facts_from_row(row)


def duckdb_sql_matches(sources: list[str], predicate: str) -> int | None:
    """Rows of the generated Parquet matching ``predicate`` per DuckDB: cross-checks the numpy model."""
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    try:
        files = ", ".join("'" + s.replace("'", "''") + "'" for s in sources)
        row = con.execute(f"SELECT count(*) FROM read_parquet([{files}]) WHERE {predicate}").fetchone()
    finally:
        con.close()
    return None if row is None else int(row[0])


def mismatch(expected: TableFacts, observed: TableFacts, reader: str) -> str | None:
    """A human-readable difference, or None when the reader saw exactly what was expected."""
    if observed == expected:
        return None
    return f"{reader} saw {observed.as_dict()}, expected {expected.as_dict()}"
